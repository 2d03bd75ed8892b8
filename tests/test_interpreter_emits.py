"""Per-row emits inside a loop: a row the loop predicate marks inactive appends nothing, even
when the emit carries no `when` of its own (FORMAT.md section 6: "An inactive row appends
nothing, with no padding"); a dense emit still publishes every row."""

from __future__ import annotations

import numpy as np

from reference_runtime import Engine
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

I64 = rows("int64")
BOOL = rows("bool")
COL = rows("int64", 1)


def _counting(tmp_path, emits):
    """n ([batch, 1]) counts up from x while n < 5 (`go` is the loop predicate)."""
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
    graphs = {
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
