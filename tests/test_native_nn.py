"""Focused checks of the native nn and reduce kernels beyond the ONNX node cases: dtypes kept
for float16, Attention (causal, grouped-query) and RotaryEmbedding against plain numpy
formulas, and the refusals."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from reference_runtime.executors.native.graph import plan_model

RNG = np.random.default_rng(7)


def run_node(op_type, inputs: dict, outputs: list[str], opset: int, **attrs) -> dict:
    """Run one node on numpy inputs (``None`` = an absent optional input)."""
    names = [name if value is not None else "" for name, value in inputs.items()]
    given = {name: value for name, value in inputs.items() if value is not None}
    graph = helper.make_graph(
        [helper.make_node(op_type, names, outputs, **attrs)],
        "g",
        [
            helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape
            )
            for name, value in given.items()
        ],
        [helper.make_tensor_value_info(name, TensorProto.UNDEFINED, None) for name in outputs],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    plan, problems = plan_model(model, np)
    assert not problems, problems
    return plan.run(given)


def refusals(op_type, inputs: list[str], opset: int, n_outputs: int = 1, **attrs) -> list[str]:
    outputs = [f"y{i}" for i in range(n_outputs)]
    graph = helper.make_graph(
        [helper.make_node(op_type, inputs, outputs, **attrs)],
        "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return [p.reason for p in plan_model(model, np)[1]]


# ------------------------------------------------------------------ float16 stays float16


def np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("op_type", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("opset", [11, 13])
def test_softmax_family_keeps_float16(op_type, opset):
    x = RNG.standard_normal((2, 3, 5)).astype(np.float16)
    y = run_node(op_type, {"x": x}, ["y"], opset)["y"]
    assert y.dtype == np.float16 and y.shape == x.shape
    x32 = x.astype(np.float32)
    # From opset 13 along the last axis; before, along the 2-D coercion at axis 1 (rows of 3 * 5).
    want = np_softmax(x32) if opset >= 13 else np_softmax(x32.reshape(2, 15)).reshape(x.shape)
    if op_type == "LogSoftmax":
        want = np.log(want)
    elif op_type == "Hardmax":
        flat = want.reshape(-1, want.shape[-1]) if opset >= 13 else want.reshape(2, 15)
        one_hot = np.eye(flat.shape[1])[flat.argmax(axis=1)]
        want = one_hot.reshape(x.shape)
    np.testing.assert_allclose(y.astype(np.float32), want, rtol=5e-3, atol=5e-3)


def test_layer_normalization_float16_keeps_float16_and_float32_statistics():
    x = RNG.standard_normal((2, 3, 8)).astype(np.float16)
    scale = RNG.standard_normal(8).astype(np.float16)
    bias = RNG.standard_normal(8).astype(np.float16)
    out = run_node(
        "LayerNormalization",
        {"x": x, "scale": scale, "bias": bias},
        ["y", "mean", "inv_std"],
        17,
        epsilon=1e-5,
    )
    assert out["y"].dtype == np.float16
    assert out["mean"].dtype == np.float32 and out["mean"].shape == (2, 3, 1)
    assert out["inv_std"].dtype == np.float32
    x32 = x.astype(np.float32)
    mean = x32.mean(-1, keepdims=True)
    inv_std = 1 / np.sqrt(x32.var(-1, keepdims=True) + 1e-5)
    want = (x32 - mean) * inv_std * scale.astype(np.float32) + bias.astype(np.float32)
    np.testing.assert_allclose(out["y"].astype(np.float32), want, rtol=1e-2, atol=1e-2)
    np.testing.assert_allclose(out["mean"], mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["inv_std"], inv_std, rtol=1e-4)


def test_matmul_and_gemm_float16_stay_float16():
    a = RNG.standard_normal((3, 4)).astype(np.float16)
    b = RNG.standard_normal((4, 5)).astype(np.float16)
    c = RNG.standard_normal(5).astype(np.float16)
    assert run_node("MatMul", {"a": a, "b": b}, ["y"], 13)["y"].dtype == np.float16
    y = run_node("Gemm", {"a": a, "b": b, "c": c}, ["y"], 13, alpha=0.5, beta=2.0)["y"]
    assert y.dtype == np.float16
    want = 0.5 * a.astype(np.float32) @ b.astype(np.float32) + 2.0 * c.astype(np.float32)
    np.testing.assert_allclose(y.astype(np.float32), want, rtol=1e-2, atol=1e-2)


# ------------------------------------------------------------------ Attention


def np_attention(q, k, v, causal=False, past=0, scale=None):
    """The textbook formula on (batch, heads, seq, size) arrays, GQA by repeating KV heads."""
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ k.transpose(0, 1, 3, 2) * scale
    if causal:
        q_len, kv_len = scores.shape[-2:]
        allowed = np.arange(kv_len)[None, :] <= np.arange(q_len)[:, None] + past
        scores = np.where(allowed, scores, -np.inf)
    return np_softmax(scores) @ v


def test_attention_causal_gqa_4d_matches_the_formula():
    q = RNG.standard_normal((2, 6, 5, 8)).astype(np.float32)
    k = RNG.standard_normal((2, 2, 5, 8)).astype(np.float32)
    v = RNG.standard_normal((2, 2, 5, 4)).astype(np.float32)
    y = run_node("Attention", {"q": q, "k": k, "v": v}, ["y"], 23, is_causal=1)["y"]
    assert y.dtype == np.float32 and y.shape == (2, 6, 5, 4)
    np.testing.assert_allclose(y, np_attention(q, k, v, causal=True), rtol=1e-5, atol=1e-6)
    # Head grouping: query heads 0-2 use KV head 0, 3-5 KV head 1 (not 0, 1, 0, 1, ...).
    other = np_attention(q, k[:, [1, 0]], v[:, [1, 0]], causal=True)
    assert not np.allclose(y, other, atol=1e-3)


def test_attention_causal_gqa_3d_with_past_matches_the_formula():
    batch, q_heads, kv_heads, size, past, new = 1, 4, 2, 8, 3, 2
    q = RNG.standard_normal((batch, new, q_heads * size)).astype(np.float32)
    k = RNG.standard_normal((batch, new, kv_heads * size)).astype(np.float32)
    v = RNG.standard_normal((batch, new, kv_heads * size)).astype(np.float32)
    past_k = RNG.standard_normal((batch, kv_heads, past, size)).astype(np.float32)
    past_v = RNG.standard_normal((batch, kv_heads, past, size)).astype(np.float32)
    out = run_node(
        "Attention",
        {"q": q, "k": k, "v": v, "mask": None, "past_k": past_k, "past_v": past_v},
        ["y", "present_k", "present_v"],
        23,
        is_causal=1,
        q_num_heads=q_heads,
        kv_num_heads=kv_heads,
        scale=0.25,
    )

    def heads(x, n):
        return x.reshape(batch, -1, n, size).transpose(0, 2, 1, 3)

    full_k = np.concatenate([past_k, heads(k, kv_heads)], axis=2)
    full_v = np.concatenate([past_v, heads(v, kv_heads)], axis=2)
    want = np_attention(heads(q, q_heads), full_k, full_v, causal=True, past=past, scale=0.25)
    want = want.transpose(0, 2, 1, 3).reshape(batch, new, q_heads * size)
    np.testing.assert_allclose(out["y"], want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(out["present_k"], full_k)
    np.testing.assert_array_equal(out["present_v"], full_v)


def test_attention_bool_mask_and_fully_masked_row_gives_zeros():
    q = RNG.standard_normal((1, 2, 3, 4)).astype(np.float32)
    k = RNG.standard_normal((1, 2, 3, 4)).astype(np.float32)
    v = RNG.standard_normal((1, 2, 3, 4)).astype(np.float32)
    mask = np.array([[True, False, True], [False, False, False], [True, True, True]])
    y = run_node("Attention", {"q": q, "k": k, "v": v, "m": mask}, ["y"], 23)["y"]
    scores = q @ k.transpose(0, 1, 3, 2) / 2.0
    with np.errstate(invalid="ignore"):  # the fully masked row is NaN in the plain formula
        want = np_softmax(np.where(mask, scores, -np.inf)) @ v
    np.testing.assert_allclose(y[:, :, [0, 2]], want[:, :, [0, 2]], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(y[:, :, 1], 0.0)


def test_attention_float16_keeps_float16():
    q, k, v = (RNG.standard_normal((1, 2, 4, 8)).astype(np.float16) for _ in range(3))
    y = run_node("Attention", {"q": q, "k": k, "v": v}, ["y"], 23, is_causal=1)["y"]
    assert y.dtype == np.float16
    want = np_attention(*(x.astype(np.float32) for x in (q, k, v)), causal=True)
    np.testing.assert_allclose(y.astype(np.float32), want, rtol=1e-2, atol=1e-2)


# ------------------------------------------------------------------ RotaryEmbedding


def np_rotary(x, cos, sin, interleaved):
    """(batch, heads, seq, size) rotated as complex numbers: pairs (2i, 2i+1) when
    interleaved, (i, i + size/2) otherwise, by angles with the given cos/sin (batch, seq, size/2)."""
    half = x.shape[-1] // 2
    z = x[..., 0::2] + 1j * x[..., 1::2] if interleaved else x[..., :half] + 1j * x[..., half:]
    z = z * (cos + 1j * sin)[:, None]
    if interleaved:
        return np.stack([z.real, z.imag], axis=-1).reshape(x.shape)
    return np.concatenate([z.real, z.imag], axis=-1)


@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_embedding_interleaved_or_halves(interleaved):
    batch, heads, seq, size, max_pos = 2, 3, 4, 8, 10
    x = RNG.standard_normal((batch, heads, seq, size)).astype(np.float32)
    angles = RNG.uniform(0, 6.3, (max_pos, size // 2))
    cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
    positions = RNG.integers(0, max_pos, (batch, seq)).astype(np.int64)
    y = run_node(
        "RotaryEmbedding",
        {"x": x, "cos": cos, "sin": sin, "pos": positions},
        ["y"],
        23,
        interleaved=interleaved,
    )["y"]
    want = np_rotary(x, cos[positions], sin[positions], interleaved)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
    other = np_rotary(x, cos[positions], sin[positions], 1 - interleaved)
    assert not np.allclose(y, other, atol=1e-3)


def test_rotary_embedding_3d_partial_float16():
    batch, heads, seq, size, rot = 1, 2, 3, 8, 4
    x = RNG.standard_normal((batch, seq, heads * size)).astype(np.float16)
    angles = RNG.uniform(0, 6.3, (batch, seq, rot // 2))
    cos, sin = np.cos(angles).astype(np.float16), np.sin(angles).astype(np.float16)
    y = run_node(
        "RotaryEmbedding",
        {"x": x, "cos": cos, "sin": sin},
        ["y"],
        23,
        num_heads=heads,
        rotary_embedding_dim=rot,
    )["y"]
    assert y.dtype == np.float16 and y.shape == x.shape
    x4 = x.astype(np.float32).reshape(batch, seq, heads, size).transpose(0, 2, 1, 3)
    want = x4.copy()
    want[..., :rot] = np_rotary(x4[..., :rot], cos.astype(np.float32), sin.astype(np.float32), 0)
    want = want.transpose(0, 2, 1, 3).reshape(x.shape)
    np.testing.assert_allclose(y.astype(np.float32), want, rtol=1e-2, atol=1e-2)


# ------------------------------------------------------------------ reductions


def test_reductions_keep_small_int_dtypes_and_empty_sets():
    x = np.full((2, 3), 100, dtype=np.int8)
    y = run_node("ReduceSum", {"x": x, "axes": np.array([1])}, ["y"], 13, keepdims=0)["y"]
    assert y.dtype == np.int8  # wraps like int8 arithmetic, no promotion to int64
    empty = np.zeros((2, 0), dtype=np.int32)
    y = run_node("ReduceMax", {"x": empty, "axes": np.array([1])}, ["y"], 18)["y"]
    np.testing.assert_array_equal(y, np.full((2, 1), np.iinfo(np.int32).min, dtype=np.int32))
    y = run_node("ReduceMin", {"x": empty.astype(np.float32)}, ["y"], 18, keepdims=0)["y"]
    assert y.shape == () and y == np.inf


def test_noop_with_empty_axes_still_runs_the_elementwise_steps():
    x = RNG.uniform(0.5, 2.0, (2, 3)).astype(np.float32)
    y = run_node("ReduceSumSquare", {"x": x}, ["y"], 18, noop_with_empty_axes=1)["y"]
    np.testing.assert_allclose(y, x * x)
    y = run_node("ReduceLogSum", {"x": x}, ["y"], 18, noop_with_empty_axes=1)["y"]
    np.testing.assert_allclose(y, np.log(x), rtol=1e-6)
    y = run_node("ReduceMean", {"x": x}, ["y"], 18, noop_with_empty_axes=1)["y"]
    np.testing.assert_array_equal(y, x)


def test_reduce_float16_accumulates_wider_and_stays_float16():
    x = np.full(4096, 1.0, dtype=np.float16)  # a float16 running sum stalls at 2048
    y = run_node("ReduceSum", {"x": x}, ["y"], 13, keepdims=0)["y"]
    assert y.dtype == np.float16 and float(y) == 4096.0


# ------------------------------------------------------------------ refusals


def test_training_modes_are_refused():
    assert any(
        "training_mode" in r
        for r in refusals("BatchNormalization", ["x", "s", "b", "m", "v"], 15, training_mode=1)
    )
    assert any("is_test" in r for r in refusals("Dropout", ["x"], 6))
    assert any("training_mode" in r for r in refusals("Dropout", ["x", "r", "t"], 13))
    x = np.ones((2, 2), dtype=np.float32)
    out = run_node("Dropout", {"x": x, "r": np.array(0.5, dtype=np.float32)}, ["y", "m"], 13)
    np.testing.assert_array_equal(out["y"], x)
    assert out["m"].dtype == np.bool_ and out["m"].all()
    out = run_node("Dropout", {"x": x}, ["y", "m"], 7)
    assert out["m"].dtype == np.float32 and out["m"].all()


def test_attention_refuses_unknown_qk_output_mode():
    reasons = refusals("Attention", ["q", "k", "v"], 23, qk_matmul_output_mode=7)
    assert any("qk_matmul_output_mode" in r for r in reasons)


def test_stash_type_other_than_float_is_refused():
    reasons = refusals("LayerNormalization", ["x", "s"], 17, stash_type=11)
    assert any("stash_type" in r for r in reasons)
