"""The native executor's compiled plans: kernels prepared for constant inputs agree with the
kernels themselves on the ONNX node cases, and the generated run function keeps the executor's
guarantees (arrays out, dtypes checked, failures named by node, fed defaults honoured)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from reference_runtime.errors import RunError
from reference_runtime.executors.native.graph import plan_model
from reference_runtime.executors.native.registry import Kernel, _load_kernels
from tests.native_node_cases import applicable, data_sets, exclusions, refusal_reason
from tests.test_native_node_cases import run_case


def _prepared_ops() -> set[str]:
    _load_kernels()
    from reference_runtime.executors.native.registry import _REGISTRY

    return {op for (domain, op), table in _REGISTRY.items()
            if not domain and any(k.prepare for k in table.values())}  # fmt: skip


def _constant_parameter_cases() -> list:
    ops = _prepared_ops()
    return [
        c
        for c in applicable()
        if len(c.model.graph.node) == 1
        and c.model.graph.node[0].op_type in ops
        and len([n for n in c.model.graph.node[0].input if n]) > 1
        and c.name not in exclusions()
        and refusal_reason(c.name) is None
    ]


CONSTANT_CASES = _constant_parameter_cases()


class _Constant:
    """A node case whose inputs after the first are initializers (first data set only)."""

    def __init__(self, case):
        inputs, expected = data_sets(case)[0]
        model = copy.deepcopy(case.model)
        graph = model.graph
        names = [v.name for v in graph.input]
        for name, value in list(zip(names, inputs, strict=False))[1:]:
            graph.initializer.append(numpy_helper.from_array(value, name))
        del graph.input[1:]
        self.name, self.model = case.name, model
        self.rtol, self.atol = case.rtol, case.atol
        self.data_sets = [(inputs[:1], expected)]


def test_prepared_kernels_are_exercised():
    assert {"BitShift", "Reshape", "Slice", "Squeeze", "Unsqueeze", "ReduceSum"} <= _prepared_ops()
    assert len(CONSTANT_CASES) >= 50
    prepared = set()
    for case in CONSTANT_CASES:
        plan, _ = plan_model(_Constant(case).model, np)
        if "(prepared)" in plan.source:
            prepared.add(case.model.graph.node[0].op_type)
    # Kernels prepared for their attributes alone (a perm, an axis, a target dtype) run
    # prepared in the node cases of their op, their inputs fed.
    for case in applicable():
        op = case.model.graph.node[0].op_type
        if len(case.model.graph.node) == 1 and op in _prepared_ops() - prepared:
            plan, _ = plan_model(case.model, np)
            if "(prepared)" in plan.source:
                prepared.add(op)
    assert _prepared_ops() - prepared <= {"BitShift"}, _prepared_ops() - prepared


@pytest.mark.parametrize("case", CONSTANT_CASES, ids=lambda c: c.name)
def test_node_case_with_constant_parameters(case, monkeypatch):
    constant = _Constant(case)
    plan, problems = plan_model(constant.model, np)
    assert not problems
    monkeypatch.setattr("tests.test_native_node_cases.data_sets", lambda c: c.data_sets)
    run_case(constant)


# ---------------------------------------------------------------- the generated function


def _model(nodes, inputs, outputs, initializers=(), opset=21):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _info(name, elem=TensorProto.INT64):
    return helper.make_tensor_value_info(name, elem, None)


def test_scalar_results_come_back_as_arrays():
    model = _model(
        [helper.make_node("Add", ["a", "b"], ["c"]), helper.make_node("Mul", ["c", "c"], ["d"])],
        [_info("a"), _info("b")],
        [_info("c"), _info("d")],
    )
    plan, _ = plan_model(model, np)
    out = plan.run({"a": np.array(2), "b": np.array(3)})
    assert all(type(v) is np.ndarray and v.shape == () for v in out.values())
    assert int(out["d"]) == 25


def test_runs_ignore_float_errors_and_restore_the_callers_state():
    f = TensorProto.FLOAT
    model = _model([helper.make_node("Div", ["a", "b"], ["c"])], [_info("a", f), _info("b", f)],
                   [_info("c", f)])  # fmt: skip
    plan, _ = plan_model(model, np)
    zero = np.zeros(2, np.float32)
    bufsize = np.getbufsize()
    with np.errstate(divide="raise", invalid="raise"):
        np.setbufsize(bufsize * 2)
        try:
            for _ in range(2):
                out = plan.run({"a": np.array([1, 0], np.float32), "b": zero})["c"]
                assert np.isinf(out[0]) and np.isnan(out[1])
                assert np.geterr()["divide"] == "raise" and np.getbufsize() == bufsize * 2
            with pytest.raises(RunError):  # a failing run restores the state too
                plan.run({"a": np.zeros(3, np.float32), "b": zero})
            assert np.geterr()["invalid"] == "raise"
        finally:
            np.setbufsize(bufsize)


def test_a_kernel_failure_names_its_node():
    model = _model(
        [
            helper.make_node("Add", ["a", "a"], ["b"], name="fine"),
            helper.make_node("Reshape", ["b", "shape"], ["c"], name="bad_reshape"),
        ],
        [_info("a")],
        [_info("c")],
        [numpy_helper.from_array(np.array([5], np.int64), "shape")],
    )
    plan, _ = plan_model(model, np)
    with pytest.raises(RunError, match="Reshape \\(node 'bad_reshape'\\).*cannot reshape"):
        plan.run({"a": np.arange(3)})


def test_a_wrong_dtype_is_refused():
    model = _model([helper.make_node("Add", ["a", "a"], ["b"], name="add")], [_info("a")],
                   [_info("b")])  # fmt: skip
    plan, _ = plan_model(model, np)
    # A kernel with a bug: it promotes to float64.
    plan.nodes[0].kernel = Kernel("", "Add", 14, lambda view, a, b: (a + b).astype(np.float64))
    with pytest.raises(RunError, match="produced float64 for 'b' where the graph says int64"):
        plan.run({"a": np.arange(3)})


def test_a_fed_input_replaces_its_initializer_default():
    model = _model(
        [
            helper.make_node("Mul", ["x", "x"], ["y"]),
            helper.make_node("Add", ["y", "z"], ["out"]),
        ],
        [_info("x"), _info("z")],
        [_info("out")],
        [numpy_helper.from_array(np.array(3, np.int64), "x")],
    )
    plan, _ = plan_model(model, np)
    z = np.array(1, np.int64)
    assert int(plan.run({"z": z})["out"]) == 10
    assert int(plan.run({"z": z, "x": np.array(4, np.int64)})["out"]) == 17


def test_subgraphs_see_enclosing_values():
    then = helper.make_graph(
        [helper.make_node("Add", ["x", "one"], ["r"])], "then", [], [_info("r")]
    )
    orelse = helper.make_graph(
        [helper.make_node("Sub", ["x", "one"], ["r2"])], "else", [], [_info("r2")]
    )
    model = _model(
        [
            helper.make_node("Mul", ["a", "a"], ["x"]),
            helper.make_node("If", ["cond"], ["out"], then_branch=then, else_branch=orelse),
        ],
        [_info("a"), _info("cond", TensorProto.BOOL)],
        [_info("out")],
        [numpy_helper.from_array(np.array(1, np.int64), "one")],
    )
    plan, problems = plan_model(model, np)
    assert not problems
    a = np.array(3, np.int64)
    assert int(plan.run({"a": a, "cond": np.array(True)})["out"]) == 10
    assert int(plan.run({"a": a, "cond": np.array(False)})["out"]) == 8
    assert "N1.env = {" in plan.source


def test_the_source_reads_as_the_graph():
    model = _model([helper.make_node("Neg", ["a"], ["b"], name="negate")], [_info("a")],
                   [_info("b")])  # fmt: skip
    plan, _ = plan_model(model, np)
    source = plan.source
    assert source.startswith("def run(feeds, outer):")
    assert "# 0: Neg 'negate'" in source and "v_b = K0(N0, v_a)" in source


def _one_node(op, x, constant, dtype=TensorProto.INT64, **attrs):
    """``op(x, p)``, with ``p`` an initializer (prepared) or fed like ``x``."""
    model = _model(
        [helper.make_node(op, ["x", "p"], ["y"], **attrs)],
        [_info("x", dtype)],
        [_info("y", dtype)],
        [numpy_helper.from_array(constant, "p")],
    )
    fed = _model(
        [helper.make_node(op, ["x", "p"], ["y"], **attrs)],
        [_info("x", dtype), _info("p", helper.np_dtype_to_tensor_dtype(constant.dtype))],
        [_info("y", dtype)],
    )
    prepared, _ = plan_model(model, np)
    plain, _ = plan_model(fed, np)
    return prepared, plain


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize(
    ("x", "amount"),
    [
        (np.array([1, 2**63, 5], np.uint64), np.array(3, np.uint64)),
        (np.array([[1, 255], [128, 7]], np.uint8), np.array([7], np.uint8)),
        (np.array(2**31 + 5, np.uint32), np.array(31, np.uint32)),
        (np.array(9, np.uint16), np.array([2], np.uint16)),  # the amount has more dims
        (np.array([9], np.uint64), np.array(64, np.uint64)),  # past the width: not prepared
        (np.array([9], np.uint8), np.array([[8]], np.uint8)),
    ],
)
def test_bit_shift_by_a_constant_matches_the_kernel(direction, x, amount):
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    prepared, plain = _one_node("BitShift", x, amount, elem, direction=direction)
    assert ("prepared" in prepared.source) == (amount.reshape(-1)[0] < 8 * x.itemsize)
    want = plain.run({"x": x, "p": amount})["y"]
    for _ in range(2):
        got = prepared.run({"x": x})["y"]
        assert type(got) is np.ndarray and got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    ("op", "parameter"),
    [
        ("Unsqueeze", np.array([-1, 0], np.int64)),
        ("Squeeze", np.array([-1], np.int64)),
        ("Reshape", np.array([-1], np.int64)),
        ("ReduceSum", np.array([-1], np.int64)),
    ],
)
def test_prepared_kernels_follow_the_input_rank(op, parameter):
    prepared, plain = _one_node(op, np.zeros(1, np.int64), parameter)
    assert "prepared" in prepared.source
    for x in (
        np.arange(3).reshape(3, 1),
        np.arange(4).reshape(2, 2, 1),
        np.arange(2).reshape(2, 1),
    ):
        want = plain.run({"x": x, "p": parameter})["y"]
        got = prepared.run({"x": x})["y"]
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_a_prepared_kernel_reports_bad_input_like_the_kernel():
    prepared, plain = _one_node("Squeeze", np.zeros(1, np.int64), np.array([0], np.int64))
    x = np.zeros((2, 1), np.int64)
    with pytest.raises(RunError, match="Squeeze: dim 0 of shape"):
        prepared.run({"x": x})
    with pytest.raises(RunError, match="Squeeze: dim 0 of shape"):
        plain.run({"x": x, "p": np.array([0], np.int64)})


# ---------------------------------------------------------------- fast paths of prepared kernels


def _f32(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


_I = np.int64
# (op, attributes, inputs, indices of the inputs that are constants of the graph)
FAST_PATH_CASES = [
    ("GatherElements", {"axis": 2}, [_f32(1, 4, 1, 8), np.zeros((1, 4, 5, 8), _I)], ()),
    ("GatherElements", {"axis": 2}, [_f32(1, 4, 1, 8), -np.ones((1, 4, 5, 8), np.int32)], ()),
    (
        "GatherElements",
        {"axis": -2},
        [_f32(1, 4, 1, 8), np.eye(5, 8, dtype=_I)[None, None].repeat(4, 1)],
        (),
    ),  # fmt: skip
    ("GatherElements", {"axis": 1}, [_f32(2, 3, 4), np.array([[[0, -1, 2, 1]] * 2] * 2)], ()),
    ("GatherElements", {"axis": 1}, [_f32(2, 3, 4), np.array([[[0, 3, 2, 1]] * 2] * 2)], ()),
    ("GatherElements", {"axis": 1}, [_f32(2, 3, 4), np.array([[[0, -4, 2, 1]] * 2] * 2)], ()),
    ("GatherElements", {"axis": 1}, [_f32(2, 3, 4), np.zeros((1, 2, 4), _I)], ()),  # a block
    ("GatherElements", {"axis": 0}, [_f32(1, 3), np.zeros((0, 3), _I)], ()),
    ("GatherElements", {"axis": 0}, [_f32(0, 3), np.zeros((2, 3), _I)], ()),
    ("GatherElements", {"axis": 3}, [_f32(2, 3), np.zeros((2, 3), _I)], ()),
    ("Gather", {"axis": 1}, [_f32(3, 4), np.array([[3, -4], [0, 1]])], ()),
    ("Gather", {"axis": -1}, [_f32(3, 4), np.array(-1, np.int32)], ()),
    ("Gather", {"axis": 0}, [_f32(3, 4), np.array([3])], ()),
    ("Gather", {"axis": 0}, [_f32(3, 4), np.array([-4])], ()),
    ("Gather", {"axis": 2}, [_f32(3, 4), np.array([0])], ()),
    ("Softmax", {}, [_f32(2, 3, 5)], ()),
    ("Softmax", {"axis": 0}, [_f32(2, 3).astype(np.float64)], ()),
    ("Softmax", {"axis": 1}, [np.array([[-np.inf, 0.0], [np.inf, 1.0]], np.float32)], ()),
    ("Softmax", {}, [_f32(2, 3).astype(np.float16)], ()),
    ("Softmax", {}, [_f32(2, 0)], ()),
    ("Softmax", {"axis": 2}, [_f32(2, 3)], ()),
    ("MatMul", {}, [_f32(1, 2, 1, 3), _f32(2, 3, 4)], ()),
    ("MatMul", {}, [_f32(2, 3).astype(np.float16), _f32(3, 2).astype(np.float16)], ()),
    ("MatMul", {}, [np.arange(6).reshape(2, 3), np.arange(6).reshape(3, 2)], ()),
    ("MatMul", {}, [_f32(2, 3), _f32(4, 2)], ()),
    ("Gemm", {"transA": 1}, [_f32(3, 2), _f32(3, 4), _f32(4)], ()),
    ("Gemm", {"transB": 1}, [_f32(2, 3), _f32(4, 3)], ()),
    ("Gemm", {}, [_f32(2, 3), _f32(3, 4), _f32(4).astype(np.float64)], ()),
    ("ReduceMean", {}, [_f32(2, 3, 4), np.array([-1, 0])], (1,)),
    ("ReduceMean", {"keepdims": 0}, [_f32(2, 3, 4), np.array([1])], (1,)),
    ("ReduceMean", {}, [np.arange(12).reshape(3, 4), np.array([1])], (1,)),
    ("ReduceMean", {}, [_f32(2, 0), np.array([1])], (1,)),
    ("ReduceMean", {}, [_f32(2, 3).astype(np.float16), np.array([1])], (1,)),
    ("ReduceMax", {"keepdims": 0}, [np.arange(12).reshape(3, 4), np.array([-1])], (1,)),
    ("ReduceMax", {}, [_f32(2, 3), np.array([0, 1])], (1,)),
    ("ReduceMax", {}, [_f32(2, 3), np.array([2])], (1,)),
    ("Concat", {"axis": -1}, [np.arange(3), np.arange(2)], ()),
    ("Concat", {"axis": 1}, [_f32(2, 1, 3), _f32(2, 2, 3)], ()),
    ("Concat", {"axis": 1}, [np.arange(3), np.arange(2)], ()),
    ("Expand", {}, [_f32(3, 1), np.array([2, 1, 4])], ()),
    ("Expand", {}, [_f32(3, 1), np.array([2, 1, 4])], (1,)),
    ("Expand", {}, [_f32(3, 2), np.array([4])], ()),
    ("Transpose", {"perm": [1, 2, 0]}, [_f32(2, 3, 4)], ()),
    ("Transpose", {}, [_f32(2, 3, 4)], ()),
    ("Transpose", {"perm": [1, 0]}, [_f32(2, 3, 4)], ()),
    ("Shape", {"start": 1, "end": -1}, [_f32(2, 3, 4)], ()),
    ("Shape", {}, [_f32(2, 3)], ()),
    ("Cast", {"to": TensorProto.INT32}, [_f32(2, 3) * 10], ()),
    ("Reshape", {}, [_f32(2, 3, 4), np.array([0, -1])], (1,)),
    ("Reshape", {}, [_f32(2, 3, 4), np.array([5, -1])], (1,)),
]


@pytest.mark.parametrize(
    ("op", "attributes", "inputs", "constant"),
    FAST_PATH_CASES,
    ids=[f"{c[0]}-{i}" for i, c in enumerate(FAST_PATH_CASES)],
)
def test_a_prepared_kernel_computes_what_the_kernel_computes(op, attributes, inputs, constant):
    """Bit for bit, errors included, through the fast paths (and out of them)."""
    names = [f"i{n}" for n in range(len(inputs))]
    elem = helper.np_dtype_to_tensor_dtype
    model = _model(
        [helper.make_node(op, names, ["y"], **attributes)],
        [_info(n, elem(x.dtype)) for n, x in zip(names, inputs, strict=True) if
         names.index(n) not in constant],
        [helper.make_tensor_value_info("y", 0, None)],
        [numpy_helper.from_array(inputs[i], names[i]) for i in constant],
    )  # fmt: skip
    plan, problems = plan_model(model, np)
    assert not problems
    assert "(prepared" in plan.source
    namespace = plan._compiled.function.__globals__
    prepared, view, plain = namespace["K0"], namespace["N0"], plan.nodes[0].kernel.fn
    assert prepared is not plain

    def outcome(kernel):
        try:
            with np.errstate(all="ignore"):
                return kernel(view, *inputs)
        except Exception as exc:  # noqa: BLE001 - compared below
            return exc

    for _ in range(2):  # memoised shapes and axes are used the second time
        got, want = outcome(prepared), outcome(plain)
        if isinstance(want, Exception):
            assert type(got) is type(want) and str(got) == str(want)
            continue
        assert type(got) is type(want) and got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want, strict=True)


@pytest.mark.parametrize(
    ("condition", "shape", "by_rows"),
    [
        (np.arange(200).reshape(1, 1, 200, 1) % 7 == 0, (1, 2, 200, 64), True),  # rows of 64
        (np.array([True, False]).reshape(2, 1, 1), (2, 3, 4096), True),  # rows of 12288
        (np.array([[True], [False], [True]]), (2, 3, 4096), True),
        (np.array(True), (4, 4096), True),  # one row, all of x
        (np.array([False]), (4, 4096), True),
        (np.arange(64).reshape(1, 64) % 2 == 0, (300, 64), False),  # per element
        (np.zeros((1, 1, 9, 1), bool), (1, 2, 9, 64), False),  # small: np.where
        (np.ones((3, 1), bool), (2, 8192), False),  # does not broadcast: np.where's error
    ],
)
def test_where_by_rows_selects_like_np_where(condition, shape, by_rows):
    from reference_runtime.executors.native.ops import elementwise

    rows = elementwise._row_condition(condition, shape)
    assert (rows is not None and np.prod(shape) >= elementwise._ROWS_AT_LEAST) == by_rows
    x, y = _f32(*shape, seed=1), _f32(*shape, seed=2)
    plan, _ = plan_model(
        _model(
            [helper.make_node("Where", ["c", "x", "y"], ["z"])],
            [_info("c", TensorProto.BOOL), _info("x", 1), _info("y", 1)],
            [_info("z", 1)],
        ),
        np,
    )
    try:
        want = np.where(condition, x, y)
    except ValueError:
        with pytest.raises(RunError, match="Where"):
            plan.run({"c": condition, "x": x, "y": y})
        return
    got = plan.run({"c": condition, "x": x, "y": y})["z"]
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want, strict=True)


def test_an_inline_node_is_checked_and_named_like_a_kernel_call():
    f = TensorProto.FLOAT
    model = _model(
        [
            helper.make_node("Mul", ["a", "b"], ["c"], name="scale"),
            helper.make_node("Max", ["c", "b"], ["d"], name="clip"),
            helper.make_node("Max", ["c", "b", "d"], ["e"], name="three"),  # a kernel call
        ],
        [_info("a", f), _info("b", f)],
        [_info("e", f)],
    )
    plan, _ = plan_model(model, np)
    assert "# 0: Mul 'scale' (inline)" in plan.source and "v_c = v_a * v_b" in plan.source
    assert "v_d = XP.maximum(v_c, v_b)" in plan.source and "K2(N2, " in plan.source
    out = plan.run({"a": np.array(2, np.float32), "b": np.array(3, np.float32)})["e"]
    assert type(out) is np.ndarray and out.dtype == np.float32 and float(out) == 6.0
    with pytest.raises(RunError, match="Mul \\(node 'scale'\\).*broadcast") as refused:
        plan.run({"a": np.zeros(3, np.float32), "b": np.zeros(2, np.float32)})
    assert refused.value.code == "C86" and isinstance(refused.value.__cause__, ValueError)
