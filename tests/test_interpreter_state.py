"""Session state, scatter bounds, recurrences and request binding: exact values, exact codes."""

from __future__ import annotations

import numpy as np
import pytest

from reference_runtime import Engine, RunError
from tests.kit import (
    app,
    cell,
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

S1 = contract("int64", 1)


def add_graph(k, dtype="int64", shape=(1,)):
    c = contract(dtype, *shape)
    return graph({"x": c}, {"y": c}, [node("Add", ["x", "k"], ["y"])], {"k": np.array(k, dtype)})


def session_counter(tmp_path, *, with_check=False):
    """A session cell `count` incremented once per run (a one-pass loop carries it)."""
    steps = [
        {
            "kind": "loop",
            "steps": [invoke("inc", {"x": "count"}, {"y": "count.next"})],
            "continue_when": "package.yes",
            "max_iterations": "package.once",
            "carried": [{"cell": "count", "next": "count.next"}],
        },
        emit("count", "count"),
    ]
    inputs = {
        "package.zero": literal(S1, 0),
        "package.yes": literal(contract("bool", 1), True),
        "package.once": literal(S1, 1),
    }
    if with_check:
        # `limit` must be below 100: a failing run happens after the loop updated the cell.
        inputs["limit"] = app(S1, required=False, default=100)
        steps.append(invoke("check", {"count": "count", "limit": "limit"}, {"ok": "ok"}))
    wf = {
        "inputs": inputs,
        "outputs": {"count": out(S1)},
        "components": {"inc": {"implementation": {"kind": "onnx", "artifact": "inc.onnx"}}},
        "state": {"count": {**cell(S1, "package.zero"), "scope": "session",
                            "session": {"policy": "exclusive"}}},
        "steps": steps,
    }  # fmt: skip
    graphs = {"inc.onnx": add_graph(1)}
    if with_check:
        # ok = count / (limit - count) in integers: limit == count divides by zero and fails.
        wf["components"]["check"] = {"implementation": {"kind": "onnx", "artifact": "check.onnx"}}
        graphs["check.onnx"] = graph(
            {"count": S1, "limit": S1}, {"ok": S1},
            [node("Sub", ["limit", "count"], ["d"]), node("Div", ["count", "d"], ["ok"])],
        )  # fmt: skip
    return Engine.from_dir(package(tmp_path / "s", wf, graphs))


def test_session_state_carries_across_runs(tmp_path):
    engine = session_counter(tmp_path)
    a, b = engine.create_session(), engine.create_session()
    assert [int(engine.run(session_id=a).outputs["count"][0]) for _ in range(3)] == [1, 2, 3]
    assert int(engine.run(session_id=b).outputs["count"][0]) == 1  # sessions are isolated
    engine.reset_session(a)
    assert int(engine.run(session_id=a).outputs["count"][0]) == 1
    engine.close_session(a)
    with pytest.raises(RunError) as err:
        engine.run(session_id=a)
    assert err.value.code == "E58"


def test_session_id_is_required(tmp_path):
    engine = session_counter(tmp_path)
    with pytest.raises(RunError) as err:
        engine.run()
    assert err.value.code == "E58" and "count" in err.value.message


def test_failed_run_leaves_the_session_unchanged(tmp_path):
    engine = session_counter(tmp_path, with_check=True)
    sid = engine.create_session()
    assert int(engine.run(session_id=sid).outputs["count"][0]) == 1
    # limit == 2 == the next count: the check divides by zero -> the run fails after the loop.
    with pytest.raises(RunError):
        engine.run(session_id=sid, inputs={"limit": [2]})
    assert int(engine.run(session_id=sid).outputs["count"][0]) == 2


def scatter_package(tmp_path):
    buf = rows("float32", 4, 2)
    idx = rows("int64")
    model = {
        "implementation": {"kind": "onnx", "artifact": "model.onnx"},
        "ports": {
            "inputs": {"ids": idx, "keys": buf, "write_indices": idx, "lengths": idx},
            "outputs": {"next_keys": buf},
            "roles": {"ids": "token_ids"},
        },
    }
    wf = {
        "inputs": {
            "write_indices": app(idx),
            "package.capacity": literal(S1, 4),
            "package.buf": literal(buf, 0.0),
            "package.lengths": literal(idx, 0),
            "package.yes": literal(contract("bool", 1), True),
            "package.once": literal(S1, 1),
            "package.active": literal(rows("bool"), True),
            "package.one": literal(idx, 1),
        },
        "outputs": {"keys": out(buf)},
        "components": {"model": model},
        "state": {
            "keys": cell(buf, "package.buf", service_group="cache", management="runtime",
                         release_boundary="invocation"),
            "wi": cell(idx, "write_indices"),
            "lengths": cell(idx, "package.lengths"),
        },
        "serving": {
            "active": "package.active", "done": "package.active", "accepted_len": "package.one",
            "state_service": {"groups": {"cache": {
                "kind": "full_attention", "layout": "bsh", "sequence_axis": 1,
                "logical_lengths": "lengths",
                "update": {"kind": "indexed_scatter", "write_indices": "wi",
                           "capacity": "package.capacity",
                           "write_indices_ports": {"model": "write_indices"},
                           "kv_length_ports": {"model": "lengths"}},
                "checkpoint": {"adapter": "onnx-genai.kv-checkpoint", "version": "1"},
                "ports": {"model": {"keys": {"input": "keys", "output": "next_keys",
                                             "role": "combined", "layer": 0}}},
            }}},
        },
        "steps": [
            {"kind": "loop",
             "steps": [invoke("model", {"ids": "wi", "keys": "keys", "write_indices": "wi",
                                        "lengths": "lengths"},
                              {"next_keys": "keys.next"})],
             "continue_when": "package.yes", "max_iterations": "package.once",
             "carried": [{"cell": "keys", "next": "keys.next"}, {"cell": "wi", "next": "wi"},
                         {"cell": "lengths", "next": "lengths"}]},
            emit("keys", "keys"),
        ],
    }  # fmt: skip
    # next_keys = keys + 1 at the written slot (ScatterElements along axis 1)
    g = graph(
        {"ids": idx, "keys": buf, "write_indices": idx, "lengths": idx}, {"next_keys": buf},
        [node("Unsqueeze", ["write_indices", "a1"], ["i2"]),
         node("Unsqueeze", ["i2", "a2"], ["i3"]),
         node("Expand", ["i3", "shape"], ["idx"]),
         node("ScatterElements", ["keys", "idx", "ones"], ["next_keys"], axis=1)],
        {"a1": np.array([1], np.int64), "a2": np.array([2], np.int64),
         "shape": np.array([1, 1, 2], np.int64), "ones": np.ones((1, 1, 2), np.float32)},
    )  # fmt: skip
    return Engine.from_dir(package(tmp_path / "sc", wf, {"model.onnx": g}))


def test_scatter_writes_inside_capacity(tmp_path):
    engine = scatter_package(tmp_path)
    keys = engine.run(inputs={"write_indices": [2]}).outputs["keys"]
    expected = np.zeros((1, 4, 2), np.float32)
    expected[0, 2] = 1.0
    np.testing.assert_array_equal(keys, expected)


@pytest.mark.parametrize("index", [-1, 4])
def test_scatter_bounds_are_checked_before_the_graph_runs(tmp_path, index):
    engine = scatter_package(tmp_path)
    with pytest.raises(RunError) as err:
        engine.run(inputs={"write_indices": [index]})
    assert err.value.code == "E56"
    assert "'cache'" in err.value.message and str(index) in err.value.message
    assert "model" not in engine.counters["invocations"]  # the component never ran


def growing_package(tmp_path, step: int):
    grow = contract("int64", 1, "n")
    wf = {
        "inputs": {"package.start": literal(contract("int64", 1, 1), 0),
                   "package.one": literal(S1, 1), "package.max": literal(S1, 10),
                   "package.yes": literal(contract("bool", 1), True), "package.n": literal(S1, 3)},
        "outputs": {"seq": out(grow)},
        "components": {"grow": {"implementation": {"kind": "onnx", "artifact": "grow.onnx"}}},
        "state": {"seq": cell(grow, "package.start",
                              {"kind": "growing", "axis": 1, "increment": "package.one",
                               "max": "package.max"})},
        "steps": [{"kind": "loop", "steps": [invoke("grow", {"x": "seq"}, {"y": "seq.next"})],
                   "continue_when": "package.yes", "max_iterations": "package.n",
                   "carried": [{"cell": "seq", "next": "seq.next"}]},
                  emit("seq", "seq")],
    }  # fmt: skip
    pieces = ["x"] + ["x_tail"] * step
    g = graph(
        {"x": grow}, {"y": grow},
        [node("Slice", ["x", "z", "o", "ax"], ["x_tail"]), node("Concat", pieces, ["y"], axis=1)],
        {"z": np.array([0], np.int64), "o": np.array([1], np.int64), "ax": np.array([1], np.int64)},
    )  # fmt: skip
    return Engine.from_dir(package(tmp_path / f"g{step}", wf, {"grow.onnx": g}))


def test_growing_recurrence(tmp_path):
    result = growing_package(tmp_path, 1).run()
    assert result.outputs["seq"].shape == (1, 4)
    with pytest.raises(RunError) as err:
        growing_package(tmp_path, 2).run()
    assert err.value.code == "E57" and "grew by 2" in err.value.message


# ------------------------------------------------------------------ request binding


def binding_package(tmp_path):
    vec = rows("float32")
    wf = {
        "inputs": {
            "request.input_ids": request_input(rows("int64", "sequence"), "prompt_tokens"),
            "request.temperature": request_input(vec, "sampling_temperature", required=False,
                                                 default=1.0),
            "package.flag": literal(rows("bool"), True),
            "extra": app(rows("int64"), "extra_alias", required=False, default=7),
        },
        "outputs": {"t": out(vec), "flag": out(rows("bool")), "ids": out(rows("int64", "sequence")),
                    "extra": out(rows("int64"))},
        "steps": [emit("request.temperature", "t"), emit("package.flag", "flag"),
                  emit("request.input_ids", "ids"), emit("extra", "extra")],
    }  # fmt: skip
    return Engine.from_dir(package(tmp_path / "bind", wf, {}))


def test_defaults_broadcast_to_the_batch(tmp_path):
    engine = binding_package(tmp_path)
    result = engine.run(prompt=[[1, 2], [3, 4], [5, 6]])
    np.testing.assert_array_equal(result.outputs["flag"], [True, True, True])
    np.testing.assert_array_equal(result.outputs["extra"], [7, 7, 7])
    # greedy: temperature 0 for every row (a [batch] request scalar is broadcast)
    np.testing.assert_array_equal(result.outputs["t"], [0.0, 0.0, 0.0])
    sampled = engine.run(prompt=[[1, 2]], greedy=False, temperature=0.7)
    np.testing.assert_allclose(sampled.outputs["t"], [0.7])
    fallback = engine.run(prompt=[[1, 2]], greedy=False)
    np.testing.assert_allclose(fallback.outputs["t"], [1.0])  # the input's default
    # a sampling keyword alone asks for sampling
    asked = engine.run(prompt=[[1, 2]], temperature=0.3)
    np.testing.assert_allclose(asked.outputs["t"], [0.3])


def test_package_search_defaults_are_authoritative(tmp_path):
    """generation.defaults (upstream's fields) decide when the caller is silent: do_sample picks
    sampling, temperature feeds the sampling role, max_length bounds the final length."""
    vec = rows("float32")
    wf = {
        "inputs": {
            "request.input_ids": request_input(rows("int64", "sequence"), "prompt_tokens"),
            "request.temperature": request_input(vec, "sampling_temperature", required=False,
                                                 default=1.0),
            "request.max": request_input(S1, "max_output_tokens", required=False, default=4),
        },
        "outputs": {"t": out(vec), "max": out(S1)},
        "steps": [emit("request.temperature", "t"), emit("request.max", "max")],
    }  # fmt: skip
    sampling = {"generation": {"defaults": {"do_sample": True, "temperature": 0.6,
                                            "max_length": 10}}}  # fmt: skip
    engine = Engine.from_dir(package(tmp_path / "s", wf, {}, **sampling))
    result = engine.run(prompt=[[1, 2, 3]])
    np.testing.assert_allclose(result.outputs["t"], [0.6])
    assert int(result.outputs["max"][0]) == 7  # max_length 10 minus the 3 prompt tokens
    assert float(engine.run(prompt=[[1]], greedy=True).outputs["t"][0]) == 0.0
    assert int(engine.run(prompt=[[1] * 12]).outputs["max"][0]) == 0  # never negative
    greedy = {"generation": {"defaults": {"do_sample": False, "temperature": 0.6}}}
    engine = Engine.from_dir(package(tmp_path / "g", wf, {}, **greedy))
    result = engine.run(prompt=[[1, 2, 3]])
    assert float(result.outputs["t"][0]) == 0.0  # do_sample false: greedy despite temperature
    assert int(result.outputs["max"][0]) == 4  # no max_length: the input's default


def test_application_alias_and_dtype_from_contract(tmp_path):
    engine = binding_package(tmp_path)
    result = engine.run(prompt=[[1, 2]], inputs={"extra_alias": [9]})
    assert result.outputs["extra"].dtype == np.int64
    np.testing.assert_array_equal(result.outputs["extra"], [9])


@pytest.mark.parametrize(
    "kwargs, code, words",
    [
        ({}, "H75", "required input 'request.input_ids'"),
        ({"prompt": [[1]], "inputs": {"nope": [1]}}, "H75", "undeclared"),
        ({"prompt": [[1]], "inputs": {"extra": [1], "extra_alias": [2]}}, "H75", "twice"),
        ({"prompt": [[1], [1, 2]]}, "H75", "different lengths"),
        ({"prompt": [[1]], "seed": 3}, "H75", "no input for 'seed'"),
        ({"prompt": [[1]], "greedy": True, "temperature": 0.5}, "H75", "greedy"),
        ({"prompt": "hello"}, "H75", "text prompt"),
        ({"prompt": [[1], [2]], "inputs": {"extra": [1, 2, 3]}}, "H84", "symbol 'batch'"),
        ({"prompt": [[1]], "inputs": {"extra": np.array([1], np.int32)}}, "H75", "int32"),
    ],
)
def test_request_refusals(tmp_path, kwargs, code, words):
    engine = binding_package(tmp_path)
    with pytest.raises(RunError) as err:
        engine.run(**kwargs)
    assert err.value.code == code
    assert words in err.value.message


def test_generation_overrides_bound_requests(tmp_path):
    wf = {
        "inputs": {
            "request.max": request_input(S1, "max_output_tokens", required=False, default=4)
        },
        "outputs": {"max": out(S1)},
        "steps": [emit("request.max", "max")],
    }
    top = {"generation": {"defaults": {"max_length": 5},
                          "overrides": {"max_output_tokens": {"input": "request.max",
                                                              "constraint": {"maximum": 8}}}}}  # fmt: skip
    engine = Engine.from_dir(package(tmp_path / "o", wf, {}, **top))
    assert int(engine.run().outputs["max"][0]) == 5  # package default beats the input default
    assert int(engine.run(max_new_tokens=8).outputs["max"][0]) == 8
    with pytest.raises(RunError) as err:
        engine.run(max_new_tokens=9)
    assert err.value.code == "G88"


def _recurrence_error(recurrence, old_shape, new_shape, bounds, grouped=False):
    """The E57 message for one carried update (None if it passes)."""
    from types import SimpleNamespace

    from reference_runtime.workflow.cells import check_recurrence

    cell = SimpleNamespace(recurrence=recurrence)
    old, new = np.zeros(old_shape, np.int64), np.zeros(new_shape, np.int64)
    try:
        check_recurrence("c", cell, old, new, bounds, grouped, "loop")
    except RunError as err:
        assert err.code == "E57"
        return err.message
    return None


def test_recurrence_checks_name_the_broken_fact():
    from reference_runtime.package.model import (
        BoundedRecurrence,
        GrowingRecurrence,
        InvariantRecurrence,
    )

    one, four = np.array([1]), np.array([4])
    grow = GrowingRecurrence(kind="growing", axis=1, increment="i", max="m")
    uniform = (one, four, 4, 1)  # increment, max, largest max, the one increment
    assert _recurrence_error(grow, (2, 2, 3), (2, 3, 3), uniform) is None
    assert "grew by 2 along axis 1, expected 1" in _recurrence_error(
        grow, (2, 2, 3), (2, 4, 3), uniform
    )
    assert "reached 5 along axis 1, above max 4" in _recurrence_error(
        grow, (2, 4, 3), (2, 5, 3), uniform
    )
    # Another axis changed as well as the growing one: the message names that axis.
    assert "axis 2 changed 3 -> 4" in _recurrence_error(grow, (2, 2, 3), (2, 3, 4), uniform)
    per_row = (np.array([1, 2]), np.array([4, 4]), 4, None)
    assert "per-row growth" in _recurrence_error(grow, (2, 2, 3), (2, 3, 3), per_row)
    assert _recurrence_error(grow, (2, 2, 3), (2, 4, 3), per_row, grouped=True) is None
    assert "above the largest max" in _recurrence_error(
        grow, (2, 4, 3), (2, 5, 3), per_row, grouped=True
    )
    bounded = BoundedRecurrence(kind="bounded", axis=0, max="m")
    assert _recurrence_error(bounded, (3, 2), (4, 2), (None, four, 4, None)) is None
    assert "bounded by 4 along axis 0" in _recurrence_error(
        bounded, (4, 2), (5, 2), (None, four, 4, None)
    )
    invariant = InvariantRecurrence(kind="invariant")
    assert "invariant but changed shape" in _recurrence_error(invariant, (2, 3), (2, 4), ())
