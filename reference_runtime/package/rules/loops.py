"""Loop steps: the bound (D30), the iteration value (D31), the predicate (D32), carried cells
and their initial and next values (D26, D29, D33), recurrence bounds (D34).

A loop's ``setup`` runs in the enclosing scope, before the carried cells are bound; its body is
a child scope that sees the carried cells and the iteration value; after the loop each carried
cell's name holds its final value, in the enclosing scope.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import DocPath, format_location
from ..model import LoopStep
from ..visit import step_parts
from .context import UNKNOWN, VType, is_integer_scalar
from .flow import LoopInfo
from .scope import Def, Scope, check_type

if TYPE_CHECKING:
    from .steps import Walk


def check_loop(walk: Walk, step: LoopStep, scope: Scope, path: DocPath, guards) -> None:
    info = _record(walk, step)
    setup, body_steps = step_parts(step, path)
    walk.loop_stack.append(info)
    walk.names.setup_of.append((path, {c.cell for c in step.carried}))
    walk.visit(setup.children, scope, guards)
    walk.names.setup_of.pop()
    walk.loop_stack.pop()

    _check_max_iterations(walk, step, scope, path, guards)
    carried = _check_carried(walk, step, scope, path, guards)
    _check_continue_when(walk, step, carried, scope, path, guards)

    body = _body_scope(walk, step, carried, scope, path)
    walk.loop_stack.append(info)
    walk.visit(body_steps.children, body, guards)
    walk.loop_stack.pop()

    _check_next_values(walk, step, carried, body, path, guards)
    _bind_final_values(walk, carried, scope)


def _record(walk: Walk, step: LoopStep) -> LoopInfo:
    """Note the loop (nested in the enclosing one) and the features it uses."""
    info = LoopInfo(step)
    (walk.loop_stack[-1].children if walk.loop_stack else walk.flow.loops).append(info)
    features = walk.flow.features
    features.add("loop")
    if step.iteration is not None:
        features.add("iteration")
    if step.carried:
        features.add("linear_effects")
    return info


def _check_max_iterations(walk: Walk, step: LoopStep, scope: Scope, path: DocPath, guards):
    mi = walk.names.use(scope, step.max_iterations, (*path, "max_iterations"), guards)
    if mi is not None and is_integer_scalar(mi.vtype) is False:
        walk.ctx.add(
            "D30",
            (*path, "max_iterations"),
            f"max_iterations {mi.name!r} is {mi.vtype.describe()}, not an integer [] or [1]",
        )


# ------------------------------------------------------------------ carried cells at entry


def _check_carried(walk: Walk, step: LoopStep, scope: Scope, path: DocPath, guards) -> dict:
    """Check each carried cell at loop entry; return the cells carried, by name."""
    ctx = walk.ctx
    carried: dict[str, object] = {}
    for i, carry in enumerate(step.carried):
        cpath = (*path, "carried", i)
        cell = walk.wf.state.get(carry.cell)
        if cell is None:
            ctx.add("D26", (*cpath, "cell"), f"cell {carry.cell!r} is not declared under state")
            continue
        if carry.cell in carried:
            ctx.add("D29", (*cpath, "cell"), f"cell {carry.cell!r} is carried twice by this loop")
            continue
        carried[carry.cell] = cell
        walk.flow.carried.setdefault(carry.cell, []).append(cpath)
        _check_initializer(walk, carry.cell, cell, scope, path, guards)
        if carry.initial is not None:
            _check_initial(walk, carry, cell, scope, cpath, guards)
        _check_recurrence_bounds(walk, carry.cell, cell, scope, guards)
    return carried


def _check_initializer(walk: Walk, cell_name: str, cell, scope: Scope, path: DocPath, guards):
    ipath = ("pipeline", "workflow", "state", cell_name, "initializer")
    d = scope.lookup(cell.initializer)
    if d is None:
        walk.ctx.add(
            "D33",
            ipath,
            f"initializer {cell.initializer!r} of cell {cell_name!r} is not visible "
            f"where the loop at {format_location(path)} starts",
        )
        return
    walk.names.use(scope, cell.initializer, ipath, guards)
    expected = VType.of_contract(cell.contract)
    check_type(walk.ctx, "D33", ipath, d, expected, f"initializer of cell {cell_name!r}")


def _check_initial(walk: Walk, carry, cell, scope: Scope, cpath: DocPath, guards) -> None:
    d = scope.lookup(carry.initial)
    if d is None:
        walk.ctx.add(
            "D33",
            (*cpath, "initial"),
            f"initial value {carry.initial!r} is not visible where the loop starts",
        )
        return
    walk.names.use(scope, carry.initial, (*cpath, "initial"), guards)
    expected = VType.of_contract(cell.contract)
    what = f"initial value of cell {carry.cell!r}"
    check_type(walk.ctx, "D33", (*cpath, "initial"), d, expected, what)


def _check_recurrence_bounds(walk: Walk, cell_name: str, cell, scope: Scope, guards) -> None:
    rec = cell.recurrence
    rpath = ("pipeline", "workflow", "state", cell_name, "recurrence")
    for key in ("increment", "max"):
        name = getattr(rec, key, None)
        if name is None:
            continue
        d = scope.lookup(name)
        if d is None:
            walk.ctx.add(
                "D34",
                (*rpath, key),
                f"recurrence {key} {name!r} of cell {cell_name!r} is not visible at loop entry",
            )
            continue
        walk.names.use(scope, name, (*rpath, key), guards)
        if is_integer_scalar(d.vtype) is False and not (
            key == "increment" and cell.service_group is not None
        ):
            walk.ctx.add(
                "D34",
                (*rpath, key),
                f"recurrence {key} {name!r} is {d.vtype.describe()}, not an integer scalar",
            )


def _check_continue_when(walk: Walk, step: LoopStep, carried: dict, scope, path, guards) -> None:
    cw_path = (*path, "continue_when")
    if step.continue_when in carried:
        cw_type = VType.of_contract(carried[step.continue_when].contract)
    else:
        d = scope.lookup(step.continue_when)
        if d is None:
            walk.ctx.add(
                "D32",
                cw_path,
                f"continue_when {step.continue_when!r} is not visible before the loop "
                "body (use a value defined before the loop, or a carried cell)",
            )
            cw_type = UNKNOWN
        else:
            walk.names.use(scope, step.continue_when, cw_path, guards)
            cw_type = d.vtype
    if _is_bool_flag(cw_type) is False:
        walk.ctx.add(
            "D32",
            cw_path,
            f"continue_when {step.continue_when!r} is {cw_type.describe()}, not a bool of "
            "rank <= 1",
        )


def _is_bool_flag(t: VType) -> bool | None:
    if t.dtype is None or t.rank is None:
        return None
    return t.dtype == "bool" and t.rank <= 1


# ------------------------------------------------------------------ the body


def _body_scope(walk: Walk, step: LoopStep, carried: dict, scope: Scope, path) -> Scope:
    """The body's scope: the carried cells (D29 when a visible value has the name), then the
    iteration value."""
    body = Scope(scope, "loop body")
    for cell_name, cell in carried.items():
        where = walk.flow.carried[cell_name][-1]
        previous = scope.lookup(cell_name)
        if previous is not None:
            _report_clash(walk, cell_name, where, previous)
        body.defs[cell_name] = Def(cell_name, VType.of_contract(cell.contract), where, "cell")
    if step.iteration is not None:
        _define_iteration(walk, step, body, path)
    return body


def _report_clash(walk: Walk, cell_name: str, carry_path: DocPath, previous: Def) -> None:
    where = format_location(previous.path)
    walk.ctx.add(
        "D29",
        (*carry_path, "cell"),
        f"cell {cell_name!r} is already carried at {where}, by a loop whose scope "
        "reaches this one; a cell is carried by at most one loop per scope"
        if previous.origin == "cell"
        else f"carried cell {cell_name!r} clashes with a visible value defined at {where}",
    )


def _define_iteration(walk: Walk, step: LoopStep, body: Scope, path: DocPath) -> None:
    ctx = walk.ctx
    it = step.iteration
    c = it.contract
    cpath = (*path, "iteration", "contract")
    if c.dtype != "int64":
        ctx.add("D31", (*cpath, "dtype"), f"the iteration value is {c.dtype}, not int64")
    if c.rank > 1:
        ctx.add("D31", (*cpath, "rank"), f"the iteration value has rank {c.rank}, at most 1")
    if c.shape is not None and len(c.shape) != c.rank:
        ctx.add(
            "D31",
            (*cpath, "shape"),
            f"the iteration shape lists {len(c.shape)} dimension(s) for rank {c.rank}",
        )
    if c.rank == 1 and c.shape is None:
        ctx.add("D31", cpath, "a rank-1 iteration value needs a shape ([1] or [batch])")
    if c.request_axis is not None and c.request_axis >= c.rank:
        ctx.add(
            "D31",
            (*cpath, "batch_layout", "axis"),
            f"the iteration's batch layout axis {c.request_axis} is beyond its rank {c.rank}",
        )
    value = Def(it.value, VType.of_contract(c), (*path, "iteration", "value"), "iteration")
    walk.names.define(body, value)


# ------------------------------------------------------------------ after the body


def _check_next_values(walk: Walk, step: LoopStep, carried: dict, body: Scope, path, guards):
    """Each carried cell's next value is defined by the body, with the cell's type."""
    for i, carry in enumerate(step.carried):
        cell = carried.get(carry.cell)
        if cell is None:
            continue
        npath = (*path, "carried", i, "next")
        d = body.lookup(carry.next)
        if d is None:
            walk.ctx.add(
                "D29",
                npath,
                f"next value {carry.next!r} of cell {carry.cell!r} is not defined by the loop body",
                walk.names.hint(body, carry.next),
            )
            continue
        walk.names.use(body, carry.next, npath, guards)
        expected = VType.of_contract(cell.contract)
        check_type(walk.ctx, "D33", npath, d, expected, f"next value of cell {carry.cell!r}")


def _bind_final_values(walk: Walk, carried: dict, scope: Scope) -> None:
    """After the loop each carried cell's name holds its final value."""
    for cell_name, cell in carried.items():
        if scope.lookup(cell_name) is None:
            where = walk.flow.carried[cell_name][-1]
            final = Def(cell_name, VType.of_contract(cell.contract), where, "cell")
            walk.names.define(scope, final)
