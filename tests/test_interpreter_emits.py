"""Per-row emits inside a loop: a row the loop predicate marks inactive appends nothing, with no
padding, even when the emit carries no `when` of its own (docs/runtime.md, "What the
interpreter checks while running"); a dense emit still publishes every row."""

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

I64 = rows("int64")
BOOL = rows("bool")
COL = rows("int64", 1)


def _counting(tmp_path, emits, components=None, graphs=None):
    """n ([batch, 1]) counts up from x while n < 5 (`go` is the loop predicate); ``emits`` (and
    invokes of the extra ``components``) run after the count."""
    loop = {
        "kind": "loop",
        "steps": [
            invoke("add1", {"x": "n"}, {"y": "n.next"}),
            invoke("less5", {"x": "n.next"}, {"y": "go.next"}),
            *emits,
        ],
        "continue_when": "go",
        "max_iterations": "request.max",
        "carried": [{"cell": "n", "next": "n.next"}, {"cell": "go", "next": "go.next"}],
    }
    wf = {
        "inputs": {
            "x": app(COL),
            "request.max": request_input(contract("int64", 1), "max_output_tokens"),
            "package.go": literal(BOOL, True),
            "package.one": literal(I64, 1),
        },
        "outputs": {
            "tokens": out(rows("int64", "generated"), role="tokens"),
            "trace": out(rows("int64", "steps")),
        },
        "components": {
            "add1": {"implementation": {"kind": "onnx", "artifact": "add1.onnx"},
                     "ports": {"inputs": {"x": COL}, "outputs": {"y": COL}}},
            "less5": {"implementation": {"kind": "onnx", "artifact": "less5.onnx"},
                      "ports": {"inputs": {"x": COL}, "outputs": {"y": BOOL}}},
        },
        "state": {"n": cell(COL, "x"), "go": cell(BOOL, "package.go")},
        "steps": [loop],
    }  # fmt: skip
    wf["components"].update(components or {})
    graphs = {
        **(graphs or {}),
        "add1.onnx": graph(
            {"x": COL}, {"y": COL}, [node("Add", ["x", "k"], ["y"])], {"k": np.array(1, np.int64)}
        ),
        "less5.onnx": graph(
            {"x": COL}, {"y": BOOL},
            [node("Less", ["x", "k"], ["lt"]), node("Squeeze", ["lt", "axes"], ["y"])],
            {"k": np.array(5, np.int64), "axes": np.array([1], np.int64)},
        ),
    }  # fmt: skip
    return Engine.from_dir(package(tmp_path / "p", wf, graphs))


def test_inactive_row_appends_nothing_without_when(tmp_path):
    engine = _counting(
        tmp_path,
        [
            emit("n.next", "tokens", "append", valid_length="package.one", axis=1),
            emit("n.next", "trace", "append", axis=1),  # dense: every row, every iteration
        ],
    )
    result = engine.run(inputs={"x": [[1], [3]]}, max_new_tokens=10)
    # Row 1 reaches 5 after two iterations; the body still runs on it twice more (its n is
    # merged back to 5, so the body computes 6 each time), but it is inactive and publishes
    # nothing more.
    assert result.tokens == [[2, 3, 4, 5], [4, 5]]
    assert [r.shape for r in result.outputs["tokens"]] == [(1, 4), (1, 2)]
    np.testing.assert_array_equal(result.outputs["trace"], [[2, 3, 4, 5], [4, 5, 6, 6]])
    assert engine.counters["loop_iterations"] == 4


MINUS2 = {  # len = n - 2 as a [batch] vector
    "components": {"minus2": {"implementation": {"kind": "onnx", "artifact": "minus2.onnx"},
                              "ports": {"inputs": {"x": COL}, "outputs": {"y": I64}}}},
    "graphs": {"minus2.onnx": graph(
        {"x": COL}, {"y": I64},
        [node("Sub", ["x", "k"], ["d"]), node("Squeeze", ["d", "axes"], ["y"])],
        {"k": np.array(2, np.int64), "axes": np.array([1], np.int64)},
    )},
}  # fmt: skip


def test_valid_length_out_of_range_on_a_later_iteration_is_refused(tmp_path):
    """The first emits publish 0 and then 1 entry; the third asks for 2 of 1 (D85), after the
    emit has run on its compiled path."""
    engine = _counting(
        tmp_path,
        [invoke("minus2", {"x": "n.next"}, {"y": "len"}),
         emit("n.next", "tokens", "append", valid_length="len", axis=1)],
        **MINUS2,
    )  # fmt: skip
    two = engine.run(inputs={"x": [[1]]}, max_new_tokens=2)
    assert two.tokens == [[3]]  # n.next 2 publishes 0 entries, 3 publishes 1
    with pytest.raises(RunError) as err:
        engine.run(inputs={"x": [[1]]}, max_new_tokens=3)
    assert err.value.code == "D85"
    assert "valid_length 2 of row 0 is outside [0, 1]" in err.value.message


def test_replace_and_when_per_row(tmp_path):
    """`replace` keeps each row's last published chunk; `when` (len > 0 here, as a bool) holds
    a row back on the iterations it is false, while every row is active."""
    engine = _counting(
        tmp_path,
        [invoke("minus2", {"x": "n.next"}, {"y": "len"}),
         invoke("positive", {"x": "len"}, {"y": "ready"}),
         emit("n.next", "tokens", "append", when="ready", axis=1),
         emit("n.next", "trace", "replace", when="ready")],
        components={**MINUS2["components"],
                    "positive": {"implementation": {"kind": "onnx", "artifact": "positive.onnx"},
                                 "ports": {"inputs": {"x": I64}, "outputs": {"y": BOOL}}}},
        graphs={**MINUS2["graphs"],
                "positive.onnx": graph({"x": I64}, {"y": BOOL}, [node("Greater", ["x", "z"], ["y"])],
                                       {"z": np.array(0, np.int64)})},
    )  # fmt: skip
    result = engine.run(inputs={"x": [[0], [2]]}, max_new_tokens=3)
    # row 0: n.next 1, 2, 3 -> len -1, 0, 1: only the third publishes; row 1: 3, 4, 5 -> all.
    assert result.tokens == [[3], [3, 4, 5]]
    assert [t.tolist() for t in result.outputs["trace"]] == [[[3]], [[5]]]


def test_row_streams_join_their_appends_once_and_refuse_what_does_not_fit():
    from reference_runtime.workflow.outputs import _append, _published

    a = np.array([[1, 2]], np.int64)
    stream = _append(None, a, 1, "here")
    a[0, 0] = 9  # the stream holds its own copy
    stream = _append(stream, np.array([[3]], np.int64), 1, "here")
    stream = _append(stream, np.array([[4, 5]], np.int64), 1, "here")
    np.testing.assert_array_equal(_published(stream), [[1, 2, 3, 4, 5]])
    # Another axis joins what is there first; a published chunk can be appended to.
    stream = _append(stream, np.array([[6, 7, 8, 9, 10]], np.int64), 0, "here")
    np.testing.assert_array_equal(_published(stream), [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]])
    stream = _append(np.array([[1]], np.int64), np.array([[2]], np.int64), 1, "here")
    np.testing.assert_array_equal(_published(stream), [[1, 2]])
    for chunk, words in [
        (np.array([[1.0]], np.float32), "cannot append float32 rank 2 to int64 rank 2"),
        (np.array([[1], [2]], np.int64), "differs from [1, 2] outside axis 1"),
        (np.array([1], np.int64), "cannot append int64 rank 1"),
    ]:
        with pytest.raises(RunError) as err:
            _append(stream, chunk, 1, "here")
        assert err.value.code == "D85" and words in err.value.message
