"""Emit steps: the output and the row controls (D38), the value against the output's contract
(D39, D40), per-row values in serving workflows (D42), and outputs that receive per-row emits
(D41, checked once the walk is over).

An emit with ``when`` or ``valid_length`` is *per row*: it publishes some rows of the value, so
the value needs a request axis and the output a ``request_aligned`` layout.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING

from ... import dtypes
from ...errors import DocPath
from ..model import EmitStep, SharedLayout
from .context import VType, layout_name, same_layout
from .flow import EmitInfo
from .scope import Def, Scope

if TYPE_CHECKING:
    from .steps import Walk


def check_emit(walk: Walk, step: EmitStep, scope: Scope, path: DocPath, guards) -> None:
    _record_features(walk, step)
    value = walk.names.use(scope, step.value, (*path, "value"), guards)
    output = _check_output(walk, step, path)
    per_row = step.when is not None or step.valid_length is not None
    _check_row_controls(walk, step, scope, path, guards)
    if value is not None:
        _check_value(walk, step, value, per_row, path)
        if output is not None:
            _check_against_output(walk, step, value, output, path)
        _check_serving_value(walk, value, path)
    if per_row and step.output not in walk.per_row_outputs:
        walk.per_row_outputs[step.output] = path
    walk.flow.emits.append(EmitInfo(step, value, per_row))


def _record_features(walk: Walk, step: EmitStep) -> None:
    features = walk.flow.features
    features.add("emit")
    if step.mode == "event":
        features.add("event")
    if step.valid_length is not None:
        features.add("valid_length")
    if walk.loop_stack:
        features.add("linear_effects")


def _check_output(walk: Walk, step: EmitStep, path: DocPath):
    """The declared output the emit writes, or None (D38) when there is none."""
    outputs = walk.wf.outputs
    output = outputs.get(step.output)
    if output is None:
        close = difflib.get_close_matches(step.output, list(outputs), n=1)
        walk.ctx.add(
            "D38",
            (*path, "output"),
            f"output {step.output!r} is not declared",
            (f"did you mean {close[0]!r}? " if close else "")
            + "Declare it under pipeline.workflow.outputs.",
        )
    return output


def _check_row_controls(walk: Walk, step: EmitStep, scope: Scope, path, guards) -> None:
    """``when`` is a bool, ``valid_length`` an integer, each of rank <= 1."""
    ctx, names = walk.ctx, walk.names
    if step.when is not None:
        d = names.use(scope, step.when, (*path, "when"), guards)
        if d is not None and _is_row_control(d.vtype, lambda t: t == "bool") is False:
            ctx.add(
                "D38",
                (*path, "when"),
                f"when {d.name!r} is {d.vtype.describe()}, not a bool of rank <= 1",
            )
    if step.valid_length is not None:
        d = names.use(scope, step.valid_length, (*path, "valid_length"), guards)
        if d is not None and _is_row_control(d.vtype, lambda t: t in dtypes.INTEGER) is False:
            ctx.add(
                "D38",
                (*path, "valid_length"),
                f"valid_length {d.name!r} is {d.vtype.describe()}, not an integer of rank <= 1",
            )


def _is_row_control(t: VType, dtype_ok) -> bool | None:
    if t.dtype is None or t.rank is None:
        return None
    return dtype_ok(t.dtype) and t.rank <= 1


def _check_value(walk: Walk, step: EmitStep, value: Def, per_row: bool, path: DocPath) -> None:
    t = value.vtype
    if per_row and t.layout is not None and t.request_axis is None:
        walk.ctx.add(
            "D38",
            (*path, "value"),
            f"per-row emit of {value.name!r}, whose layout {layout_name(t.layout)} "
            "has no request axis",
        )
    if step.valid_length is not None and t.rank == 0:
        walk.ctx.add(
            "D39", (*path, "value"), f"valid_length emit of {value.name!r}, which has rank 0"
        )


def _check_against_output(walk: Walk, step: EmitStep, value: Def, output, path) -> None:
    """The value's dtype, rank and fixed extents fit the output's contract (D39), and its
    layout is the output's (D40)."""
    ctx, t = walk.ctx, value.vtype
    expected = VType.of_contract(output.contract)
    problems = _dtype_rank_mismatch(t, expected)
    for why in problems:
        ctx.add(
            "D39",
            (*path, "value"),
            f"emit of {value.name!r} into {step.output!r}: the value has {why}",
        )
    if not problems and t.dims is not None and expected.dims is not None:
        # fixed extents must agree, except on a valid_length emit's prefix axis
        prefix = t.rank - 1 if step.valid_length is not None else None
        for axis, (a, e) in enumerate(zip(t.dims, expected.dims, strict=False)):
            if axis != prefix and isinstance(a, int) and isinstance(e, int) and a != e:
                ctx.add(
                    "D39",
                    (*path, "value"),
                    f"emit of {value.name!r} into {step.output!r}: axis {axis} is "
                    f"{a} but the output's contract fixes it to {e}",
                )
    # Every emit's layout must equal its output's, so emits into one output can never mix
    # layouts: one check covers both halves of format rule 40.
    if not same_layout(t.layout, output.contract.batch_layout):
        ctx.add(
            "D40",
            (*path, "value"),
            f"value {value.name!r} has layout {layout_name(t.layout)} but output "
            f"{step.output!r} is {layout_name(output.contract.batch_layout)}",
        )


def _dtype_rank_mismatch(actual: VType, expected: VType) -> list[str]:
    out = []
    if actual.dtype and expected.dtype and actual.dtype != expected.dtype:
        out.append(f"dtype {actual.dtype}, the output {expected.dtype}")
    elif actual.rank is not None and expected.rank is not None and actual.rank != expected.rank:
        out.append(f"rank {actual.rank}, the output rank {expected.rank}")
    return out


def _check_serving_value(walk: Walk, value: Def, path: DocPath) -> None:
    t = value.vtype
    if (
        walk.wf.serving is not None
        and isinstance(t.layout, SharedLayout)
        and t.rank is not None
        and t.rank > 0
    ):
        walk.ctx.add(
            "D42",
            (*path, "value"),
            f"serving workflows publish per-row values; {value.name!r} is a shared "
            f"tensor of rank {t.rank}",
        )


def check_per_row_outputs(walk: Walk) -> None:
    """An output that receives per-row emits is ``request_aligned`` (D41)."""
    for name in walk.per_row_outputs:
        output = walk.wf.outputs.get(name)
        if output is None:
            continue
        layout = output.contract.batch_layout
        if layout.kind != "request_aligned":
            walk.ctx.add(
                "D41",
                ("pipeline", "workflow", "outputs", name, "contract", "batch_layout"),
                f"output {name!r} receives per-row emits (when / valid_length) but is "
                f"{layout_name(layout)}, not request_aligned",
            )
