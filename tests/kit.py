"""Tiny runnable packages built in test code: graphs with ``onnx.helper``, documents as dicts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import yaml
from onnx import helper, numpy_helper

from fixtures.generators.common import contract, literal, request_input, rows  # noqa: F401
from reference_runtime import dtypes

OPSET = 21
ALL_CAPS = [
    "workflow_ssa", "linear_effects", "nested_control_flow", "loop_induction_values",
    "typed_emit", "streaming_emit", "emit_valid_length", "input_presence",
    "serving_service_contract", "session_state_lease", "bounded_state_recurrence",
    "advisory_state",
]  # fmt: skip


def node(op: str, inputs: list[str], outputs: list[str], **attrs) -> onnx.NodeProto:
    return helper.make_node(op, inputs, outputs, **attrs)


def graph(
    inputs: dict[str, dict],
    outputs: dict[str, dict],
    nodes: list,
    initializers: dict[str, np.ndarray] | None = None,
    name: str = "g",
) -> onnx.ModelProto:
    def info(n, c):
        elem = dtypes.ONNX_ELEM_TYPE[dtypes.canonical(c["dtype"])]
        return helper.make_tensor_value_info(n, elem, list(c.get("shape", [])))

    g = helper.make_graph(
        nodes,
        name,
        [info(n, c) for n, c in inputs.items()],
        [info(n, c) for n, c in outputs.items()],
        initializer=[
            numpy_helper.from_array(np.asarray(v), name=k) for k, v in (initializers or {}).items()
        ],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=10)
    onnx.checker.check_model(model)
    return model


def component(artifact: str, inputs: dict | None = None, outputs: dict | None = None) -> dict:
    comp: dict = {"implementation": {"kind": "onnx", "artifact": artifact}}
    if inputs is not None or outputs is not None:
        comp["ports"] = {}
        if inputs is not None:
            comp["ports"]["inputs"] = inputs
        if outputs is not None:
            comp["ports"]["outputs"] = outputs
    return comp


def package(root: Path, workflow: dict, graphs: dict[str, onnx.ModelProto], **top) -> Path:
    """Write a package (manifest capabilities default to a broad supported list; an application
    input made by :func:`app` without an alias is supplied under its own name)."""
    root.mkdir(parents=True, exist_ok=True)
    workflow = dict(workflow)
    workflow.setdefault("manifest", {"capabilities": ALL_CAPS})
    workflow.setdefault("components", {})
    inputs = {}
    for name, inp in (workflow.get("inputs") or {}).items():
        source = inp.get("source") or {}
        if source.get("kind") == "application" and "name" not in source:
            inp = {**inp, "source": {**source, "name": name}}
        inputs[name] = inp
    if inputs:
        workflow["inputs"] = inputs
    doc = {"schema_version": "v1", "pipeline": {"workflow": workflow}, **top}
    (root / "inference_metadata.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    for relpath, model in graphs.items():
        target = root / relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        onnx.save(model, str(target))
    return root


def invoke(component: str, inputs: dict, outputs: dict) -> dict:
    return {"kind": "invoke", "component": component, "inputs": inputs, "outputs": outputs}


def emit(value: str, output: str, mode: str = "replace", **extra) -> dict:
    return {"kind": "emit", "value": value, "output": output, "mode": mode, **extra}


def app(c: dict, alias: str | None = None, **extra) -> dict:
    source = {"kind": "application", **({"name": alias} if alias else {})}
    return {"contract": c, "role": {"kind": "opaque"}, "source": source, **extra}


def out(c: dict, role: str = "tensor") -> dict:
    return {"contract": c, "role": role, "stage": "pre_adapter"}


def cell(c: dict, initializer: str, recurrence: dict | None = None, **extra) -> dict:
    d = {
        "contract": c,
        "scope": "invocation",
        "initializer": initializer,
        "recurrence": recurrence or {"kind": "invariant"},
    }
    d.update(extra)
    return d


# ------------------------------------------------------------------ common graphs


def unary(op: str, dtype: str = "int64", *shape, const=None, const_dtype=None) -> onnx.ModelProto:
    """y = op(x, c) (binary with a constant) or y = op(x)."""
    c = contract(dtype, *shape)
    inits = {}
    ins = ["x"]
    if const is not None:
        inits["c"] = np.asarray(const, dtype=const_dtype or dtypes_np(dtype))
        ins.append("c")
    return graph({"x": c}, {"y": c}, [node(op, ins, ["y"])], inits)


def dtypes_np(dtype: str):
    from reference_runtime.arrays import numpy_dtype

    return numpy_dtype(dtype)
