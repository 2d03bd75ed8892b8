"""Emits and the outputs they build (FORMAT.md section 6, RUNTIME_NOTES.md section 4.6).

An output is *per-row* when any emit into it has ``when`` or ``valid_length``; every emit into
it then publishes row by row along the output's request axis: a row whose ``when`` is false
publishes nothing (its slot stays ``None``, never padded); otherwise the row is cut to its first
``valid_length`` entries along ``axis`` and replaces, appends to, or is added as an event of
that row's stream. A dense output publishes the whole value.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import faults
from ..errors import RunError
from ..package.model import EmitStep, RequestExpandedLayout, WorkflowOutput
from .tensors import Symbols, check, dtype_name


class OutputStore:
    def __init__(self, outputs: dict[str, WorkflowOutput], per_row: set[str], batch: int | None):
        self.declared = outputs
        self.per_row = per_row
        self.batch = batch
        self.dense: dict[str, np.ndarray] = {}
        self.events: dict[str, list[np.ndarray]] = {}
        self.rows: dict[str, list[np.ndarray | None]] = {}
        self.row_events: dict[str, list[list[np.ndarray]]] = {}

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
            check(step.value, value, output.contract, symbols, where, free_axes=(axis,))
            previous = self.dense.get(name)
            self.dense[name] = value if previous is None else _concat(previous, value, axis, where)
            return
        check(step.value, value, output.contract, symbols, where)
        if step.mode == "event":
            self.events.setdefault(name, []).append(value)
        self.dense[name] = value

    def _emit_rows(
        self, step, output, value, when, valid_length, symbols, where, active_rows
    ) -> None:
        name = step.output
        axis_r = output.contract.request_axis or 0
        if value.ndim == 0:
            raise RunError("D85", f"{where}: a per-row emit needs a value of rank >= 1")
        rows = int(value.shape[axis_r])
        guard = _row_control(when, rows, "when", where)
        inactive = _inactive_rows(active_rows, rows, output.contract)
        lengths = _row_control(valid_length, rows, "valid_length", where)
        if self.batch is None:
            self.batch = rows
        streams = self.rows.setdefault(name, [None] * max(rows, self.batch))
        if len(streams) < rows:
            streams.extend([None] * (rows - len(streams)))
        chunk_axis = (
            self._axis(step, value, where)
            if (lengths is not None or step.mode == "append")
            else None
        )
        # One check of the whole value stands for every row's chunk: a row's chunk shares its
        # dtype, rank and every axis but the request axis (one row each) and the chunk axis.
        request_dim = output.contract.shape[axis_r] if output.contract.shape else None
        if isinstance(request_dim, int) and request_dim != 1:
            raise RunError(
                "D85",
                f"{where}: per-row output {name!r} fixes its request axis to {request_dim}; "
                "each row publishes one",
            )
        free = (axis_r,) if chunk_axis is None else (axis_r, chunk_axis)
        check(step.value, value, output.contract, symbols.copy(), where, free_axes=free)
        for r in range(rows):
            if guard is not None and not bool(guard[r]) or inactive is not None and inactive[r]:
                continue
            chunk = np.take(value, [r], axis=axis_r)
            if lengths is not None:
                n = int(lengths[r])
                extent = chunk.shape[chunk_axis]
                if n < 0 or n > extent:
                    raise RunError(
                        "D85",
                        f"{where}: valid_length {n} of row {r} is outside [0, {extent}] "
                        f"(axis {chunk_axis} of {step.value!r})",
                    )
                chunk = np.take(chunk, np.arange(n), axis=chunk_axis)
            if faults.active("emit_off_by_one"):
                cut = chunk_axis if chunk_axis is not None else chunk.ndim - 1
                chunk = np.take(chunk, np.arange(max(0, chunk.shape[cut] - 1)), axis=cut)
            if step.mode == "append":
                previous = streams[r]
                streams[r] = (
                    chunk if previous is None else _concat(previous, chunk, chunk_axis, where)
                )
            else:
                if step.mode == "event":
                    events = self.row_events.setdefault(name, [[] for _ in streams])
                    while len(events) < len(streams):
                        events.append([])
                    events[r].append(chunk)
                streams[r] = chunk

    # ------------------------------------------------------------------ results

    def finish(self, symbols: Symbols) -> dict:
        """Validate dense outputs against their full contracts; return name -> value / rows."""
        out: dict = {}
        for name, output in self.declared.items():
            if name in self.per_row:
                # A per-row output always lists every row; a row that published nothing is None.
                streams = list(self.rows.get(name, []))
                if self.batch is not None and len(streams) < self.batch:
                    streams += [None] * (self.batch - len(streams))
                if streams:
                    out[name] = streams
                continue
            if name in self.dense:
                check(name, self.dense[name], output.contract, symbols, f"output {name!r}")
                out[name] = self.dense[name]
        return out


def _inactive_rows(masks, rows: int, contract) -> np.ndarray | None:
    """Rows an enclosing loop marks inactive this iteration (an inactive row appends nothing,
    FORMAT.md section 6); a mask whose length does not match the rows is not row-aligned."""
    layout = contract.batch_layout
    factor = layout.factor if isinstance(layout, RequestExpandedLayout) else 1
    inactive = None
    for mask in masks:
        if mask.size * factor != rows or mask.all():
            continue
        off = ~np.repeat(mask, factor)
        inactive = off if inactive is None else inactive | off
    return inactive


def _row_control(value, rows: int, what: str, where: str):
    if value is None:
        return None
    flat = np.asarray(value).reshape(-1)
    if flat.size == 1:
        return np.repeat(flat, rows)
    if flat.size != rows:
        raise RunError(
            "D85",
            f"{where}: {what} holds {flat.size} values for {rows} rows (give 1 or one per row)",
        )
    return flat


def _concat(previous: np.ndarray, chunk: np.ndarray, axis: int, where: str) -> np.ndarray:
    if previous.dtype != chunk.dtype or previous.ndim != chunk.ndim:
        raise RunError(
            "D85",
            f"{where}: cannot append {dtype_name(chunk)} rank {chunk.ndim} to "
            f"{dtype_name(previous)} rank {previous.ndim}",
        )
    for i, (a, b) in enumerate(zip(previous.shape, chunk.shape, strict=True)):
        if i != axis and a != b:
            raise RunError(
                "D85",
                f"{where}: appended chunk has shape {list(chunk.shape)}, which differs from "
                f"{list(previous.shape)} outside axis {axis}",
            )
    return np.concatenate([previous, chunk], axis=axis)
