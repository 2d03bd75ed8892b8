"""Focused checks of the native elementwise kernels that the ONNX node cases miss: integer
division and modulo signs, uint64 shift wrap-around, shifts past the bit width, load-time
refusal of casts without a faithful dtype, erf accuracy and float16 dtype preservation."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from reference_runtime.executors.native.graph import plan_model


def single(op: str, inputs: list, opset: int = 21, **attrs) -> onnx.ModelProto:
    names = [f"in{i}" for i in range(len(inputs))]
    node = helper.make_node(op, names, ["out"], **attrs)
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
            for n, v in zip(names, inputs, strict=True)
        ],
        [helper.make_tensor_value_info("out", TensorProto.UNDEFINED, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def run(op: str, *inputs, opset: int = 21, **attrs):
    plan, problems = plan_model(single(op, list(inputs), opset, **attrs), np)
    assert not problems, problems
    return plan.run({f"in{i}": v for i, v in enumerate(inputs)})["out"]


# ---------------------------------------------------------------- integer Div and Mod


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64])
def test_integer_div_truncates_toward_zero(dtype):
    a = np.array([-7, 7, -7, 7, -6, 0, -1], dtype=dtype)
    b = np.array([2, 2, -2, -2, 3, -5, 4], dtype=dtype)
    got = run("Div", a, b)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, [-3, 3, 3, -3, -2, 0, 0])


def test_unsigned_div_and_uint64_extremes():
    a = np.array([2**64 - 1, 7], dtype=np.uint64)
    b = np.array([2, 2], dtype=np.uint64)
    np.testing.assert_array_equal(run("Div", a, b), np.array([2**63 - 1, 3], dtype=np.uint64))


@pytest.mark.parametrize(
    ("fmod", "want"),
    [
        (0, [2, 1, -1, -2, 0]),  # Python %: the sign of the divisor
        (1, [-1, 1, -1, 1, 0]),  # C fmod: the sign of the dividend
    ],
)
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
def test_integer_mod_signs(fmod, want, dtype):
    a = np.array([-7, 7, -7, 7, -6], dtype=dtype)
    b = np.array([3, 3, -3, -3, 3], dtype=dtype)
    got = run("Mod", a, b, fmod=fmod)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, want)


def test_mod_refuses_an_unknown_fmod():
    x = np.ones(2, np.int32)
    _, problems = plan_model(single("Mod", [x, x], fmod=2), np)
    assert problems and "fmod=2" in problems[0].reason


# ---------------------------------------------------------------- BitShift


def test_uint64_left_shift_wraps():
    x = np.array([2**64 - 1, 2**63, 1, 3], dtype=np.uint64)
    y = np.array([4, 1, 63, 63], dtype=np.uint64)
    got = run("BitShift", x, y, direction="LEFT")
    assert got.dtype == np.uint64
    np.testing.assert_array_equal(got, np.array([2**64 - 16, 0, 2**63, 2**63], dtype=np.uint64))


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_uint64_shift_by_the_bit_width_or_more_is_zero(direction):
    x = np.array([2**64 - 1, 5], dtype=np.uint64)
    y = np.array([64, 200], dtype=np.uint64)
    np.testing.assert_array_equal(run("BitShift", x, y, direction=direction), [0, 0])


def test_signed_shifts_sign_extend_and_saturate_at_the_width():
    x = np.array([-8, -8, 8, 64, -1], dtype=np.int8)
    y = np.array([1, 9, 9, 1, -1], dtype=np.int8)
    right = run("BitShift", x, y, direction="RIGHT", opset=28)
    np.testing.assert_array_equal(right, [-4, -1, 0, 32, -1])
    left = run("BitShift", x, y, direction="LEFT", opset=28)
    np.testing.assert_array_equal(left, [-16, 0, 0, -128, 0])  # bits past the sign drop


# ---------------------------------------------------------------- Cast refusals


@pytest.mark.parametrize(
    "to", [TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E5M2, TensorProto.INT4, TensorProto.STRING]
)
def test_cast_to_a_type_without_a_faithful_dtype_is_refused_at_load(to):
    # Cast there and back, so only the intermediate Cast node has the unsupported type.
    nodes = [
        helper.make_node("Cast", ["x"], ["mid"], to=to, name="there"),
        helper.make_node("Cast", ["mid"], ["y"], to=TensorProto.FLOAT, name="back"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    _, problems = plan_model(model, np)
    assert any(p.node == "there" and "Cast to" in p.reason for p in problems), problems


def test_supported_casts_round_trip():
    x = np.array([1.5, -2.5, 127.9], dtype=np.float32)
    np.testing.assert_array_equal(run("Cast", x, to=TensorProto.INT8), [1, -2, 127])  # truncates
    wrapped = run("Cast", np.array([200, -129], np.int16), to=TensorProto.INT8)
    np.testing.assert_array_equal(wrapped, [-56, 127])  # fixed point out of range wraps
    got = run("Cast", x, to=TensorProto.FLOAT16)
    assert got.dtype == np.float16
    got = run("Cast", np.array([0.0, -0.0, np.nan, 2.0], np.float32), to=TensorProto.BOOL)
    np.testing.assert_array_equal(got, [False, False, True, True])


# ---------------------------------------------------------------- float16 and erf


FLOAT16_UNARY = [
    "Neg", "Abs", "Sign", "Sqrt", "Exp", "Log", "Reciprocal", "Floor", "Ceil", "Round", "Sin",
    "Cos", "Tan", "Tanh", "Erf", "Sigmoid", "Relu", "LeakyRelu", "Elu", "Selu", "HardSigmoid",
    "HardSwish", "Softplus", "Softsign", "Gelu", "Mish", "Identity",
]  # fmt: skip


@pytest.mark.parametrize("op", FLOAT16_UNARY)
def test_float16_unary_ops_keep_float16_and_match_float32(op):
    x32 = np.linspace(0.1, 3.0, 17, dtype=np.float32)
    got = run(op, x32.astype(np.float16))
    assert got.dtype == np.float16
    want = run(op, x32.astype(np.float16).astype(np.float32))
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=2e-3, atol=1e-3)


@pytest.mark.parametrize(
    ("op", "attrs"),
    [("Add", {}), ("Sub", {}), ("Mul", {}), ("Div", {}), ("Pow", {}), ("Max", {}), ("Min", {}),
     ("Sum", {}), ("Mean", {}), ("Mod", {"fmod": 1})],
)  # fmt: skip
def test_float16_binary_ops_keep_float16(op, attrs):
    a = np.array([1.5, 2.0, -3.25], np.float16)
    b = np.array([0.5, 3.0, 2.0], np.float16)
    assert run(op, a, b, **attrs).dtype == np.float16


def test_pow_output_has_the_base_dtype():
    base = np.array([1.5, 2.0, 4.0], np.float16)
    assert run("Pow", base, np.array([2, 3, -1], np.int64)).dtype == np.float16
    ints = run(
        "Pow", np.array([2, -3, 2, 1, -1], np.int32), np.array([10, 3, -1, -5, -3], np.int64)
    )
    assert ints.dtype == np.int32
    np.testing.assert_array_equal(ints, [1024, -27, 0, 1, -1])


def test_erf_matches_math_erf_in_float64():
    x = np.concatenate([np.linspace(-7, 7, 2001), [1e-300, -1e-20, 0.84375, 1.25, 1 / 0.35, 6]])
    want = np.array([math.erf(v) for v in x])
    np.testing.assert_allclose(run("Erf", x), want, rtol=4e-16, atol=0)
    edges = run("Erf", np.array([np.inf, -np.inf, np.nan, -0.0]))
    np.testing.assert_array_equal(edges, [1.0, -1.0, np.nan, -0.0])
    assert np.signbit(edges[3])


def test_gelu_exact_and_tanh():
    x = np.linspace(-4, 4, 33)
    exact = 0.5 * x * (1 + np.array([math.erf(v / math.sqrt(2)) for v in x]))
    np.testing.assert_allclose(run("Gelu", x), exact, rtol=1e-14, atol=1e-15)
    tanh = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    np.testing.assert_allclose(run("Gelu", x, approximate="tanh"), tanh, rtol=1e-14, atol=1e-15)
    _, problems = plan_model(single("Gelu", [x], approximate="fast"), np)
    assert problems


def test_zero_dimensional_results_are_arrays():
    got = run("Add", np.array(1.0, np.float32), np.array(2.0, np.float32))
    assert isinstance(got, np.ndarray) and got.shape == () and got.dtype == np.float32


def test_clip_before_opset_11_reads_attributes():
    x = np.array([-3.0, 0.5, 9.0], np.float32)
    np.testing.assert_array_equal(run("Clip", x, opset=6, min=-1.0, max=1.0), [-1, 0.5, 1])
    np.testing.assert_array_equal(run("Clip", x, opset=6, max=1.0), [-3, 0.5, 1])
