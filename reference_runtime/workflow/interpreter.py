"""The one interpreter: walks the declared steps; components run beneath it.

Semantics follow FORMAT.md sections 2-7 and RUNTIME_NOTES.md sections 4-6, with the departures
in docs/format.md. The interpreter never imports an executor: it receives one
:class:`~reference_runtime.executors.base.ComponentSession` per component.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from .. import faults
from ..counters import Counters
from ..errors import RunError, format_location
from ..package.model import (
    BoundedRecurrence,
    BranchStep,
    EmitStep,
    GrowingRecurrence,
    IndexedScatterUpdate,
    InvariantRecurrence,
    InvokeStep,
    LoopStep,
    RequestExpandedLayout,
    SequenceStep,
    Workflow,
)
from .outputs import OutputStore
from .overrides import invoke_override
from .tensors import Symbols, check, checker, dtype_name, scalar_int, to_host


@dataclass
class LoopReport:
    """What a loop did, for finish reasons: how many iterations each row was active for.

    ``active_iterations`` has one entry per row of the predicate (one entry when the predicate
    has a single element, or is not read because ``stop_on_eos`` is off); ``limit`` is the
    ``max_iterations`` the loop read.
    """

    active_iterations: np.ndarray
    limit: int


class InvokePlan:
    """What an invoke needs on every call, computed once: ports, checkers, the session."""

    __slots__ = ("step", "comp", "session", "inputs", "outputs", "output_ports", "scatter")

    def __init__(self, interpreter: Interpreter, step: InvokeStep):
        self.step = step
        self.comp = comp = interpreter.wf.components[step.component]
        self.session = interpreter.sessions[step.component]
        declared_in = comp.ports.inputs if comp.ports else None
        declared_out = comp.ports.outputs if comp.ports else None

        def port_checker(declared, port):
            return checker(declared[port]) if declared is not None and port in declared else None

        self.inputs = [
            (
                port,
                step.inputs[port],
                port_checker(declared_in, port),
                self.port_where(port, "input"),
            )
            for port in sorted(step.inputs)
        ]
        self.outputs = [
            (port, value, port_checker(declared_out, port), self.port_where(port, "output"))
            for port, value in step.outputs.items()
        ]
        self.output_ports = list(step.outputs)
        self.scatter = any(
            step.component in g.update.write_indices_ports for _, g in interpreter.scatter_groups
        )

    def where(self) -> str:
        return f"{format_location(self.step.path)} (invoke {self.step.component!r})"

    def port_where(self, port: str, direction: str):
        return lambda: f"{self.where()}, {direction} port {port!r}"


@dataclass
class Frame:
    """The mutable state of one run."""

    values: dict[str, np.ndarray]
    symbols: Symbols
    outputs: OutputStore
    stored_session: Mapping[str, np.ndarray]
    stop_on_eos: bool
    final_refs: dict[str, str] = field(default_factory=dict)  # session cell -> value name
    loop_reports: dict[int, LoopReport] = field(default_factory=dict)  # id(step) -> report
    # the active-row masks of the enclosing loops' current iterations (innermost last)
    active_rows: list[np.ndarray] = field(default_factory=list)


def dynamic_symbols(workflow: Workflow) -> frozenset[str]:
    """Symbols on the varying axis of growing/bounded cells never bind in package scope."""
    out = set()
    for cell in workflow.state.values():
        rec = cell.recurrence
        if isinstance(rec, GrowingRecurrence | BoundedRecurrence) and cell.contract.shape:
            dim = cell.contract.shape[rec.axis] if rec.axis < len(cell.contract.shape) else None
            if isinstance(dim, str):
                out.add(dim)
    return frozenset(out)


class Interpreter:
    def __init__(
        self,
        workflow: Workflow,
        sessions: Mapping[str, object],
        counters: Counters,
        *,
        before_invoke: Callable | None = None,
    ):
        self.wf = workflow
        self.sessions = sessions
        self.counters = counters
        self.before_invoke = before_invoke
        groups = workflow.serving.state_service.groups if workflow.serving else {}
        self.group_cells = {n for n, c in workflow.state.items() if c.service_group in groups}
        self.scatter_groups = [
            (name, g) for name, g in groups.items() if isinstance(g.update, IndexedScatterUpdate)
        ]
        self.per_row_outputs = _per_row_outputs(workflow)
        self.plans: dict[int, InvokePlan] = {}
        self.overrides: dict = {}  # target component -> Override, for the current run

    # ------------------------------------------------------------------ entry

    def run(
        self,
        values: dict[str, np.ndarray],
        symbols: Symbols,
        *,
        stored_session: Mapping[str, np.ndarray],
        stop_on_eos: bool,
        batch: int | None,
        overrides: Mapping | None = None,
    ) -> Frame:
        self.overrides = dict(overrides or {})
        frame = Frame(
            values=values,
            symbols=symbols,
            outputs=OutputStore(dict(self.wf.outputs), self.per_row_outputs, batch),
            stored_session=stored_session,
            stop_on_eos=stop_on_eos,
        )
        self.steps(self.wf.steps, frame)
        return frame

    def steps(self, steps, frame: Frame) -> None:
        for step in steps:
            if isinstance(step, InvokeStep):
                self.invoke(step, frame)
            elif isinstance(step, LoopStep):
                self.loop(step, frame)
            elif isinstance(step, BranchStep):
                self.branch(step, frame)
            elif isinstance(step, EmitStep):
                self.emit(step, frame)
            elif isinstance(step, SequenceStep):
                self.steps(step.steps, frame)

    @staticmethod
    def read(frame: Frame, name: str, where: str) -> np.ndarray:
        try:
            return frame.values[name]
        except KeyError:
            raise RunError(
                "H84",
                f"{where}: value {name!r} is unavailable (an optional input that was not "
                "supplied?)",
                hint="Supply the input, or read it only under its presence flag.",
            ) from None

    # ------------------------------------------------------------------ invoke

    def invoke(self, step: InvokeStep, frame: Frame) -> None:
        plan = self.plans.get(id(step))
        if plan is None:
            plan = self.plans[id(step)] = InvokePlan(self, step)
        values = frame.values
        scope = Symbols()  # a fresh component scope per invocation
        inputs: dict[str, np.ndarray] = {}
        for port, value_name, check_port, where in plan.inputs:
            value = values.get(value_name)
            if value is None:
                value = self.read(frame, value_name, plan.where())
            if check_port is not None:
                check_port(value_name, value, scope, where)
            inputs[port] = value
        if plan.scatter:
            self.check_scatter(step.component, inputs, frame, plan.where())
        if self.before_invoke is not None:
            self.before_invoke(step.component, plan.comp)
        if getattr(plan.session, "host_only", False):
            inputs = {port: to_host(value, self.counters) for port, value in inputs.items()}
        override = self.overrides.get(step.component)
        if override is not None:
            session = self.sessions[override.replacement]
            results = invoke_override(override, session, inputs, plan.output_ports, plan.where())
            self.counters.invoked(override.replacement, session.executor)
        else:
            contract = getattr(plan.session, "contract", None)
            if contract is not None:  # a runtime contract executor: counted at dispatch
                self.counters.contract_executions[contract] += 1
            results = plan.session.run(inputs, plan.output_ports)
            self.counters.invoked(step.component, plan.session.executor)
        for port, value_name, check_port, where in plan.outputs:
            value = results[port]
            if check_port is not None:
                check_port(value_name, value, scope, where)
            values[value_name] = value

    def check_scatter(self, component: str, inputs: dict, frame: Frame, where: str) -> None:
        """indexed_scatter bounds, checked before the component runs (FORMAT.md section 7)."""
        for gname, group in self.scatter_groups:
            update = group.update
            port = update.write_indices_ports.get(component)
            if port is None or port not in inputs:
                continue
            cap_value = frame.values.get(update.capacity)
            if cap_value is None:
                raise RunError(
                    "E56",
                    f"{where}: capacity {update.capacity!r} of group {gname!r} is unavailable",
                )
            capacity = scalar_int(cap_value, f"capacity of group {gname!r}", "E56")
            if capacity <= 0:
                raise RunError(
                    "E56", f"{where}: capacity of group {gname!r} is {capacity}, not positive"
                )
            axis = group.sequence_axis
            for cell_name, alias in group.ports.get(component, {}).items():
                value = inputs.get(alias.input)
                if value is not None and axis is not None and value.shape[axis] != capacity:
                    raise RunError(
                        "E56",
                        f"{where}: buffer {cell_name!r} of group {gname!r} has extent "
                        f"{value.shape[axis]} on axis {axis}, not the capacity {capacity}",
                    )
            destinations = to_host(inputs[port], self.counters).reshape(-1)
            bad = [int(d) for d in destinations if d < 0 or d >= capacity]
            if bad:
                raise RunError(
                    "E56",
                    f"{where}: write index {bad[0]} of group {gname!r} is outside [0, {capacity}) "
                    f"(destinations {destinations.tolist()}); the graph was not run",
                    hint="Keep every destination in [0, capacity); negative indices are refused "
                    "because ScatterND would wrap them.",
                )
            lengths = frame.values.get(group.logical_lengths) if group.logical_lengths else None
            length_port = update.kv_length_ports.get(component)
            if length_port is not None and length_port in inputs:
                lengths = inputs[length_port]
            if lengths is not None:
                flat = to_host(lengths, self.counters).reshape(-1)
                if flat.size != destinations.size:
                    raise RunError(
                        "E56",
                        f"{where}: group {gname!r} has {flat.size} lengths for "
                        f"{destinations.size} write destinations",
                    )
                bad = [int(n) for n in flat if n < 0 or n > capacity]
                if bad:
                    raise RunError(
                        "E56",
                        f"{where}: logical length {bad[0]} of group {gname!r} is outside "
                        f"[0, {capacity}]",
                    )

    # ------------------------------------------------------------------ loop

    def loop(self, step: LoopStep, frame: Frame) -> None:
        wf = self.wf
        where = format_location(step.path)
        self.steps(step.setup, frame)
        limit_value = to_host(
            self.read(frame, step.max_iterations, f"{where}.max_iterations"), self.counters
        )
        limit = scalar_int(limit_value, f"{where}: max_iterations {step.max_iterations!r}", "D44")
        if limit < 0:
            raise RunError("D44", f"{where}: max_iterations is {limit}, negative")
        bounds: dict[str, tuple] = {}
        for carry in step.carried:
            cell = wf.state[carry.cell]
            stored = frame.stored_session.get(carry.cell) if cell.scope == "session" else None
            if stored is not None:
                start = stored
            else:
                source = carry.initial or cell.initializer
                start = self.read(frame, source, f"{where}: start value of cell {carry.cell!r}")
            check(
                carry.cell,
                start,
                cell.contract,
                frame.symbols,
                f"{where}: cell {carry.cell!r} at loop entry",
            )
            frame.values[carry.cell] = start
            bounds[carry.cell] = self._recurrence_bounds(cell, frame, where)
        iteration = step.iteration
        if iteration is not None and iteration.value in frame.values:
            raise RunError(
                "D44", f"{where}: iteration value {iteration.value!r} shadows an existing value"
            )
        active_iterations = None
        for index in range(limit):
            if faults.active("predicate_after_body") and index == 0:
                mask = None  # the first body runs unconditionally, as in a do-while loop
            else:
                mask = self._predicate(step, frame, where)
            if mask is not None and not mask.any():
                break
            counted = np.ones(1, dtype=np.int64) if mask is None else mask.astype(np.int64)
            if active_iterations is None:
                active_iterations = np.zeros_like(counted)
            active_iterations = active_iterations + counted
            if iteration is not None:
                frame.values[iteration.value] = self._iteration_value(
                    iteration, index, frame, where
                )
            previous = {c.cell: frame.values[c.cell] for c in step.carried}
            if mask is not None:
                frame.active_rows.append(mask)
            self.steps(step.steps, frame)
            if mask is not None:
                frame.active_rows.pop()
            self.counters.loop_iterations += 1
            for carry in step.carried:
                self._update_carry(carry, mask, previous, bounds, frame, where)
        if iteration is not None:
            frame.values.pop(iteration.value, None)
        if active_iterations is None:
            active_iterations = np.zeros(1, dtype=np.int64)
        frame.loop_reports[id(step)] = LoopReport(active_iterations, limit)
        for carry in step.carried:
            if wf.state[carry.cell].scope == "session":
                frame.final_refs[carry.cell] = carry.cell

    def _predicate(self, step: LoopStep, frame: Frame, where: str):
        """The active-row mask read before each body (None: not read, every row active)."""
        if step.termination == "generation_eos" and not frame.stop_on_eos:
            return None
        value = frame.values.get(step.continue_when)
        if value is None:
            raise RunError("D44", f"{where}: continue_when {step.continue_when!r} is unavailable")
        if value.dtype != np.bool_ or value.ndim > 1 or value.size == 0:
            raise RunError(
                "D44",
                f"{where}: continue_when {step.continue_when!r} must be a non-empty bool of rank "
                f"<= 1, got {dtype_name(value)} of shape {list(value.shape)}",
            )
        return to_host(value, self.counters).reshape(-1).copy()

    def _iteration_value(self, iteration, index: int, frame: Frame, where: str) -> np.ndarray:
        contract = iteration.contract
        if contract.rank == 0:
            return np.array(index, dtype=np.int64)
        shape = []
        for dim in contract.shape or ():
            extent = frame.symbols.resolve(dim)
            if extent is None:
                raise RunError(
                    "D44", f"{where}: iteration shape symbol {dim!r} is not bound by any value"
                )
            shape.append(extent)
        return np.full(shape, index, dtype=np.int64)

    def _recurrence_bounds(self, cell, frame: Frame, where: str) -> tuple:
        rec = cell.recurrence
        out = []
        for key in ("increment", "max"):
            name = getattr(rec, key, None)
            if name is None:
                out.append(None)
                continue
            value = to_host(self.read(frame, name, f"{where}: recurrence {key}"), self.counters)
            if value.dtype.kind not in "iu" or value.ndim > 1 or value.size == 0:
                raise RunError(
                    "E57", f"{where}: recurrence {key} {name!r} must be integer [] or [B]"
                )
            out.append(value.reshape(-1).astype(np.int64))
        return tuple(out)

    def _update_carry(self, carry, mask, previous, bounds, frame: Frame, where: str) -> None:
        cell_name = carry.cell
        cell = self.wf.state[cell_name]
        grouped = cell_name in self.group_cells
        old = previous[cell_name]
        new = frame.values.get(carry.next)
        if new is None:
            if grouped:
                frame.values[cell_name] = old
                return
            raise RunError(
                "E57", f"{where}: next value {carry.next!r} of cell {cell_name!r} is unavailable"
            )
        self._check_recurrence(cell_name, cell, old, new, bounds[cell_name], grouped, where)
        if mask is None or mask.size == 1 or mask.all() or grouped:
            frame.values[cell_name] = new
            return
        if faults.active("skip_inactive_merge"):
            frame.values[cell_name] = new
            return
        frame.values[cell_name] = _merge_inactive(cell_name, cell, old, new, mask, where)

    def _check_recurrence(self, name, cell, old, new, bounds, grouped, where) -> None:
        rec = cell.recurrence
        what = f"{where}: carried cell {name!r}"
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
        for i, (a, b) in enumerate(zip(old.shape, new.shape, strict=True)):
            if i != axis and a != b:
                raise RunError(
                    "E57",
                    f"{what} may change only along axis {axis}, but axis {i} changed {a} -> {b}",
                )
        increment, maximum = bounds
        grown = new.shape[axis] - old.shape[axis]
        if isinstance(rec, GrowingRecurrence):
            if (
                increment is not None
                and increment.size == 1
                and maximum is None
                or (
                    increment is not None
                    and increment.size == 1
                    and maximum is not None
                    and maximum.size == 1
                )
            ):
                if grown != int(increment[0]):
                    raise RunError(
                        "E57",
                        f"{what} grew by {grown} along axis {axis}, expected {int(increment[0])}",
                    )
                if maximum is not None and new.shape[axis] > int(maximum[0]):
                    raise RunError(
                        "E57",
                        f"{what} reached {new.shape[axis]} along axis {axis}, above max {int(maximum[0])}",
                    )
                return
            if not grouped:
                raise RunError(
                    "E57", f"{what}: per-row growth is allowed only for service-group cells"
                )
            if maximum is not None and increment is not None and (increment > maximum).any():
                raise RunError("E57", f"{what}: a row's increment exceeds its max")
            if maximum is not None and new.shape[axis] > int(maximum.max()):
                raise RunError("E57", f"{what} reached {new.shape[axis]}, above the largest max")
            return
        # bounded
        limit = int(maximum.max()) if maximum is not None else None
        if limit is not None and (old.shape[axis] > limit or new.shape[axis] > limit):
            raise RunError(
                "E57",
                f"{what} is bounded by {limit} along axis {axis} but holds {new.shape[axis]}",
                hint="Stop the loop before the bound (e.g. in the termination policy).",
            )

    # ------------------------------------------------------------------ branch

    def branch(self, step: BranchStep, frame: Frame) -> None:
        where = format_location(step.path)
        pred = to_host(self.read(frame, step.predicate, f"{where}.predicate"), self.counters)
        if pred.size != 1:
            raise RunError(
                "D43",
                f"{where}: branch predicate {step.predicate!r} holds {pred.size} values, not one",
            )
        if pred.dtype == np.bool_:
            key = "true" if bool(pred.reshape(-1)[0]) else "false"
        elif pred.dtype == np.int64:
            key = str(int(pred.reshape(-1)[0]))
        else:
            raise RunError(
                "D43", f"{where}: branch predicate must be bool or int64, got {dtype_name(pred)}"
            )
        steps = step.cases.get(key, step.default)
        if steps is None:
            raise RunError("D43", f"{where}: no case {key!r} and no default")
        saved = dict(frame.values)
        self.steps(steps, frame)
        exported: dict[str, np.ndarray] = {}
        for name, phi in step.outputs.items():
            source = phi.cases.get(key) if key in step.cases else phi.default
            if source is None:
                raise RunError("D43", f"{where}: phi {name!r} has no source for case {key!r}")
            exported[name] = self.read(frame, source, f"{where}: phi {name!r}")
            if source in self.wf.state and frame.final_refs.get(source) == source:
                frame.final_refs[source] = name
        frame.values = saved
        frame.values.update(exported)

    # ------------------------------------------------------------------ emit

    def emit(self, step: EmitStep, frame: Frame) -> None:
        where = f"{format_location(step.path)} (emit into {step.output!r})"
        # Emits publish to the host: every value they read is materialised there.
        when = to_host(self.read(frame, step.when, where), self.counters) if step.when else None
        length = (
            to_host(self.read(frame, step.valid_length, where), self.counters)
            if step.valid_length
            else None
        )
        if when is not None and (when.dtype != np.bool_ or when.ndim > 1 or when.size == 0):
            raise RunError(
                "D85", f"{where}: when {step.when!r} must be a non-empty bool of rank <= 1"
            )
        if length is not None and (
            length.dtype.kind not in "iu" or length.ndim > 1 or length.size == 0
        ):
            raise RunError(
                "D85",
                f"{where}: valid_length {step.valid_length!r} must be a non-empty integer of rank <= 1",
            )
        value = to_host(self.read(frame, step.value, where), self.counters)
        frame.outputs.emit(step, value, when, length, frame.symbols, where, frame.active_rows)


def _per_row_outputs(workflow: Workflow) -> set[str]:
    found: set[str] = set()

    def visit(steps):
        for step in steps:
            if isinstance(step, EmitStep) and (step.when or step.valid_length):
                found.add(step.output)
            elif isinstance(step, LoopStep):
                visit(step.setup)
                visit(step.steps)
            elif isinstance(step, BranchStep):
                for case in step.cases.values():
                    visit(case)
                visit(step.default or ())
            elif isinstance(step, SequenceStep):
                visit(step.steps)

    visit(workflow.steps)
    return {
        n
        for n in found
        if n in workflow.outputs and workflow.outputs[n].contract.request_axis is not None
    }


def _merge_inactive(name, cell, old, new, mask, where) -> np.ndarray:
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
