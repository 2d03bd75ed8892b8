"""Serving requests in a continuous batch: the loop a ``onnx-genai.continuous-batch@1``
component batches, run over the rows of several requests (docs/runtime.md, "Serving requests in
a continuous batch").

A request is *admitted* into a free slot (the lowest free one) once it has arrived, a slot is
free and, under a KV budget, its KV fits beside the admitted requests'. Admission runs, for that
request alone, what precedes the batched loop and the loop's ``setup`` (its prefill), reads its
``max_iterations`` and binds its carried cells: exactly what its solo run does. Each request
keeps its own frame (its inputs, its cells, its outputs); nothing of one request is stored in
another's.

Then, step after step, the loop body runs **once over the rows of every admitted request**, in
slot order (row-major: row ``i`` of every value is the ``i``-th occupied slot): each carried
cell is the rows of the requests stacked along its request axis, a cell that grows is padded on
the left of its growing axis with zeros to the longest row (rule E122: such a cell is the past
KV or attention mask of the decode contract, which masks what is padded), and each value the
body reads from before the loop is stacked the same way where its contract has a request axis.
A value without a request axis that the body reads only through a runtime-contract port taking
one value or one per row (``SHARED_OR_PER_ROW_PORTS``: the token policy's ``max_new_tokens``)
is given one per row. Requests that disagree on any other value without a request axis, on
``stop_on_eos`` or on their adapters cannot share one body: the body runs once per such group
in the step, each in slot order. After the body, each request takes
back its own rows of the cells' next values (the padding cut off), checked against the cell's
recurrence with its own bounds, and what the body emitted for its rows. A request whose loop
ends (its predicate row is false, or it ran ``max_iterations`` bodies) leaves its slot: the
steps after the loop run for it alone, and its result is yielded. Its slot is free for the next
waiting request in the following step.

The batch component, invoked in every body, publishes the batch's one liveness bit (will the
batch decode again: a row continues, or a request waits) and each row's ``accepted_len``; it
learns how many requests wait through the running context.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from ..arrays import to_host
from ..counters import Counters
from ..errors import RunError, format_location
from ..package.model import (
    BranchStep,
    EmitStep,
    GrowingRecurrence,
    InvokeStep,
    LoopStep,
    RequestExpandedLayout,
    Workflow,
)
from ..package.rules.batching import STEPS, BatchedLoop
from ..package.runtime_contracts import BATCH_WAITING, SHARED_OR_PER_ROW_PORTS
from ..package.visit import all_steps
from . import cells
from .interpreter import Frame, Interpreter, LoopReport
from .outputs import OutputStore
from .tensors import Symbols


@dataclass
class Pending:
    """A request waiting for a slot: what the engine bound for it."""

    index: int  # its position among the submitted requests
    arrival: int  # the first step at which it may be admitted
    values: dict
    symbols: Symbols
    stop_on_eos: bool
    adapters: object  # its adapter selection (None without adapters)
    kv_bytes: int  # what KV admission counts for it (0 without a budget)


@dataclass
class Occupant:
    """A request in a slot."""

    request: Pending
    slot: int
    admitted: int  # the step at which it was admitted
    frame: Frame
    limit: int
    bounds: dict
    context: object  # its RunContext
    iterations: int = 0
    signature: tuple = ()


@dataclass(frozen=True)
class Finished:
    """A request whose loop has ended, with its frame (the steps after the loop have run)."""

    request: Pending
    slot: int
    admitted: int
    finished: int  # the step after which it left its slot
    frame: Frame


@dataclass
class StepRecord:
    """What one batch step did: which request each slot held (``None``: empty), each slot's
    ``accepted_len`` (0 for a slot that sat the step out) and the batch's liveness bit."""

    step: int
    slots: list
    accepted_len: list
    live: bool
    bodies: int = 0  # how many body runs the step took (one per group of requests)

    def to_json(self) -> dict:
        """The record as plain JSON values (``serve --trace``, the ``batch_trace`` feature)."""
        return {
            "step": self.step,
            "slots": list(self.slots),
            "accepted_len": list(self.accepted_len),
            "live": self.live,
            "bodies": self.bodies,
        }


def _reads(steps) -> set[str]:
    """Every value name the steps read (nested steps included)."""
    out: set[str] = set()
    for step in all_steps(steps):
        if isinstance(step, InvokeStep):
            out.update(step.inputs.values())
        elif isinstance(step, EmitStep):
            out.update(n for n in (step.value, step.when, step.valid_length) if n)
        elif isinstance(step, LoopStep):
            out.update((step.max_iterations, step.continue_when))
            out.update(c.initial for c in step.carried if c.initial)
        elif isinstance(step, BranchStep):
            out.add(step.predicate)
            for phi in step.outputs.values():
                out.update(phi.cases.values())
                if phi.default:
                    out.add(phi.default)
    return out


def _factor(contract) -> int:
    layout = contract.batch_layout
    return layout.factor if isinstance(layout, RequestExpandedLayout) else 1


class SlotOutputs:
    """The output store of a batched body: what the body emits for row ``r`` goes to the store
    of the request in that row, as if its solo run had emitted it."""

    def __init__(self, declared: Mapping, occupants: list[Occupant]):
        self.declared = declared
        self.occupants = occupants

    def emit(self, step, value, when, valid_length, symbols, where, active_rows=()) -> None:
        output = self.declared[step.output]
        axis = output.contract.request_axis
        factor = _factor(output.contract)
        n = len(self.occupants)
        if axis is None:
            raise RunError(
                "D85",
                f"{where}: value {step.value!r} has no request axis (output {step.output!r} "
                f"is shared), so no request served in the batch can take a row of its own",
            )
        if value.ndim <= axis or value.shape[axis] != n * factor:
            raise RunError(
                "D85",
                f"{where}: value {step.value!r} has {value.shape[axis] if value.ndim > axis else 0}"
                f" rows on the request axis of output {step.output!r}, but the {n} request(s) "
                f"sharing this body need {n * factor}: no row can be cut for each",
            )
        for r, occupant in enumerate(self.occupants):
            index = [slice(None)] * value.ndim
            index[axis] = slice(r * factor, (r + 1) * factor)
            row_when = _row(when, r, n)
            row_length = _row(valid_length, r, n)
            masks = [m[r : r + 1] if m.size == n else m for m in active_rows]
            frame = occupant.frame
            frame.outputs.emit(
                step, value[tuple(index)], row_when, row_length, frame.symbols, where, masks
            )


def _row(control, r: int, rows: int):
    if control is None or control.size != rows or rows == 1:
        return control
    return control.reshape(-1)[r : r + 1]


class BatchServer:
    """Runs one workflow's batched loop over the requests given to :meth:`serve`."""

    def __init__(
        self,
        workflow: Workflow,
        interpreter: Interpreter,
        found: BatchedLoop,
        counters: Counters,
        per_row_outputs: set[str],
    ):
        self.wf = workflow
        self.interp = interpreter  # the plain interpreter (its methods, step by step)
        self.found = found
        self.loop = found.loop
        self.counters = counters
        self.per_row_outputs = per_row_outputs
        self.before = workflow.steps[: found.index]
        self.after = workflow.steps[found.index + 1 :]
        self.where = format_location((*STEPS, found.index))
        carried = {c.cell for c in self.loop.carried}
        # what the body reads from before the loop, the carried cells' next values included
        # (one may name a value from before the body); carried cells are stacked separately
        nexts = {c.next for c in self.loop.carried}
        self.invariants = sorted((_reads(self.loop.steps) | nexts) - carried)
        self.contracts = self._value_contracts()
        self.per_row = self._shared_or_per_row()

    def _shared_or_per_row(self) -> frozenset[str]:
        """The values without a request axis that the body reads only through runtime-contract
        ports taking one value or one per row (``SHARED_OR_PER_ROW_PORTS``): requests that
        disagree on them still share a body, each row given its own."""
        readers: dict[str, list] = {}
        for step in all_steps(self.loop.steps):
            if isinstance(step, InvokeStep):
                comp = self.wf.components[step.component]
                ports = SHARED_OR_PER_ROW_PORTS.get(comp.contract.id if comp.contract else "")
                for port, name in step.inputs.items():
                    readers.setdefault(name, []).append(bool(ports and port in ports))
        other = _reads(self.loop.steps) - {
            name
            for step in all_steps(self.loop.steps)
            if isinstance(step, InvokeStep)
            for name in step.inputs.values()
        }
        return frozenset(
            name
            for name, flags in readers.items()
            if all(flags) and name not in other and name in self.invariants
        )

    def _value_contracts(self) -> dict:
        """The declared contract of each value defined before the loop's body (a workflow
        input, or an output port of a component invoked before it)."""
        out = {name: inp.contract for name, inp in self.wf.inputs.items()}
        for step in all_steps((*self.before, *self.loop.setup)):
            if isinstance(step, InvokeStep):
                comp = self.wf.components[step.component]
                for port, name in step.outputs.items():
                    contract = comp.ports.outputs.get(port)
                    if contract is not None:
                        out[name] = contract
        return out

    # ------------------------------------------------------------------ serving

    def serve(
        self,
        queue: list[Pending],
        slots: int,
        make_context: Callable[[Pending], object],
        running: Callable,
        kv_budget: int | None,
        trace: list | None = None,
    ) -> Iterator[Finished]:
        """Serve ``queue`` (in arrival order, then submission order) over ``slots`` slots;
        yield each request as it finishes."""
        queue = sorted(queue, key=lambda p: (p.arrival, p.index))
        table: list[Occupant | None] = [None] * slots
        used = [False] * slots  # whether a request has ever held the slot
        step = 0
        done: list[Occupant] = []  # admitted this step, and already over
        while queue or any(table):
            finished_now: list[Finished] = []
            # Admit arrived requests into free slots, lowest slot first, in queue order; under
            # a budget the head of the queue waits until its KV fits (no overtaking).
            while queue and queue[0].arrival <= step and None in table:
                held = sum(o.request.kv_bytes for o in table if o is not None)
                if kv_budget is not None and held + queue[0].kv_bytes > kv_budget:
                    break
                pending = queue.pop(0)
                slot = table.index(None)
                if used[slot]:
                    self.counters.add("batching", "slots_reused")
                used[slot] = True
                self.counters.add("batching", "admitted")
                occupant = table[slot] = self._admit(pending, slot, step, make_context, running)
                if self._ended(occupant, running):
                    done.append(occupant)
            # A request that ends at its admission (it may run no body) leaves its slot, which
            # is free from the next step, as any other's.
            for occupant in done:
                table[occupant.slot] = None
                finished_now.append(self._finish(occupant, step, running))
            done.clear()
            occupied = [o for o in table if o is not None]
            if not occupied:
                yield from finished_now
                if queue:  # nothing runs: the clock moves on to the next arrival
                    step = max(step, queue[0].arrival)
                continue
            record = StepRecord(step, [None] * slots, [0] * slots, False)
            for group in self._groups(occupied):
                self._body(group, len(queue), record, running)
            self.counters.add("batching", "steps")
            for occupant in occupied:
                record.slots[occupant.slot] = occupant.request.index
                occupant.iterations += 1
                if self._ended(occupant, running):
                    table[occupant.slot] = None
                    finished_now.append(self._finish(occupant, step, running))
            if trace is not None:
                trace.append(record)
            yield from finished_now
            step += 1

    # ------------------------------------------------------------------ one request

    def _admit(self, pending: Pending, slot: int, step: int, make_context, running) -> Occupant:
        """What the request's solo run does before its first body: the steps before the loop,
        the loop's setup, its bound and its cells' start values."""
        frame = Frame(
            values=dict(pending.values),
            symbols=pending.symbols,
            outputs=OutputStore(dict(self.wf.outputs), self.per_row_outputs, 1),
            stored_session={},
            stop_on_eos=pending.stop_on_eos,
        )
        context = make_context(pending)
        with running(context):
            self.interp.steps(self.before, frame)
            self.interp.steps(self.loop.setup, frame)
            limit = self.interp.iteration_limit(self.loop, frame, self.where)
            bounds = self.interp.enter_cells(self.loop, frame, self.where)
        occupant = Occupant(pending, slot, step, frame, limit, bounds, context)
        occupant.signature = self._signature(occupant)
        return occupant

    def _ended(self, occupant: Occupant, running) -> bool:
        """Whether the request's loop is over: it ran ``max_iterations`` bodies, or its
        predicate row is false (read as its solo run reads it)."""
        if occupant.iterations >= occupant.limit:
            return True
        with running(occupant.context):
            mask = self.interp.predicate(self.loop, occupant.frame, self.where, occupant.iterations)
        return mask is not None and not bool(mask.any())

    def _finish(self, occupant: Occupant, step: int, running) -> Finished:
        frame = occupant.frame
        frame.loop_reports[id(self.loop)] = LoopReport(
            np.full(1, occupant.iterations, dtype=np.int64), occupant.limit
        )
        with running(occupant.context):
            self.interp.steps(self.after, frame)
        return Finished(occupant.request, occupant.slot, occupant.admitted, step, frame)

    def _signature(self, occupant: Occupant) -> tuple:
        """What requests sharing one body must agree on: every value the body reads that has
        no request axis (its bytes), the shapes of the rest outside their request (and
        growing) axes, ``stop_on_eos`` and the adapter selection."""
        values = occupant.frame.values
        parts: list = [occupant.request.stop_on_eos, repr(occupant.context.adapters)]
        for name in self.invariants:
            value = values.get(name)
            if value is None:
                parts.append((name, None))
                continue
            contract = self.contracts.get(name)
            axis = contract.request_axis if contract is not None else None
            if name in self.per_row and value.shape == (1,):
                parts.append((name, value.dtype.str, "one per row"))
            elif axis is None:
                host = to_host(value, self.counters)
                parts.append((name, value.dtype.str, value.shape, host.tobytes()))
            else:
                shape = list(value.shape)
                shape[axis] = -1
                parts.append((name, value.dtype.str, tuple(shape)))
        for carry in self.loop.carried:
            cell = self.wf.state[carry.cell]
            value = values[carry.cell]
            shape = list(value.shape)
            shape[cell.contract.request_axis] = -1
            if isinstance(cell.recurrence, GrowingRecurrence):
                shape[cell.recurrence.axis] = -1
            parts.append((carry.cell, value.dtype.str, tuple(shape)))
        return tuple(parts)

    def _groups(self, occupied: list[Occupant]) -> list[list[Occupant]]:
        """The occupants that can share one body, each group in slot order (groups ordered by
        their first slot). A loop whose iteration value has no request axis gives the body one
        iteration number: only requests at the same iteration share it."""
        iteration = self.loop.iteration
        shared = iteration is not None and iteration.contract.request_axis is None
        groups: dict[tuple, list[Occupant]] = {}
        for occupant in occupied:
            key = (occupant.signature, occupant.iterations if shared else None)
            groups.setdefault(key, []).append(occupant)
        return list(groups.values())

    # ------------------------------------------------------------------ one body

    def _body(self, group: list[Occupant], waiting: int, record: StepRecord, running) -> None:
        """Run the loop body once over the group's rows, then give each request its rows."""
        values: dict = {}
        first = group[0].frame.values
        for name in self.invariants:
            if name not in first:
                continue
            contract = self.contracts.get(name)
            axis = contract.request_axis if contract is not None else None
            rows = [o.frame.values[name] for o in group]
            if name in self.per_row and len(rows) > 1 and rows[0].shape == (1,):
                values[name] = self._stack(rows, 0)  # one per row
            elif axis is None or len(rows) == 1:
                values[name] = rows[0]  # the same in every request of the group
            else:
                values[name] = self._stack(rows, axis)
        padding: dict[str, list[int]] = {}
        for carry in self.loop.carried:
            cell = self.wf.state[carry.cell]
            rows = [o.frame.values[carry.cell] for o in group]
            if isinstance(cell.recurrence, GrowingRecurrence):
                grow = cell.recurrence.axis
                width = max(r.shape[grow] for r in rows)
                padding[carry.cell] = [width - r.shape[grow] for r in rows]
                rows = [_pad_left(r, grow, width) for r in rows]
            values[carry.cell] = (
                rows[0] if len(rows) == 1 else self._stack(rows, cell.contract.request_axis)
            )
        iteration = self.loop.iteration
        if iteration is not None:
            # each row its own count; without a request axis the group's rows share one (the
            # same: a group's requests are at the same iteration, see _groups)
            axis = iteration.contract.request_axis
            rows = [
                self.interp.iteration_value(iteration, o.iterations, o.frame, self.where)
                for o in group
            ]
            values[iteration.value] = rows[0] if axis is None else self._stack(rows, axis)
        frame = Frame(
            values=values,
            symbols=Symbols(),
            outputs=SlotOutputs(self.wf.outputs, group),
            stored_session={},
            stop_on_eos=group[0].request.stop_on_eos,
        )
        context = group[0].context
        context.state[BATCH_WAITING] = waiting
        with running(context):
            self.interp.body(self.loop, frame)
        self.counters.iteration()
        self.counters.add("batching", "bodies")
        self.counters.add("batching", "rows", len(group))
        self._record(group, frame.values, record)
        for r, occupant in enumerate(group):
            self._take_rows(occupant, r, len(group), frame.values, padding)

    def _stack(self, rows: list, axis: int):
        """The rows joined along ``axis``, where they live: on the device when one of them is
        (a host row is copied there, counted), else on the host."""
        device = next((r for r in rows if not isinstance(r, np.ndarray)), None)
        if device is None:
            return np.concatenate(rows, axis=axis)
        xp = _module(device)
        moved = []
        for row in rows:
            if isinstance(row, np.ndarray):
                self.counters.add("materialisations", "host_to_device")
                row = xp.asarray(row)
            moved.append(row)
        return xp.concatenate(moved, axis=axis)

    def _record(self, group: list[Occupant], values: dict, record: StepRecord) -> None:
        """The step's liveness bit and each slot's accepted_len, from the batch component."""
        invoke = next(
            s
            for s in self.loop.steps
            if isinstance(s, InvokeStep) and s.component == self.found.component
        )
        live = values.get(invoke.outputs.get("live", ""))
        accepted = values.get(invoke.outputs.get("accepted_len", ""))
        if live is not None:
            record.live = record.live or bool(np.asarray(live).any())
        if accepted is not None:
            flat = np.asarray(accepted).reshape(-1)
            for r, occupant in enumerate(group):
                record.accepted_len[occupant.slot] = int(flat[r] if flat.size > 1 else flat[0])
        record.bodies += 1

    def _take_rows(self, occupant: Occupant, r: int, rows: int, values: dict, padding) -> None:
        """Row ``r`` of every carried cell's next value becomes the request's, with the
        padding cut off; each is checked against the cell's recurrence with the request's own
        bounds, exactly as its solo run checks it."""
        frame = occupant.frame
        own: dict = {}
        for carry in self.loop.carried:
            cell = self.wf.state[carry.cell]
            own[carry.cell] = frame.values[carry.cell]
            new = values[carry.next]  # defined for the body (D29), or read from before it
            axis = cell.contract.request_axis
            factor = _factor(cell.contract)
            if new.ndim <= axis or new.shape[axis] != rows * factor:
                raise RunError(
                    "E57",
                    f"{self.where}: next value {carry.next!r} of cell {carry.cell!r} has "
                    f"{new.shape[axis] if new.ndim > axis else 0} rows on its request axis, but "
                    f"the {rows} request(s) sharing this body need {rows * factor}: no row can "
                    f"be cut for each",
                )
            index = [slice(None)] * new.ndim
            index[axis] = slice(r * factor, (r + 1) * factor)
            if carry.cell in padding:
                grow = cell.recurrence.axis
                index[grow] = slice(padding[carry.cell][r], None)
            own[carry.next] = new[tuple(index)]
        grouped = self.interp.group_cells
        for carry in self.loop.carried:
            cell = self.wf.state[carry.cell]
            cells.next_value(
                carry,
                cell,
                carry.cell in grouped,
                own,
                None,
                occupant.bounds,
                self.where,
            )
        for carry in self.loop.carried:
            frame.values[carry.cell] = own[carry.cell]


def _module(value):
    """The array module of a value (numpy, or the device's: CuPy)."""
    if isinstance(value, np.ndarray):
        return np
    return importlib.import_module(type(value).__module__.split(".")[0])


def _pad_left(value, axis: int, width: int):
    """``value`` with zeros before it along ``axis``, to ``width`` (where it lives)."""
    missing = width - value.shape[axis]
    if missing == 0:
        return value
    xp = _module(value)
    shape = list(value.shape)
    shape[axis] = missing
    return xp.concatenate((xp.zeros(shape, dtype=value.dtype), value), axis=axis)
