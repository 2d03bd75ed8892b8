"""Emits and the outputs they build (docs/runtime.md, "Per-row outputs").

An output is *per-row* when any emit into it has ``when`` or ``valid_length``; every emit into
it then publishes row by row along the output's request axis: a row whose ``when`` is false
publishes nothing (its slot stays ``None``, never padded); otherwise the row is cut to its first
``valid_length`` entries along ``axis`` and replaces, appends to, or is added as an event of
that row's stream. A dense output publishes the whole value.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..arrays import dtype_name
from ..errors import RunError
from ..package.model import EmitStep, WorkflowOutput
from .tensors import Symbols, check


class OutputStore:
    def __init__(self, outputs: dict[str, WorkflowOutput], per_row: set[str], batch: int | None):
        self.declared = outputs
        self.per_row = per_row
        self.batch = batch
        self.dense: dict[str, np.ndarray] = {}
        # every emission of an event output, in order: an array, or for a per-row output a
        # list with one entry per row (None for a row that published nothing that time)
        self.events: dict[str, list] = {}
        self.rows: dict[str, list] = {}  # per row: None, a chunk, or an _Appended stream
        self.checked: dict[int, tuple] = {}  # id(emit step) -> the last signature that passed
        self.layouts: dict[tuple, tuple] = {}  # (id(emit step), rank) -> its row layout

    def check(self, step, value, contract, symbols: Symbols, where, free=(), bind=True) -> None:
        """Check an emitted value against the output's contract (binding package symbols
        unless ``bind`` is off). The result depends only on the value's dtype and shape and on
        the package scope, which only grows, so a value whose signature matches the last one
        that passed (in a scope of the same size) passes again and is not re-checked."""
        key = (value.dtype, value.shape, len(symbols.bound))
        if self.checked.get(id(step)) == key:
            return
        check(
            step.value, value, contract, symbols if bind else symbols.copy(), where, free_axes=free
        )
        self.checked[id(step)] = (value.dtype, value.shape, len(symbols.bound))

    # ------------------------------------------------------------------ emitting

    def emit(
        self,
        step: EmitStep,
        value: np.ndarray,
        when: np.ndarray | None,
        valid_length: np.ndarray | None,
        symbols: Symbols,
        where: str,
        active_rows: Sequence[np.ndarray] = (),
    ) -> None:
        """``active_rows``: the active-row masks of the enclosing loops' current iterations;
        a per-row emit publishes nothing for a row one of them marks inactive."""
        output = self.declared[step.output]
        if step.output in self.per_row:
            self._emit_rows(step, output, value, when, valid_length, symbols, where, active_rows)
        else:
            self._emit_dense(step, output, value, symbols, where)

    def _axis(self, step: EmitStep, value: np.ndarray, where: str) -> int:
        axis = step.axis if step.axis is not None else value.ndim - 1
        if value.ndim == 0 or axis >= value.ndim:
            raise RunError(
                "D85",
                f"{where}: emit axis {axis} is outside value {step.value!r} of rank {value.ndim}",
            )
        return axis

    def _emit_dense(self, step, output, value, symbols, where) -> None:
        name = step.output
        if step.mode == "append":
            axis = self._axis(step, value, where)
            self.check(step, value, output.contract, symbols, where, (axis,))
            previous = self.dense.get(name)
            self.dense[name] = value if previous is None else _concat(previous, value, axis, where)
            return
        self.check(step, value, output.contract, symbols, where)
        if step.mode == "event":
            self.events.setdefault(name, []).append(value)
        self.dense[name] = value

    def _emit_rows(
        self, step, output, value, when, valid_length, symbols, where, active_rows
    ) -> None:
        name = step.output
        layout = self.layouts.get((id(step), value.ndim))
        if layout is None:
            layout = self.layouts[(id(step), value.ndim)] = self._row_layout(
                step, output, value, where
            )
        axis_r, chunk_axis, free, before_row, before_chunk = layout
        rows = value.shape[axis_r]
        guard = _row_control(when, rows, "when", where)
        inactive = _inactive_rows(active_rows, rows, where) if active_rows else None
        lengths = _row_control(valid_length, rows, "valid_length", where)
        if self.batch is None:
            self.batch = rows
        if rows != self.batch:
            raise RunError(
                "H84",
                f"{where}: value {step.value!r} has {rows} rows on axis {axis_r}, but the request "
                f"has {self.batch}: a per-row output "
                "publishes one entry per request row",
                hint="Emit a value with one row per request row.",
            )
        streams = self.rows.get(name)
        if streams is None:
            streams = self.rows[name] = [None] * rows
        # One check of the whole value stands for every row's chunk: a row's chunk shares its
        # dtype, rank and every axis but the request axis (one row each) and the chunk axis.
        self.check(step, value, output.contract, symbols, where, free, bind=False)
        emission = None
        if step.mode == "event":  # one emission: an entry per row, None where it publishes none
            emission = [None] * rows
            self.events.setdefault(name, []).append(emission)
        for r in range(rows):
            if guard is not None and not guard[r] or inactive is not None and inactive[r]:
                continue  # a row that publishes nothing this time
            chunk = value[(*before_row, slice(r, r + 1))]
            if lengths is not None:
                n = lengths[r]
                extent = chunk.shape[chunk_axis]
                if n < 0 or n > extent:
                    raise RunError(
                        "D85",
                        f"{where}: valid_length {n} of row {r} is outside [0, {extent}] "
                        f"(axis {chunk_axis} of {step.value!r})",
                    )
                if n != extent:
                    chunk = chunk[(*before_chunk, slice(0, n))]
            if step.mode == "append":
                streams[r] = _append(streams[r], chunk, chunk_axis, where)
                continue
            chunk = chunk.copy()  # a published row owns its data
            if emission is not None:
                emission[r] = chunk
            streams[r] = chunk

    def _row_layout(self, step, output, value, where) -> tuple:
        """Where a per-row emit cuts its value (fixed by the step and the value's rank): the
        request axis, the chunk axis (None when the row is published whole), the axes a
        whole-value check leaves free, and the index prefixes that reach those axes."""
        name = step.output
        axis_r = output.contract.request_axis or 0
        if value.ndim == 0:
            raise RunError("D85", f"{where}: a per-row emit needs a value of rank >= 1")
        chunk_axis = (
            self._axis(step, value, where) if (step.valid_length or step.mode == "append") else None
        )
        request_dim = output.contract.shape[axis_r] if output.contract.shape else None
        if isinstance(request_dim, int) and request_dim != 1:
            raise RunError(
                "D85",
                f"{where}: per-row output {name!r} fixes its request axis to {request_dim}; "
                "each row publishes one",
            )
        free = (axis_r,) if chunk_axis is None else (axis_r, chunk_axis)
        before_row = (slice(None),) * axis_r
        before_chunk = (slice(None),) * chunk_axis if chunk_axis is not None else ()
        return axis_r, chunk_axis, free, before_row, before_chunk

    # ------------------------------------------------------------------ results

    def finish(self, symbols: Symbols) -> dict:
        """Validate dense outputs against their full contracts; return name -> value / rows."""
        out: dict = {}
        for name, output in self.declared.items():
            if name in self.per_row:
                # A per-row output always lists every row; a row that published nothing is None.
                streams = [_published(s) for s in self.rows.get(name, [])]
                # Each row's stream, whole, against the contract's fixed extents: an append
                # grows it along an axis no emission checks. Its request axis holds the row's
                # own rows, and its symbols bind for that row alone (rows cut by valid_length
                # differ in length; every other axis was checked against the scope as emitted).
                axis = output.contract.request_axis
                for r, stream in enumerate(streams):
                    if stream is not None:
                        check(name, stream, output.contract, Symbols(symbols.dynamic),
                              f"output {name!r}, row {r}", free_axes=(axis,))  # fmt: skip
                if self.batch is not None and len(streams) < self.batch:
                    streams += [None] * (self.batch - len(streams))
                if streams:
                    out[name] = streams
                continue
            if name in self.dense:
                check(name, self.dense[name], output.contract, symbols, f"output {name!r}")
                out[name] = self.dense[name]
        return out


def _inactive_rows(masks, rows: int, where: str) -> np.ndarray | None:
    """Rows an enclosing loop marks inactive this iteration (an inactive row appends nothing,
    docs/runtime.md). A loop's mask is here only while some of its rows are inactive; one that
    has not one flag per row cannot say which rows those are (D85). (A per-row output is
    request_aligned, D41: one row per request row.)"""
    inactive = None
    for mask in masks:
        if mask.size != rows:
            raise RunError(
                "D85",
                f"{where}: an enclosing loop's continue_when holds {mask.size} flags, some "
                f"false, for {rows} rows: a per-row emit cannot tell which rows are inactive",
                hint="Give the loop a predicate with one flag per request row (or one flag).",
            )
        inactive = ~mask if inactive is None else inactive | ~mask
    return inactive


def _row_control(value, rows: int, what: str, where: str) -> list | None:
    """A ``when`` / ``valid_length`` value as one Python value per row."""
    if value is None:
        return None
    flat = value.reshape(-1).tolist()
    if len(flat) == 1:
        return flat * rows
    if len(flat) != rows:
        raise RunError(
            "D85",
            f"{where}: {what} holds {len(flat)} values for {rows} rows (give 1 or one per row)",
        )
    return flat


class _Appended:
    """A row's stream grown by appends along one axis: its chunks (each its own copy), joined
    once when the output is finished, so a long generation appends in linear time."""

    __slots__ = ("pieces", "axis", "dtype", "shape")

    def __init__(self, first: np.ndarray, axis: int):
        self.pieces, self.axis, self.dtype, self.shape = [first], axis, first.dtype, first.shape

    def add(self, chunk: np.ndarray, where: str) -> None:
        s, c, a = self.shape, chunk.shape, self.axis
        if (
            chunk.dtype != self.dtype
            or len(c) != len(s)
            or c[:a] != s[:a]
            or c[a + 1 :] != s[a + 1 :]
        ):
            _concat(self.value(), chunk, a, where)  # reports what does not fit
        self.pieces.append(chunk.copy())
        self.shape = (*s[:a], s[a] + c[a], *s[a + 1 :])

    def value(self) -> np.ndarray:
        if len(self.pieces) > 1:
            self.pieces = [np.concatenate(self.pieces, axis=self.axis)]
        return self.pieces[0]


def _append(previous, chunk: np.ndarray, axis: int, where: str) -> _Appended:
    """``chunk`` appended along ``axis`` to a row's stream (None, a published chunk, or a
    stream of appends)."""
    if previous is None:
        return _Appended(chunk.copy(), axis)
    if previous.__class__ is _Appended:
        if previous.axis == axis:
            previous.add(chunk, where)
            return previous
        previous = previous.value()
    return _Appended(_concat(previous, chunk, axis, where), axis)


def _published(stream):
    return stream.value() if stream.__class__ is _Appended else stream


def _concat(previous: np.ndarray, chunk: np.ndarray, axis: int, where: str) -> np.ndarray:
    p, c = previous.shape, chunk.shape
    if previous.dtype != chunk.dtype or len(p) != len(c):
        raise RunError(
            "D85",
            f"{where}: cannot append {dtype_name(chunk)} rank {chunk.ndim} to "
            f"{dtype_name(previous)} rank {previous.ndim}",
        )
    if p[:axis] != c[:axis] or p[axis + 1 :] != c[axis + 1 :]:
        raise RunError(
            "D85",
            f"{where}: appended chunk has shape {list(c)}, which differs from {list(p)} outside "
            f"axis {axis}",
        )
    return np.concatenate((previous, chunk), axis=axis)
