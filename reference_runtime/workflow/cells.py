"""Carried state cells (docs/runtime.md, "What the interpreter checks while running"): the
bounds a recurrence reads at loop entry, the check of every next value against the cell's
recurrence, and the merge that keeps inactive rows' previous values."""

from __future__ import annotations

import numpy as np

from ..arrays import dtype_name, to_host
from ..errors import RunError
from ..package.model import GrowingRecurrence, InvariantRecurrence, RequestExpandedLayout


def recurrence_bounds(cell, read, where: str, counters) -> tuple:
    """A growing/bounded cell's ``increment`` (a bounded cell has none) and ``max``, read once
    at loop entry (``read(name, what)`` returns a value): ``(increment, max, the largest max, the
    one increment or None)``.
    """
    rec = cell.recurrence
    out = []
    for key in ("increment", "max"):
        name = getattr(rec, key, None)
        if name is None:
            out.append(None)
            continue
        value = to_host(read(name, f"{where}: recurrence {key}"), counters)
        if value.dtype.kind not in "iu" or value.ndim > 1 or value.size == 0:
            raise RunError("E57", f"{where}: recurrence {key} {name!r} must be integer [] or [B]")
        out.append(value.reshape(-1).astype(np.int64))
    increment, maximum = out
    largest = int(maximum.max())
    # One increment for every row and one max: growth is checked exactly.
    uniform = increment is not None and increment.size == 1 and maximum.size == 1
    step = int(increment[0]) if uniform else None
    return increment, maximum, largest, step


class _Described:
    """``{where}: carried cell {name!r}``, formatted only if an error message uses it."""

    __slots__ = ("where", "name")

    def __init__(self, where: str, name: str):
        self.where, self.name = where, name

    def __str__(self) -> str:
        return f"{self.where}: carried cell {self.name!r}"


def check_recurrence(name, cell, old, new, bounds, grouped: bool, where: str) -> None:
    """The next value ``new`` of cell ``name`` against its recurrence (old value ``old``)."""
    rec = cell.recurrence
    what = _Described(where, name)
    if new.dtype != old.dtype or new.ndim != old.ndim:
        raise RunError(
            "E57",
            f"{what} changed from {dtype_name(old)} rank {old.ndim} to {dtype_name(new)} "
            f"rank {new.ndim}",
        )
    if isinstance(rec, InvariantRecurrence):
        if new.shape != old.shape:
            raise RunError(
                "E57",
                f"{what} is invariant but changed shape {list(old.shape)} -> {list(new.shape)}",
            )
        return
    axis = rec.axis
    o, n = old.shape, new.shape
    if o[:axis] != n[:axis] or o[axis + 1 :] != n[axis + 1 :]:
        changed = next(i for i, (a, b) in enumerate(zip(o, n, strict=True)) if a != b and i != axis)
        raise RunError(
            "E57",
            f"{what} may change only along axis {axis}, but axis {changed} changed "
            f"{o[changed]} -> {n[changed]}",
        )
    increment, maximum, largest, step = bounds
    grown = n[axis] - o[axis]
    if isinstance(rec, GrowingRecurrence):
        if step is not None:
            if grown != step:
                raise RunError("E57", f"{what} grew by {grown} along axis {axis}, expected {step}")
            if n[axis] > largest:
                raise RunError(
                    "E57", f"{what} reached {n[axis]} along axis {axis}, above max {largest}"
                )
            return
        if not grouped:
            raise RunError("E57", f"{what}: per-row growth is allowed only for service-group cells")
        if (increment > maximum).any():
            raise RunError("E57", f"{what}: a row's increment exceeds its max")
        if new.shape[axis] > largest:
            raise RunError("E57", f"{what} reached {new.shape[axis]}, above the largest max")
        return
    # bounded
    limit = largest
    if old.shape[axis] > limit or new.shape[axis] > limit:
        raise RunError(
            "E57",
            f"{what} is bounded by {limit} along axis {axis} but holds {new.shape[axis]}",
            hint="Stop the loop before the bound (e.g. in the termination policy).",
        )


def merge_inactive(name, cell, old, new, mask, where) -> np.ndarray:
    """Inactive rows keep their previous values (a grown suffix keeps the producer's values)."""
    contract = cell.contract
    axis = contract.request_axis
    if axis is None:
        raise RunError(
            "E57",
            f"{where}: carried cell {name!r} cannot preserve inactive rows: mixed active rows "
            "need a request-aligned cell",
        )
    factor = (
        contract.batch_layout.factor
        if isinstance(contract.batch_layout, RequestExpandedLayout)
        else 1
    )
    if mask.size * factor != old.shape[axis] or new.shape[axis] != old.shape[axis]:
        raise RunError(
            "E57",
            f"{where}: carried cell {name!r} has {old.shape[axis]} rows on its request axis "
            f"but the active mask covers {mask.size} x {factor}",
        )
    result = new.copy()
    region = tuple(slice(0, s) for s in old.shape)
    for r in np.flatnonzero(~mask):
        index = list(region)
        index[axis] = slice(r * factor, (r + 1) * factor)
        result[tuple(index)] = old[tuple(index)]
    return result


def next_value(carry, cell, grouped: bool, values: dict, merge, bounds, where: str) -> None:
    """Store carried cell ``carry.cell``'s next value after the body: its ``next`` value (the
    body defines it, or it is one from before the body: D29), checked against the recurrence;
    where some rows are inactive (``merge``: the active-row mask), those rows keep their
    previous values."""
    name = carry.cell
    old = values[name]
    new = values[carry.next]
    check_recurrence(name, cell, old, new, bounds.get(name), grouped, where)
    if merge is None or grouped:
        values[name] = new
    else:
        values[name] = merge_inactive(name, cell, old, new, merge, where)
