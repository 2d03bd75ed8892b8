"""Application component overrides at request time: a declared replacement of the same contract
runs in place of an `application_overridable` component, ports remapped by role."""

from __future__ import annotations

import numpy as np
import pytest

from reference_runtime import Engine
from reference_runtime.errors import RunError
from tests.kit import app, component, contract, graph, invoke, node, out, package

# every test here runs under the compiled interpreter and the plain one
pytestmark = pytest.mark.usefixtures("interpreter_mode")

X = contract("int64", "n")
CONTRACT = {"id": "example.scale", "version": "1", "bindings": {"input": "x", "output": "y"}}


def scale(factor: int, src: str = "x", dst: str = "y", dtype: str = "int64"):
    c = contract(dtype, "n")
    return graph({src: c}, {dst: c}, [node("Mul", [src, "k"], [dst])], {"k": np.asarray(
        [factor], dtype=np.int64 if dtype == "int64" else np.float32)})  # fmt: skip


def scale3_wide():
    c = contract("int64", "n", 2)
    return graph({"a": c}, {"b": c}, [node("Mul", ["a", "k"], ["b"])],
                 {"k": np.asarray([3], dtype=np.int64)})  # fmt: skip


def build(tmp_path, **changes):
    wide = "ports" in (changes["triple"]({"contract": CONTRACT}) if "triple" in changes else {})
    double = {**component("double.onnx", {"x": X}, {"y": X}), "contract": CONTRACT,
              "application_overridable": True}  # fmt: skip
    triple = {**component("triple.onnx", {"a": X}, {"b": X}),
              "contract": {**CONTRACT, "bindings": {"input": "a", "output": "b"}}}  # fmt: skip
    components = {"double": double, "triple": triple, "negate": component("negate.onnx")}
    for name, edit in changes.items():
        components[name] = edit(components[name])
    workflow = {
        "inputs": {"x": app(X)},
        "outputs": {"y": out(X)},
        "components": components,
        "steps": [
            invoke("double", {"x": "x"}, {"y": "y1"}),
            {"kind": "emit", "value": "y1", "output": "y", "mode": "replace"},
        ],
    }
    graphs = {
        "double.onnx": scale(2),
        "triple.onnx": scale3_wide() if wide else scale(3, "a", "b"),
        "negate.onnx": graph({"x": X}, {"y": X}, [node("Neg", ["x"], ["y"])]),
    }
    return Engine.from_dir(package(tmp_path / "pkg", workflow, graphs))


def test_the_replacement_runs_in_place_of_the_target(tmp_path):
    engine = build(tmp_path)
    x = np.asarray([1, 2, 3], dtype=np.int64)
    assert engine.run(inputs={"x": x}).outputs["y"].tolist() == [2, 4, 6]
    result = engine.run(inputs={"x": x}, overrides={"double": "triple"})
    assert result.outputs["y"].tolist() == [3, 6, 9]
    assert engine.counters["invocations"] == {"double": {"ort": 1}, "triple": {"ort": 1}}
    # An override lasts one request.
    assert engine.run(inputs={"x": x}).outputs["y"].tolist() == [2, 4, 6]


@pytest.mark.parametrize(
    ("overrides", "changes", "fact"),
    [
        ({"nothing": "triple"}, {}, "unknown target 'nothing'"),
        ({"double": "nothing"}, {}, "unknown replacement 'nothing'"),
        ({"triple": "double"}, {}, "'triple' is not application_overridable"),
        ({"double": "negate"}, {}, "'negate' declares no contract"),
        (
            {"double": "triple"},
            {"triple": lambda c: {**c, "contract": {**c["contract"], "version": "2"}}},
            "contracts differ",
        ),
        (
            {"double": "triple"},
            {"triple": lambda c: {**c, "contract": {**c["contract"], "bindings": {"input": "a"}}}},
            "binding roles differ",
        ),
        (
            {"double": "triple"},
            {
                "triple": lambda c: {
                    **c,
                    "ports": {
                        "inputs": {"a": contract("int64", "n", 2)},
                        "outputs": {"b": contract("int64", "n", 2)},
                    },
                }
            },
            "have different contracts",
        ),
    ],
)
def test_a_mismatched_override_is_refused_before_anything_runs(tmp_path, overrides, changes, fact):
    engine = build(tmp_path, **changes)
    with pytest.raises(RunError) as caught:
        engine.run(inputs={"x": np.asarray([1], dtype=np.int64)}, overrides=overrides)
    assert caught.value.code == "C21" and fact in caught.value.message
    assert engine.counters["invocations"] == {}
    # the fix: the declared names for an unknown one, else what a replacement must share
    unknown = "unknown" in fact
    assert ("Name declared components (double, negate, triple)" in caught.value.hint) == unknown
    assert ("of the same contract" in caught.value.hint) != unknown


def test_cli_override(tmp_path, capsys):
    import json

    from reference_runtime.cli import main

    build(tmp_path)
    root = str(tmp_path / "pkg")
    args = ["run", root, "--input", "x=[1, 2]", "--json"]
    assert main([*args, "--override", "double=triple"]) == 0
    assert json.loads(capsys.readouterr().out)["outputs"]["y"]["data"] == [3, 6]
    assert main([*args, "--override", "double"]) == 2
