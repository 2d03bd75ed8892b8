"""Every step kind on tiny packages built here, with exact values and exact error codes."""

from __future__ import annotations

import numpy as np
import pytest

from reference_runtime import Engine, RunError
from tests.kit import (
    app,
    cell,
    component,
    contract,
    emit,
    graph,
    invoke,
    literal,
    node,
    out,
    package,
    request_input,
    rows,
)

# every test here runs under the compiled interpreter and the plain one
pytestmark = pytest.mark.usefixtures("interpreter_mode")

I64 = rows("int64")
BOOL = rows("bool")


def add_const(value: int, dtype="int64", shape=("batch",)):
    c = contract(dtype, *shape)
    return graph(
        {"x": c}, {"y": c}, [node("Add", ["x", "k"], ["y"])], {"k": np.array(value, dtype)}
    )


ADD1 = {"implementation": {"kind": "onnx", "artifact": "add1.onnx"},
        "ports": {"inputs": {"x": I64}, "outputs": {"y": I64}}}  # fmt: skip
GRAPHS = {"add1.onnx": add_const(1)}


def test_invoke_sequence_and_emit(tmp_path):
    wf = {
        "inputs": {"x": app(I64)},
        "outputs": {"y": out(I64)},
        "components": {"add1": ADD1},
        "steps": [
            {"kind": "sequence", "steps": [
                invoke("add1", {"x": "x"}, {"y": "a"}),
                invoke("add1", {"x": "a"}, {"y": "b"}),
            ]},
            emit("b", "y"),
        ],
    }  # fmt: skip
    engine = Engine.from_dir(package(tmp_path / "p", wf, GRAPHS))
    result = engine.run(inputs={"x": [1, 2]})
    np.testing.assert_array_equal(result.outputs["y"], [3, 4])
    counters = engine.counters
    assert counters["invocations"] == {"add1": {"ort": 2}}
    assert counters["sessions_created"] == {"ort": 1}


COL = rows("int64", 1)


def counting_loop(tmp_path, *, setup_go: bool = False, termination=None):
    """n ([batch, 1]) counts up from x while n < 5; `when: go` (the pre-body flag) publishes
    each active row's new n into the per-row `tokens` output."""
    loop = {
        "kind": "loop",
        "steps": [
            invoke("add1", {"x": "n"}, {"y": "n.next"}),
            invoke("less5", {"x": "n.next"}, {"y": "go.next"}),
            emit("n.next", "tokens", "append", when="go", axis=1),
        ],
        "continue_when": "go",
        "max_iterations": "request.max",
        "carried": [{"cell": "n", "next": "n.next"}, {"cell": "go", "next": "go.next"}],
    }
    if setup_go:
        loop["setup"] = [invoke("less5", {"x": "n.start"}, {"y": "setup.go"})]
    if termination:
        loop["termination"] = termination
    wf = {
        "inputs": {
            "x": app(I64),
            "request.max": request_input(contract("int64", 1), "max_output_tokens"),
            "package.go": literal(BOOL, True),
        },
        "outputs": {"tokens": out(rows("int64", "generated"), role="tokens")},
        "components": {
            "to_column": {"implementation": {"kind": "onnx", "artifact": "to_column.onnx"},
                          "ports": {"inputs": {"x": I64}, "outputs": {"y": COL}}},
            "add1": {"implementation": {"kind": "onnx", "artifact": "add1.onnx"},
                     "ports": {"inputs": {"x": COL}, "outputs": {"y": COL}}},
            "less5": {"implementation": {"kind": "onnx", "artifact": "less5.onnx"},
                      "ports": {"inputs": {"x": COL}, "outputs": {"y": BOOL}}},
        },
        "state": {
            "n": cell(COL, "n.start"),
            "go": cell(BOOL, "setup.go" if setup_go else "package.go"),
        },
        "steps": [invoke("to_column", {"x": "x"}, {"y": "n.start"}), loop],
    }  # fmt: skip
    graphs = {
        "to_column.onnx": graph(
            {"x": I64}, {"y": COL},
            [node("Unsqueeze", ["x", "axes"], ["y"])], {"axes": np.array([1], np.int64)},
        ),
        "add1.onnx": add_const(1, shape=("batch", 1)),
        "less5.onnx": graph(
            {"x": COL}, {"y": BOOL},
            [node("Less", ["x", "k"], ["lt"]), node("Squeeze", ["lt", "axes"], ["y"])],
            {"k": np.array(5, np.int64), "axes": np.array([1], np.int64)},
        ),
    }  # fmt: skip
    return Engine.from_dir(package(tmp_path / "loop", wf, graphs))


def test_loop_predicate_rows_and_finish_reasons(tmp_path):
    engine = counting_loop(tmp_path)
    result = engine.run(inputs={"x": [1, 3]}, max_new_tokens=10)
    # row 0: 1 -> 2 3 4 5 (stops when n reaches 5); row 1: 3 -> 4 5.
    assert result.tokens == [[2, 3, 4, 5], [4, 5]]
    assert result.finish_reasons == ["stop", "stop"]
    # The body ran 4 times on both rows (row 1 inactive for the last two, merged back).
    assert engine.counters["loop_iterations"] == 4


def test_loop_limit_gives_length(tmp_path):
    result = counting_loop(tmp_path).run(inputs={"x": [1, 3]}, max_new_tokens=3)
    assert result.tokens == [[2, 3, 4], [4, 5]]
    assert result.finish_reasons == ["length", "stop"]


def test_predicate_is_read_before_the_body(tmp_path):
    engine = counting_loop(tmp_path, setup_go=True)
    result = engine.run(inputs={"x": [7]}, max_new_tokens=10)
    assert engine.counters["loop_iterations"] == 0
    assert result.outputs["tokens"] == [None]  # the row published nothing, never padded
    assert result.tokens == [[]]


def test_zero_iterations_and_negative_bound(tmp_path):
    engine = counting_loop(tmp_path)
    zero = engine.run(inputs={"x": [1]}, max_new_tokens=0)
    assert zero.tokens == [[]] and zero.finish_reasons == ["length"]
    # a negative request is refused in the request's terms; the loop refuses a bound fed to it
    with pytest.raises(RunError) as err:
        engine.run(inputs={"x": [1]}, max_new_tokens=-1)
    assert err.value.code == "D44" and "max_new_tokens=-1 is negative" in err.value.message
    with pytest.raises(RunError) as err:
        engine.run(inputs={"x": [1], "request.max": [-1]})
    assert err.value.code == "D44"


def test_generation_eos_ignores_predicate_without_stop_on_eos(tmp_path):
    engine = counting_loop(tmp_path, termination="generation_eos")
    stopped = engine.run(inputs={"x": [3]}, max_new_tokens=6)
    assert stopped.tokens == [[4, 5]]
    full = engine.run(inputs={"x": [3]}, max_new_tokens=6, stop_on_eos=False)
    # The predicate is not read: the body runs all 6 times; `when: go` still guards the emit.
    assert engine.counters["loop_iterations"] == 2 + 6
    assert full.tokens == [[4, 5]]
    assert full.finish_reasons == ["length"]


def test_inactive_rows_keep_their_state(tmp_path):
    seen = {}
    engine = counting_loop(tmp_path)
    interpreter = engine._interpreter
    original = interpreter.next_cells

    def spy(step, frame, merge, bounds, where):
        original(step, frame, merge, bounds, where)
        seen.setdefault("n", []).append(frame.values["n"][:, 0].tolist())

    interpreter.next_cells = spy
    engine.run(inputs={"x": [1, 3]}, max_new_tokens=10)
    # The body runs on both rows every time; row 1 is inactive from iteration 3 on, so its n
    # is merged back to 5 instead of counting on to 6 and 7.
    assert seen["n"] == [[2, 4], [3, 5], [4, 5], [5, 5]]


def test_branch_bool_int_default_and_phi(tmp_path):
    scalar = contract("int64")
    add = {
        k: {"implementation": {"kind": "onnx", "artifact": f"add{k}.onnx"},
            "ports": {"inputs": {"x": scalar}, "outputs": {"y": scalar}}}
        for k in (1, 2, 100)
    }  # fmt: skip
    graphs = {f"add{k}.onnx": add_const(k, shape=()) for k in (1, 2, 100)}
    wf = {
        "inputs": {"k": app(scalar), "x": app(scalar)},
        "outputs": {"y": out(scalar)},
        "components": {f"add{k}": v for k, v in add.items()},
        "steps": [
            {
                "kind": "branch",
                "predicate": "k",
                "cases": {
                    "0": invoke("add1", {"x": "x"}, {"y": "r0"}),
                    "1": invoke("add2", {"x": "x"}, {"y": "r1"}),
                },
                "default": invoke("add100", {"x": "x"}, {"y": "rd"}),
                "outputs": {"r": {"cases": {"0": "r0", "1": "r1"}, "default": "rd"}},
            },
            emit("r", "y"),
        ],
    }
    engine = Engine.from_dir(package(tmp_path / "b", wf, graphs))
    assert int(engine.run(inputs={"k": 0, "x": 10}).outputs["y"]) == 11
    assert int(engine.run(inputs={"k": 1, "x": 10}).outputs["y"]) == 12
    assert int(engine.run(inputs={"k": 7, "x": 10}).outputs["y"]) == 110
    # Only the taken case ran.
    assert engine.counters["invocations"] == {
        "add1": {"ort": 1}, "add2": {"ort": 1}, "add100": {"ort": 1},
    }  # fmt: skip

    del wf["steps"][0]["default"]
    del wf["steps"][0]["outputs"]["r"]["default"]
    engine = Engine.from_dir(package(tmp_path / "b2", wf, graphs))
    with pytest.raises(RunError) as err:
        engine.run(inputs={"k": 7, "x": 10})
    assert err.value.code == "D43"


def test_bool_branch_on_presence_flag(tmp_path):
    scalar = contract("int64")
    wf = {
        "inputs": {
            "x": app(scalar),
            "bias": app(scalar, required=False, present_as="has_bias"),
        },
        "outputs": {"y": out(scalar)},
        "components": {
            "add": {"implementation": {"kind": "onnx", "artifact": "add.onnx"}},
            "copy": {"implementation": {"kind": "binding"}},
        },
        "steps": [
            {
                "kind": "branch",
                "predicate": "has_bias",
                "cases": {
                    "true": invoke("add", {"a": "x", "b": "bias"}, {"c": "with"}),
                    "false": invoke("copy", {"x": "x"}, {"x": "without"}),
                },
                "outputs": {"r": {"cases": {"true": "with", "false": "without"}}},
            },
            emit("r", "y"),
        ],
    }
    add = graph({"a": scalar, "b": scalar}, {"c": scalar}, [node("Add", ["a", "b"], ["c"])])
    engine = Engine.from_dir(package(tmp_path / "p", wf, {"add.onnx": add}))
    assert int(engine.run(inputs={"x": 5}).outputs["y"]) == 5
    assert int(engine.run(inputs={"x": 5, "bias": 3}).outputs["y"]) == 8
    assert engine.counters["invocations"]["copy"] == {"binding": 1}


def test_nested_loop_setup_runs_per_outer_pass(tmp_path):
    scalar1 = contract("int64", 1)
    one = {"implementation": {"kind": "onnx", "artifact": "add1.onnx"},
           "ports": {"inputs": {"x": scalar1}, "outputs": {"y": scalar1}}}  # fmt: skip
    inner = {
        "kind": "loop",
        "setup": [invoke("one", {"x": "package.zero"}, {"y": "inner.start"})],
        "steps": [invoke("one", {"x": "m"}, {"y": "m.next"})],
        "continue_when": "package.yes",
        "max_iterations": "package.two",
        "carried": [{"cell": "m", "next": "m.next"}],
    }
    outer = {
        "kind": "loop",
        "steps": [inner, invoke("one", {"x": "total"}, {"y": "t1"}),
                  {"kind": "emit", "value": "m", "output": "inner_final", "mode": "append"}],
        "continue_when": "package.yes",
        "max_iterations": "package.three",
        "carried": [{"cell": "total", "next": "t1"}],
    }  # fmt: skip
    wf = {
        "inputs": {
            "package.zero": literal(scalar1, 0),
            "package.two": literal(scalar1, 2),
            "package.three": literal(scalar1, 3),
            "package.yes": literal(contract("bool", 1), True),
        },
        "outputs": {"inner_final": out(contract("int64", "passes")), "total": out(scalar1)},
        "components": {"one": one},
        "state": {"m": cell(scalar1, "inner.start"), "total": cell(scalar1, "package.zero")},
        "steps": [outer, emit("total", "total")],
    }
    graphs = {"add1.onnx": add_const(1, shape=(1,))}
    engine = Engine.from_dir(package(tmp_path / "n", wf, graphs))
    result = engine.run()
    # each outer pass restarts m at 1 (setup re-ran) then adds 2: m ends at 3 every pass.
    np.testing.assert_array_equal(result.outputs["inner_final"], [3, 3, 3])
    np.testing.assert_array_equal(result.outputs["total"], [3])
    # setup ran once per outer pass: 3 setups + 3*2 inner bodies + 3 outer updates
    assert engine.counters["invocations"]["one"]["ort"] == 3 + 6 + 3


def test_emit_append_non_final_axis_and_events(tmp_path):
    vec = contract("float32", 1, 2)
    wf = {
        "inputs": {"package.start": literal(vec, 0.5), "package.yes": literal(contract("bool"), True),
                   "package.n": literal(contract("int64"), 3)},
        "outputs": {"trace": out(contract("float32", "steps", 2)),
                    "latest": out(vec)},
        "components": {"inc": {"implementation": {"kind": "onnx", "artifact": "inc.onnx"}}},
        "state": {"v": cell(vec, "package.start")},
        "steps": [{
            "kind": "loop",
            "steps": [invoke("inc", {"x": "v"}, {"y": "v.next"}),
                      emit("v.next", "trace", "append", axis=0),
                      emit("v.next", "latest", "event")],
            "continue_when": "package.yes", "max_iterations": "package.n",
            "carried": [{"cell": "v", "next": "v.next"}],
        }],
    }  # fmt: skip
    graphs = {"inc.onnx": add_const(1, "float32", (1, 2))}
    result = Engine.from_dir(package(tmp_path / "e", wf, graphs)).run()
    np.testing.assert_array_equal(result.outputs["trace"], [[1.5, 1.5], [2.5, 2.5], [3.5, 3.5]])
    np.testing.assert_array_equal(result.outputs["latest"], [[3.5, 3.5]])
    assert [e.tolist() for e in result.events["latest"]] == [
        [[1.5, 1.5]],
        [[2.5, 2.5]],
        [[3.5, 3.5]],
    ]


def test_output_port_contract_is_checked_at_run_time(tmp_path):
    # The graph's output is [batch, k] (symbolic) and produces [batch, 2]; the port declares
    # [batch, 3]: the load-time check cannot see it, the run-time boundary check refuses it.
    wide = graph(
        {"x": I64}, {"y": rows("int64", "k")},
        [node("Unsqueeze", ["x", "a"], ["x2"]), node("Concat", ["x2", "x2"], ["y"], axis=1)],
        {"a": np.array([1], np.int64)},
    )  # fmt: skip
    wf = {
        "inputs": {"x": app(I64)},
        "outputs": {"y": out(rows("int64", 3))},
        "components": {"f": {"implementation": {"kind": "onnx", "artifact": "f.onnx"},
                             "ports": {"inputs": {"x": I64}, "outputs": {"y": rows("int64", 3)}}}},
        "steps": [invoke("f", {"x": "x"}, {"y": "y"}), emit("y", "y")],
    }  # fmt: skip
    engine = Engine.from_dir(package(tmp_path / "c", wf, {"f.onnx": wide}))
    with pytest.raises(RunError) as err:
        engine.run(inputs={"x": [1, 2]})
    assert err.value.code == "H84"
    assert "output port 'y'" in err.value.message and "expected 3" in err.value.message


def test_a_port_whose_shape_changes_between_iterations_is_checked_again(tmp_path):
    """Invoke checks are cached by the ports' dtypes and shapes; a new shape on a later
    iteration runs them again, so the third call's output is refused (H84)."""
    widths = contract("int64", 2)
    wf = {
        "inputs": {"x": app(I64),
                   "request.max": request_input(contract("int64", 1), "max_output_tokens")},
        "outputs": {"tokens": out(rows("int64", "generated"), role="tokens")},
        "components": {
            "to_column": component("to_column.onnx", {"x": I64}, {"y": COL}),
            "add1": component("add1.onnx", {"x": COL}, {"y": COL}),
            "widths": component("widths.onnx", {"x": COL}, {"y": widths}),
        },
        "state": {"n": cell(COL, "n.start")},
        "steps": [
            invoke("to_column", {"x": "x"}, {"y": "n.start"}),
            {"kind": "loop", "max_iterations": "request.max",
             "carried": [{"cell": "n", "next": "n.next"}],
             "steps": [invoke("add1", {"x": "n"}, {"y": "n.next"}),
                       invoke("widths", {"x": "n"}, {"y": "w"}),
                       emit("n.next", "tokens", "append", when="package.go", axis=1)]},
        ],
    }  # fmt: skip
    wf["inputs"]["package.go"] = literal(BOOL, True)
    wf["steps"][1]["continue_when"] = "package.go"
    graphs = {
        "to_column.onnx": graph(
            {"x": I64}, {"y": COL},
            [node("Unsqueeze", ["x", "axes"], ["y"])], {"axes": np.array([1], np.int64)},
        ),
        "add1.onnx": add_const(1, shape=("batch", 1)),
        # y = [0, 1, ..., n - 1]: its length follows the value of n.
        "widths.onnx": graph(
            {"x": COL}, {"y": contract("int64", "m")},
            [node("ReduceMax", ["x"], ["top"], keepdims=0), node("Range", ["z", "top", "one"], ["y"])],
            {"z": np.array(0, np.int64), "one": np.array(1, np.int64)},
        ),
    }  # fmt: skip
    engine = Engine.from_dir(package(tmp_path / "w", wf, graphs))
    assert engine.run(inputs={"x": [2]}, max_new_tokens=1).tokens == [[3]]
    with pytest.raises(RunError) as err:
        engine.run(inputs={"x": [2]}, max_new_tokens=3)
    assert err.value.code == "H84"
    assert "output port 'y'" in err.value.message and "axis 0 is 3, expected 2" in err.value.message
    assert engine.counters["invocations"]["widths"] == {"ort": 3}
