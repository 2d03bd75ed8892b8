"""Focused checks of the native tensor and indexing kernels that the ONNX node cases miss:
clamping corners, negative indices, tie order, older-opset forms and load-time refusals."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from reference_runtime.errors import RunError
from reference_runtime.executors.native.graph import plan_model


def single(op: str, inputs: list, n_out: int = 1, opset: int = 18, **attrs) -> onnx.ModelProto:
    """A one-node model; None in ``inputs`` leaves that optional input out."""
    names = [f"in{i}" if value is not None else "" for i, value in enumerate(inputs)]
    node = helper.make_node(op, names, [f"out{i}" for i in range(n_out)], **attrs)
    graph_inputs = [
        helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
        for name, v in zip(names, inputs, strict=True)
        if name
    ]
    graph_outputs = [
        helper.make_tensor_value_info(f"out{i}", TensorProto.UNDEFINED, None) for i in range(n_out)
    ]
    graph = helper.make_graph([node], "g", graph_inputs, graph_outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def run(op: str, inputs: list, n_out: int = 1, opset: int = 18, **attrs):
    model = single(op, inputs, n_out, opset, **attrs)
    plan, problems = plan_model(model, np)
    assert not problems, problems
    feeds = {f"in{i}": v for i, v in enumerate(inputs) if v is not None}
    got = plan.run(feeds)
    outs = [got[f"out{i}"] for i in range(n_out)]
    return outs[0] if n_out == 1 else outs


def i64(*values):
    return np.array(values, dtype=np.int64)


X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
V = np.arange(5, dtype=np.float32)


# ---------------------------------------------------------------- Slice


@pytest.mark.parametrize(
    ("start", "end", "step", "want"),
    [
        # Negative steps clamp starts into [0, dim-1] and ends into [-1, dim-1].
        (100, -100, -1, [4, 3, 2, 1, 0]),
        (-100, -100, -1, [0]),  # start clamps up to 0 (Python slicing would give nothing)
        (-1, -100, -2, [4, 2, 0]),
        (3, 1, -1, [3, 2]),
        (2, 2, -1, []),
        # Positive steps clamp both into [0, dim].
        (-100, 100, 2, [0, 2, 4]),
        (100, 200, 1, []),
        (-2, -1, 1, [3]),
    ],
)
def test_slice_clamps_like_onnx(start, end, step, want):
    got = run("Slice", [V, i64(start), i64(end), i64(0), i64(step)], opset=13)
    np.testing.assert_array_equal(got, np.array(want, dtype=np.float32))


def test_slice_several_axes_with_negative_axes_and_steps():
    got = run("Slice", [X, i64(-1, 3), i64(-1000, 0), i64(0, -1), i64(-1, -2)], opset=13)
    np.testing.assert_array_equal(got, X[::-1, :, 3:0:-2])


def test_slice_opset1_attributes():
    got = run("Slice", [X], opset=1, starts=[0, 1], ends=[1, 1000], axes=[0, 2])
    np.testing.assert_array_equal(got, X[0:1, :, 1:])


# ---------------------------------------------------------------- Gather and friends


def test_gather_negative_indices():
    idx = np.array([[-1, 0], [-3, 1]], dtype=np.int64)
    np.testing.assert_array_equal(run("Gather", [X, idx], axis=1), X[:, [[2, 0], [0, 1]]])
    np.testing.assert_array_equal(run("Gather", [X, np.array(-1, np.int32)], axis=-1), X[..., 3])


def test_gather_out_of_range_index_is_an_error():
    with pytest.raises(RunError, match="out of range"):
        run("Gather", [X, i64(3)], axis=1)


def test_gather_elements_indices_smaller_than_data():
    idx = np.array([[[-1, 0, 1, -4]]], dtype=np.int64)
    got = run("GatherElements", [X, idx], axis=-1)
    np.testing.assert_array_equal(got, np.array([[[3, 0, 1, 0]]], dtype=np.float32))


def test_gather_nd_batch_dims_and_negative_indices():
    idx = np.array([[[1, 2]], [[0, -1]]], dtype=np.int64)
    got = run("GatherND", [X, idx], batch_dims=1)
    np.testing.assert_array_equal(got, np.array([[X[0, 1, 2]], [X[1, 0, 3]]]))


# ---------------------------------------------------------------- TopK, ArgMax


def test_topk_ties_pick_the_lower_index():
    x = np.array([[3, 1, 3, 2, 3, 1]], dtype=np.float32)
    values, indices = run("TopK", [x, i64(3)], n_out=2, opset=11)
    np.testing.assert_array_equal(indices, [[0, 2, 4]])
    np.testing.assert_array_equal(values, [[3, 3, 3]])
    values, indices = run("TopK", [x, i64(3)], n_out=2, opset=11, largest=0)
    np.testing.assert_array_equal(indices, [[1, 5, 3]])
    np.testing.assert_array_equal(values, [[1, 1, 2]])
    assert indices.dtype == np.int64


def test_topk_unsigned_largest_and_opset1_k_attribute():
    x = np.array([0, 7, 7, 2**63], dtype=np.uint64)
    values, indices = run("TopK", [x, i64(3)], n_out=2, opset=24)
    np.testing.assert_array_equal(indices, [3, 1, 2])
    np.testing.assert_array_equal(values, np.array([2**63, 7, 7], dtype=np.uint64))
    _, indices = run("TopK", [x.astype(np.float32)], n_out=2, opset=1, k=2)
    np.testing.assert_array_equal(indices, [3, 1])


def test_argmax_select_last_index():
    x = np.array([[1, 5, 5], [2, 2, 0]], dtype=np.float32)
    np.testing.assert_array_equal(run("ArgMax", [x], axis=1, keepdims=0), [1, 0])
    got = run("ArgMax", [x], axis=1, select_last_index=1)
    np.testing.assert_array_equal(got, [[2], [1]])
    assert got.dtype == np.int64


# ---------------------------------------------------------------- shapes


def test_reshape_zero_copies_and_minus_one_infers():
    assert run("Reshape", [X, i64(0, -1)]).shape == (2, 12)
    assert run("Reshape", [X, i64(-1, 0, 2)]).shape == (4, 3, 2)
    empty = np.zeros((0, 4), np.float32)
    assert run("Reshape", [empty, i64(4, 0)], allowzero=1).shape == (4, 0)
    with pytest.raises(RunError, match="Reshape: cannot"):
        run("Reshape", [X, i64(5, -1)])


@pytest.mark.parametrize(
    ("shape", "target", "want"),
    [
        ((3, 1), (2, 1, 6), (2, 3, 6)),  # 1 in the input takes the target's dim
        ((2, 3, 4), (4,), (2, 3, 4)),  # a shorter target lines up on the right
        ((2, 3, 4), (1, 1), (2, 3, 4)),  # 1 in the target keeps the input's dim
        ((1,), (0,), (0,)),
    ],
)
def test_expand_broadcasts_both_ways(shape, target, want):
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    got = run("Expand", [x, i64(*target)])
    assert got.shape == want
    np.testing.assert_array_equal(got, np.broadcast_to(x, want))


def test_expand_refuses_incompatible_dims():
    with pytest.raises(RunError, match="does not broadcast"):
        run("Expand", [np.zeros(3, np.float32), i64(4)])


def test_squeeze_and_unsqueeze_take_axes_as_attributes_before_opset_13():
    y = np.zeros((1, 3, 1, 2), np.float32)
    assert run("Squeeze", [y], opset=11, axes=[-2]).shape == (1, 3, 2)
    assert run("Squeeze", [y], opset=11).shape == (3, 2)
    assert run("Unsqueeze", [X], opset=11, axes=[-1, 1]).shape == (2, 1, 3, 4, 1)
    assert run("Unsqueeze", [X, i64(-1, 0)], opset=13).shape == (1, 2, 3, 4, 1)


def test_split_uneven_num_outputs_and_old_split_attribute():
    parts = run("Split", [np.arange(10, dtype=np.float32)], n_out=4, num_outputs=4)
    assert [p.shape[0] for p in parts] == [3, 3, 3, 1]
    parts = run("Split", [X], n_out=2, opset=2, axis=2, split=[1, 3])
    assert [p.shape for p in parts] == [(2, 3, 1), (2, 3, 3)]


def test_pad_negative_pads_crop_and_axes_input():
    got = run("Pad", [X, i64(0, -1, 2, 1, 2, -3), np.array(7, np.float32)], opset=19)
    want = np.pad(X[:, 1:, :1], [(0, 1), (0, 2), (2, 0)], constant_values=7)
    np.testing.assert_array_equal(got, want)
    got = run("Pad", [X, i64(1, 2), None, i64(-1)], opset=19, mode="wrap")
    np.testing.assert_array_equal(got, np.pad(X, [(0, 0), (0, 0), (1, 2)], mode="wrap"))


def test_range_counts_and_dtypes():
    got = run("Range", [np.array(10, np.int32), np.array(1, np.int32), np.array(-3, np.int32)])
    np.testing.assert_array_equal(got, np.array([10, 7, 4], np.int32))
    got = run(
        "Range", [np.array(0.5, np.float32), np.array(2, np.float32), np.array(0.5, np.float32)]
    )
    np.testing.assert_array_equal(got, np.array([0.5, 1.0, 1.5], np.float32))


# ---------------------------------------------------------------- scatter, one-hot, misc


def test_scatter_reductions_apply_duplicates_in_order():
    data = np.full((2, 3), 2, np.float32)
    idx = np.array([[1, 0, 1], [1, 0, 1]], dtype=np.int64)
    upd = np.array([[3, 4, 5], [6, 7, 8]], dtype=np.float32)
    got = run("ScatterElements", [data, idx, upd], axis=0, reduction="mul")
    np.testing.assert_array_equal(got, [[2, 2 * 4 * 7, 2], [2 * 3 * 6, 2, 2 * 5 * 8]])
    got = run("ScatterElements", [data, -idx, upd], axis=0, reduction="add")  # -1 is row 1
    np.testing.assert_array_equal(got, [[2, 13, 2], [11, 2, 15]])
    nd = run("ScatterND", [np.zeros((4, 2), np.float32), i64(-1, 0, -1).reshape(3, 1),
                           np.ones((3, 2), np.float32)], reduction="add")  # fmt: skip
    np.testing.assert_array_equal(nd, [[1, 1], [0, 0], [0, 0], [2, 2]])


@pytest.mark.parametrize("count", [2, 40])  # few indices are checked as Python ints
def test_scatter_nd_and_gather_elements_index_checks_at_every_size(count):
    rng = np.random.default_rng(0)
    data = rng.random((count, 3, 4)).astype(np.float32)
    rows = np.arange(count, dtype=np.int64) - count  # all negative: count from the back
    idx = np.stack([rows, (rows % 3) - 3], axis=1)
    upd = rng.random((count, 4)).astype(np.float32)
    want = data.copy()
    want[rows, (rows % 3) - 3] = upd
    np.testing.assert_array_equal(run("ScatterND", [data, idx, upd]), want)
    with pytest.raises(RunError, match="out of range"):
        run("ScatterND", [data, np.where(idx == idx[-1], 3, idx), upd])
    picks = (rows % 4 - 4).reshape(count, 1, 1).repeat(3, axis=1)
    got = run("GatherElements", [data, picks], axis=2)
    np.testing.assert_array_equal(got, np.take_along_axis(data, picks + 4, axis=2))
    with pytest.raises(RunError, match="out of range"):
        run("GatherElements", [data, picks - 4], axis=2)
    with pytest.raises(RunError, match="exceed"):
        run("GatherElements", [data[:, :1], picks], axis=2)


def test_where_of_single_elements_and_argmax_keepdims():
    yes, no = np.array([[1.5]], np.float32), np.array([[2.5]], np.float32)
    for flag in (True, False):
        got = run("Where", [np.array([[flag]]), yes, no])
        np.testing.assert_array_equal(got, np.where(flag, yes, no))
        assert got.shape == (1, 1) and got.dtype == np.float32
    broadcast = run("Where", [np.array([True]), yes, np.array([[1.0, 2.0]], np.float32)])
    np.testing.assert_array_equal(broadcast, [[1.5, 1.5]])
    got = run("ArgMax", [X], axis=1)
    assert got.shape == (2, 1, 4) and got.dtype == np.int64
    np.testing.assert_array_equal(got, np.full((2, 1, 4), 2))


def test_one_hot_casts_float_indices_to_int64():
    # The spec casts non-integer indices to int64; -1 wraps, out-of-range gives all off.
    idx = np.array([1.7, -1.2, 3.0], dtype=np.float32)
    got = run("OneHot", [idx, np.array(3, np.int64), np.array([0, 5], np.int32)], opset=11)
    np.testing.assert_array_equal(got, [[0, 5, 0], [0, 0, 5], [0, 0, 0]])


def test_nonzero_of_a_scalar():
    assert run("NonZero", [np.array(3.0, np.float32)]).shape == (0, 1)
    assert run("NonZero", [np.array(0.0, np.float32)]).shape == (0, 0)


def test_constant_forms():
    assert run("Constant", [], value_ints=[1, 2]).dtype == np.int64
    assert run("Constant", [], value_float=1.5).dtype == np.float32
    value = helper.make_tensor("v", TensorProto.INT32, [2], [4, 5])
    np.testing.assert_array_equal(run("Constant", [], value=value), np.array([4, 5], np.int32))


# ---------------------------------------------------------------- load-time refusals


@pytest.mark.parametrize(
    ("model", "reason"),
    [
        (single("Pad", [X, i64(0, 0, 1, 0, 0, 1)], mode="symmetric"), "Pad mode 'symmetric'"),
        (single("Pad", [X], opset=11, pads=[0] * 6, mode="wrap"), "before opset 19"),
        (
            single("ScatterElements", [X, i64(0).reshape(1, 1, 1), X[:1, :1, :1]], reduction="sum"),
            "reduction 'sum'",
        ),
        (single("Constant", [], value_string="hello"), "value_string"),
        (
            single("Constant", [], value=helper.make_tensor("v", TensorProto.STRING, [1], [b"a"])),
            "dtype object",
        ),
    ],
)
def test_unsupported_attribute_values_are_refused_at_load(model, reason):
    _, problems = plan_model(model, np)
    assert problems, "the model should have been refused"
    assert any(reason in p.reason for p in problems), [p.reason for p in problems]
