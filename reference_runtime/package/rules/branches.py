"""Branch steps: the predicate and case keys (D35), phi outputs (D36), session cells updated in
a case (D37).

Each case (and the default) is one step, walked in a child scope; only the branch's phi outputs
leave it. A ``true`` case on a presence flag may read the optional input the flag guards.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...errors import DocPath
from ..model import BranchStep
from ..visit import child_steps_with_paths
from .context import UNKNOWN, mismatch
from .scope import Def, Scope

if TYPE_CHECKING:
    from .steps import Walk


@dataclass
class Arm:
    """A case (or the default) once walked: its scope, its guards, the cells it carried."""

    path: DocPath
    scope: Scope
    guards: frozenset
    cells: set[str]


def check_branch(walk: Walk, step: BranchStep, scope: Scope, path: DocPath, guards) -> None:
    walk.flow.features.add("branch")
    pred = _check_predicate(walk, step, scope, path, guards)
    _check_case_keys(walk, step, pred.vtype.dtype if pred else None, path)
    arms = _walk_arms(walk, step, pred, scope, path, guards)
    for name, phi in step.outputs.items():
        _check_phi_cases(walk, step, name, phi, (*path, "outputs", name))
        first = _check_phi_sources(walk, name, phi, arms, (*path, "outputs", name), guards)
        phi_type = first.vtype if first else UNKNOWN
        walk.names.define(scope, Def(name, phi_type, (*path, "outputs", name), "phi"))
    _check_session_cells(walk, step, arms)


# ------------------------------------------------------------------ predicate and cases


def _check_predicate(walk: Walk, step: BranchStep, scope: Scope, path, guards) -> Def | None:
    ppath = (*path, "predicate")
    pred = walk.names.use(scope, step.predicate, ppath, guards)
    if pred is not None and pred.vtype.dtype is not None:
        t = pred.vtype
        ok_dtype = t.dtype == "bool" or t.dtype == "int64"
        # a rank-one predicate has the static shape [1] (a contract must say so)
        ok_shape = t.rank == 0 or (
            t.rank == 1 and (t.dims[0] == 1 if t.dims is not None else t.layout is None)
        )
        if not ok_dtype or not ok_shape:
            walk.ctx.add(
                "D35",
                ppath,
                f"predicate {step.predicate!r} is {t.describe()}; a branch needs one bool "
                "or int64 value of shape [] or [1]",
            )
    return pred


def _check_case_keys(walk: Walk, step: BranchStep, pdtype: str | None, path: DocPath) -> None:
    """Every case can match the predicate, and no two match the same value."""
    seen_ints: dict[int, str] = {}
    for key in step.cases:
        is_bool_key = key in ("true", "false")
        if pdtype == "bool" and not is_bool_key or pdtype == "int64" and is_bool_key:
            walk.ctx.add(
                "D35",
                (*path, "cases", key),
                f"case {key!r} can never match the {pdtype} predicate {step.predicate!r}",
            )
        elif not is_bool_key and int(key) in seen_ints:
            walk.ctx.add(
                "D35",
                (*path, "cases", key),
                f"case {key!r} matches the same value as case {seen_ints[int(key)]!r}",
            )
        if not is_bool_key:
            seen_ints.setdefault(int(key), key)


def _walk_arms(walk: Walk, step: BranchStep, pred, scope: Scope, path, guards) -> dict[str, Arm]:
    """Walk each case, then the default, in a child scope; return them by key (``default``
    for the default)."""
    flow = walk.flow
    arms: dict[str, Arm] = {}
    emitting = False
    for arm, apath in child_steps_with_paths(step, path):
        key = apath[-1]  # the case key, or "default"
        child = Scope(scope, f"case {key}")
        g = guards
        if key == "true" and pred is not None and pred.origin == "presence":
            g = guards | {pred.name}
        before_carried = {c: len(p) for c, p in flow.carried.items()}
        before_emits = len(flow.emits)
        walk.step(arm, child, apath, g)
        emitting |= len(flow.emits) > before_emits
        cells = {c for c, p in flow.carried.items() if len(p) > before_carried.get(c, 0)}
        arms[key] = Arm(apath, child, g, cells)
    if emitting:
        flow.features.add("linear_effects")
    return arms


# ------------------------------------------------------------------ phi outputs


def _check_phi_cases(walk: Walk, step: BranchStep, name: str, phi, opath: DocPath) -> None:
    """A phi names a source for exactly the branch's cases, and for its default if any."""
    ctx = walk.ctx
    for key in step.cases:
        if key not in phi.cases:
            ctx.add("D36", (*opath, "cases"), f"phi {name!r} names no source for case {key!r}")
    for key in phi.cases:
        if key not in step.cases:
            ctx.add(
                "D36",
                (*opath, "cases", key),
                f"phi {name!r} names a source for case {key!r}, which the branch does not have",
            )
    if step.default is not None and phi.default is None:
        ctx.add("D36", opath, f"phi {name!r} names no source for the default case")
    if step.default is None and phi.default is not None:
        ctx.add(
            "D36",
            (*opath, "default"),
            f"phi {name!r} names a default source but the branch has no default",
        )


def _check_phi_sources(walk: Walk, name: str, phi, arms: dict, opath, guards) -> Def | None:
    """Each source is visible at the end of its case and all agree in type; return the first."""
    sources = [(k, v, (*opath, "cases", k)) for k, v in phi.cases.items()]
    if phi.default is not None:
        sources.append(("default", phi.default, (*opath, "default")))
    first: Def | None = None
    for key, src, spath in sources:
        arm = arms.get(key)
        if arm is None:
            continue
        d = arm.scope.lookup(src)
        if d is None:
            walk.ctx.add(
                "D36", spath, f"phi {name!r}: {src!r} is not visible at the end of case {key!r}"
            )
            continue
        walk.names.use(arm.scope, src, spath, arm.guards)  # B13 for a phi too
        if first is None:
            first = d
        elif why := mismatch(d.vtype, first.vtype):
            walk.ctx.add(
                "D36",
                spath,
                f"phi {name!r}: sources disagree; {src!r} has {why} (as {first.name!r})",
            )
    return first


def _check_session_cells(walk: Walk, step: BranchStep, arms: dict[str, Arm]) -> None:
    """A case that updates a session cell exports it through a phi named after the cell: the
    session store keeps the value the cell's own name holds at the end."""
    for key, arm in arms.items():
        sources = {
            out: phi.cases.get(key) if key != "default" else phi.default
            for out, phi in step.outputs.items()
        }
        for cell_name in arm.cells:
            cell = walk.wf.state.get(cell_name)
            if cell is None or cell.scope != "session":
                continue
            if sources.get(cell_name) == cell_name:
                continue
            others = [out for out, src in sources.items() if src == cell_name]
            walk.ctx.add(
                "D37",
                arm.path,
                f"case {key!r} updates session cell {cell_name!r} but "
                + (
                    f"exports it only as {others[0]!r}, so the cell's final value is lost"
                    if others
                    else "no phi output exports it"
                ),
                f"Add a phi output named {cell_name!r} whose case {key!r} source is {cell_name!r}.",
            )
