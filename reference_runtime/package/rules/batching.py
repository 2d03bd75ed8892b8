"""The loop a ``onnx-genai.continuous-batch@1`` component batches (C120), its slots (C121) and
the state it carries (E122).

A served batch runs the body of one loop over the rows of several requests, each admitted into
a slot when one is free (docs/runtime.md, "Serving requests in a continuous batch"). The runtime
must be able to give every request its own rows and nothing else: so the loop is a top-level
step whose body invokes the batch component once; every cell it carries has a request axis;
a cell that grows is read by an ``onnx-genai.autoregressive-decode`` component as past KV or
attention mask (the only values whose padding the runtime knows to be masked: rows of
different lengths are aligned by padding); and the workflow declares ``serving``, so that what it
emits is per row (D42) and its outputs are request-aligned like its values (D40).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model import (
    BoundedRecurrence,
    GrowingRecurrence,
    InvokeStep,
    LoopStep,
    Workflow,
)
from ..runtime_contracts import BATCH_CONTRACT, DECODE_CONTRACT, DECODE_INPUT_PORTS
from ..visit import all_steps_with_paths
from .context import Ctx

STEPS = ("pipeline", "workflow", "steps")


@dataclass(frozen=True)
class BatchedLoop:
    """Where a workflow's continuous batch runs: the top-level loop (its index in
    ``workflow.steps``) and the component that batches it."""

    index: int
    loop: LoopStep
    component: str


def batch_components(workflow: Workflow) -> list[str]:
    return [
        name
        for name, comp in workflow.components.items()
        if comp.contract is not None and comp.contract.id == BATCH_CONTRACT
    ]


def batched_loop(workflow: Workflow) -> BatchedLoop | None:
    """The loop the workflow's one continuous-batch component batches, when it is placed as
    C120 requires (None otherwise, or without such a component)."""
    names = batch_components(workflow)
    if len(names) != 1:
        return None
    found = [
        (step, path)
        for step, path in all_steps_with_paths(workflow.steps, STEPS)
        if isinstance(step, InvokeStep) and step.component == names[0]
    ]
    if len(found) != 1:
        return None
    path = found[0][1]
    if len(path) != 6 or path[4] != "steps":
        return None
    loop = workflow.steps[path[3]]
    return BatchedLoop(path[3], loop, names[0]) if isinstance(loop, LoopStep) else None


def check(ctx: Ctx) -> None:
    wf = ctx.workflow
    if wf is None:
        return
    names = batch_components(wf)
    if not names:
        return
    for name in names:
        _check_slots(ctx, name)
    if len(names) > 1:
        for name in names[1:]:
            ctx.add(
                "C120",
                ("pipeline", "workflow", "components", name),
                f"components {names[0]!r} and {name!r} are both keyed to {BATCH_CONTRACT}; a "
                "workflow batches one loop",
            )
        return
    name = names[0]
    invokes = [
        (step, path)
        for step, path in all_steps_with_paths(wf.steps, STEPS)
        if isinstance(step, InvokeStep) and step.component == name
    ]
    if not invokes:
        ctx.add(
            "C120",
            ("pipeline", "workflow", "components", name),
            f"{BATCH_CONTRACT} component {name!r} is never invoked; invoke it once in the body "
            "of the loop it batches",
        )
        return
    for _, path in invokes[1:]:
        ctx.add(
            "C120",
            path,
            f"{BATCH_CONTRACT} component {name!r} is invoked more than once; invoke it once in "
            "the body of the loop it batches",
        )
    if len(invokes) > 1:
        return
    found = batched_loop(wf)
    if found is None:
        ctx.add(
            "C120",
            invokes[0][1],
            f"{BATCH_CONTRACT} component {name!r} is not invoked directly in the body of a "
            "top-level loop (a loop's setup, a nested loop or a branch cannot be batched)",
        )
        return
    if wf.serving is None:
        ctx.add(
            "E122",
            ("pipeline", "workflow"),
            f"the workflow batches a loop ({BATCH_CONTRACT}) but declares no `serving` "
            "section: its rows' liveness and progress are undeclared",
        )
    _check_state(ctx, wf, found)


def _check_slots(ctx: Ctx, name: str) -> None:
    comp = ctx.workflow.components[name]
    parameters = dict(comp.contract.parameters)
    if "max_slots" not in parameters:
        return  # C92
    value = parameters["max_slots"]
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        ctx.add(
            "C121",
            ("pipeline", "workflow", "components", name, "contract", "parameters", "max_slots"),
            f"max_slots is {value!r}; a batch holds a whole number of slots >= 1",
        )


def _decode_reads(wf: Workflow, loop: LoopStep) -> set[str]:
    """The values the loop body passes to an autoregressive-decode component as past KV or
    attention mask."""
    read = set()
    for step, _ in all_steps_with_paths(loop.steps, ()):
        if not isinstance(step, InvokeStep):
            continue
        comp = wf.components.get(step.component)
        if comp is None or comp.contract is None or comp.contract.id != DECODE_CONTRACT:
            continue
        for port, value in step.inputs.items():
            if port == "attention_mask" or port not in DECODE_INPUT_PORTS:
                read.add(value)
    return read


def _check_state(ctx: Ctx, wf: Workflow, found: BatchedLoop) -> None:
    loop_path = (*STEPS, found.index)
    padded = _decode_reads(wf, found.loop)
    for i, carry in enumerate(found.loop.carried):
        cell = wf.state.get(carry.cell)
        if cell is None:
            continue  # refused elsewhere
        where = (*loop_path, "carried", i)
        if cell.scope == "session":
            ctx.add(
                "E122",
                where,
                f"the batched loop carries session cell {carry.cell!r}; a served request has no "
                "session",
            )
        elif cell.contract.request_axis is None:
            ctx.add(
                "E122",
                where,
                f"the batched loop carries cell {carry.cell!r}, which has no request axis: its "
                "rows cannot be given to the requests of a batch",
            )
        elif isinstance(cell.recurrence, BoundedRecurrence):
            ctx.add(
                "E122",
                where,
                f"the batched loop carries bounded cell {carry.cell!r}; rows of different "
                "lengths cannot be aligned in a bounded window",
            )
        elif isinstance(cell.recurrence, GrowingRecurrence) and carry.cell not in padded:
            ctx.add(
                "E122",
                where,
                f"the batched loop carries growing cell {carry.cell!r}, which no "
                f"{DECODE_CONTRACT} component reads as past KV or attention mask: the runtime "
                "cannot pad it to align rows of different lengths",
            )
