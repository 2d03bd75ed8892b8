"""Invoke steps: the component exists (D26) and the step's ports fit it (D28).

A component's ports are the ones it declares or, when it declares none, its graph's; a
``binding`` component without a contract copies each input port to the output port of the same
name, so its outputs take the types of the values bound to its inputs.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING

from ...errors import DocPath
from ..model import InvokeStep
from .context import UNKNOWN
from .scope import Def, Scope, check_type

if TYPE_CHECKING:
    from .steps import Walk


def check_invoke(walk: Walk, step: InvokeStep, scope: Scope, path: DocPath, guards) -> None:
    ctx = walk.ctx
    name = step.component
    comp = ctx.component(name)
    walk.flow.invokes.append(step)
    for info in walk.loop_stack:
        info.components.add(name)
    if comp is None:
        ctx.add(
            "D26",
            (*path, "component"),
            f"component {name!r} is not declared",
            _component_hint(walk, name),
        )
    bound: dict[str, Def | None] = {}
    for port, value in step.inputs.items():
        bound[port] = walk.names.use(scope, value, (*path, "inputs", port), guards)
    if comp is not None:
        _check_ports(walk, step, comp, bound, path)
    for port, value in step.outputs.items():
        vtype = _output_type(walk, step, comp, port, bound)
        walk.names.define(scope, Def(value, vtype, (*path, "outputs", port), "invoke"))


def _component_hint(walk: Walk, name: str) -> str:
    close = difflib.get_close_matches(name, list(walk.wf.components), n=1)
    prefix = f"did you mean {close[0]!r}? " if close else ""
    return prefix + "Declare the component under pipeline.workflow.components."


def _output_type(walk: Walk, step: InvokeStep, comp, port: str, bound: dict):
    if comp is None:
        return UNKNOWN
    if comp.implementation.kind == "binding" and comp.contract is None:
        source = bound.get(port)
        return source.vtype if source is not None else UNKNOWN
    return walk.ctx.port_type(step.component, port, "outputs") or UNKNOWN


def _check_ports(walk: Walk, step: InvokeStep, comp, bound: dict, path: DocPath) -> None:
    _check_port_names(walk.ctx, step, comp, path, "inputs")
    _check_port_names(walk.ctx, step, comp, path, "outputs")
    _check_required_inputs(walk.ctx, step, comp, path)
    _check_declared_outputs(walk.ctx, step, comp, path)
    _check_input_types(walk.ctx, step, bound, path)
    if comp.implementation.kind == "binding" and comp.contract is None:
        _check_binding_copies(walk.ctx, step, path)


def _check_port_names(ctx, step: InvokeStep, comp, path: DocPath, direction: str) -> None:
    """Each bound port exists: among the declared ports, or the graph's when none are declared."""
    names = ctx.port_names(step.component, direction)
    if names is None:
        return
    declared = getattr(comp.ports, direction) or None  # empty: the graph's own ports
    side = "input" if direction == "inputs" else "output"
    where = f"declared {side} ports" if declared is not None else f"graph {direction}"
    for port in getattr(step, direction):
        if port not in names:
            ctx.add(
                "D28",
                (*path, direction, port),
                f"component {step.component!r} has no {side} port {port!r} ({where}: "
                f"{', '.join(names) or 'none'})",
            )


def _check_required_inputs(ctx, step: InvokeStep, comp, path: DocPath) -> None:
    """Required inputs: declared non-optional ports, or the graph's non-initializer inputs."""
    declared = comp.ports.inputs or None
    graph = ctx.graphs.get(step.component)
    if declared is not None:
        required = [p for p, c in declared.items() if not c.optional]
    elif graph is not None and comp.implementation.kind == "onnx":
        required = graph.required_inputs
    else:
        required = []
    missing = [p for p in required if p not in step.inputs]
    if missing:
        ctx.add(
            "D28",
            (*path, "inputs"),
            f"invoke of {step.component!r} leaves required input port(s) unbound: "
            f"{', '.join(missing)}",
            "Bind every required port (declare a port `optional: true` to allow "
            "leaving it unbound).",
        )


def _check_declared_outputs(ctx, step: InvokeStep, comp, path: DocPath) -> None:
    declared = comp.ports.outputs or None
    if declared is None:
        return
    unbound = [p for p, c in declared.items() if not c.optional and p not in step.outputs]
    if unbound:
        ctx.add(
            "D28",
            (*path, "outputs"),
            f"invoke of {step.component!r} leaves declared output port(s) unbound: "
            f"{', '.join(unbound)}",
            "Bind every declared output port to a value (declare a port `optional: true` "
            "to allow leaving it unbound).",
        )


def _check_input_types(ctx, step: InvokeStep, bound: dict, path: DocPath) -> None:
    name = step.component
    for port, d in bound.items():
        expected = ctx.port_type(name, port, "inputs")
        if d is not None and expected is not None:
            check_type(
                ctx,
                "D28",
                (*path, "inputs", port),
                d,
                expected,
                f"input port {port!r} of {name!r} expects {expected.describe()}",
            )


def _check_binding_copies(ctx, step: InvokeStep, path: DocPath) -> None:
    for port in step.outputs:
        if port not in step.inputs:
            ctx.add(
                "D28",
                (*path, "outputs", port),
                f"binding component {step.component!r} copies input port {port!r} to the "
                f"output port of the same name, but no input {port!r} is bound",
            )
