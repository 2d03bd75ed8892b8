"""The one interpreter: it walks the declared steps; components run beneath it.

This is the specification path, written to be read next to the format (docs/format.md and
docs/runtime.md; docs/architecture.md maps the format's sections to the code): one method per
step kind, each doing what the format says in the order it says it. ``compiled.py`` holds the fast
path (the same semantics, specialised per step); ``Engine.from_dir(..., compiled=False)`` runs
this one, and the tests hold the two to the same results.

The interpreter never imports an executor: it receives one component session per component
(see ``executors/base.py``) and only calls ``run``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from ..arrays import dtype_name, to_host
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
    SequenceStep,
    Workflow,
)
from ..package.visit import all_steps
from . import cells
from .outputs import OutputStore
from .overrides import invoke_override
from .scatter import check_scatter_bounds
from .tensors import Symbols, check, scalar_int


@dataclass
class LoopReport:
    """What a loop did, for finish reasons: how many iterations each row was active for.

    ``active_iterations`` has one entry per row of the predicate (one entry when the predicate
    has a single element, or is not read because ``stop_on_eos`` is off); ``limit`` is the
    ``max_iterations`` the loop read.
    """

    active_iterations: np.ndarray
    limit: int


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
    # the active-row masks of the enclosing loops' current iterations where some rows are
    # inactive (innermost last)
    active_rows: list[np.ndarray] = field(default_factory=list)
    # target component -> Override: the request's component overrides
    overrides: Mapping = field(default_factory=dict)


def dynamic_symbols(workflow: Workflow) -> frozenset[str]:
    """Symbols on the varying axis of growing/bounded cells never bind in package scope."""
    out = set()
    for cell in workflow.state.values():
        rec = cell.recurrence
        if isinstance(rec, GrowingRecurrence | BoundedRecurrence) and cell.contract.shape:
            dim = cell.contract.shape[rec.axis]  # axis < rank = len(shape) (E45, B07)
            if isinstance(dim, str):
                out.add(dim)
    return frozenset(out)


def per_row_outputs(workflow: Workflow) -> set[str]:
    """Outputs some emit publishes row by row (it has ``when`` or ``valid_length``) and whose
    contract has a request axis."""
    found = {
        step.output
        for step in all_steps(workflow.steps)
        if isinstance(step, EmitStep) and (step.when or step.valid_length)
    }
    outputs = workflow.outputs
    return {n for n in found if n in outputs and outputs[n].contract.request_axis is not None}


class Interpreter:
    """Runs a workflow. It keeps nothing of a run: everything a run changes lives in its
    :class:`Frame`, so runs on several threads can share one interpreter."""

    def __init__(self, workflow: Workflow, sessions: Mapping[str, object], counters: Counters):
        self.wf = workflow
        self.sessions = sessions
        self.counters = counters
        groups = workflow.serving.state_service.groups if workflow.serving else {}
        self.group_cells = {n for n, c in workflow.state.items() if c.service_group in groups}
        self.scatter_groups = [
            (name, g) for name, g in groups.items() if isinstance(g.update, IndexedScatterUpdate)
        ]
        self.scatter_writers = {
            component for _, g in self.scatter_groups for component in g.update.write_indices_ports
        }
        self.per_row_outputs = per_row_outputs(workflow)
        self.kinds = {
            SequenceStep: self.sequence,
            InvokeStep: self.invoke,
            LoopStep: self.loop,
            BranchStep: self.branch,
            EmitStep: self.emit,
        }

    # ------------------------------------------------------------------ a run

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
        """Run the workflow's steps on the bound inputs (``values``, whose symbols are bound in
        ``symbols``); the frame holds what the run produced."""
        frame = Frame(
            values=values,
            symbols=symbols,
            outputs=OutputStore(dict(self.wf.outputs), self.per_row_outputs, batch),
            stored_session=stored_session,
            stop_on_eos=stop_on_eos,
            overrides=dict(overrides or {}),
        )
        self.steps(self.wf.steps, frame)
        return frame

    def steps(self, steps, frame: Frame) -> None:
        """Steps run in document order."""
        for step in steps:
            self.kinds[step.__class__](step, frame)

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

    # ------------------------------------------------------------------ sequence

    def sequence(self, step: SequenceStep, frame: Frame) -> None:
        self.steps(step.steps, frame)

    # ------------------------------------------------------------------ invoke

    def invoke(self, step: InvokeStep, frame: Frame) -> None:
        """Read the bound values; check each against its input port's contract (in a fresh
        component scope of shape symbols); check scatter bounds; run the component (or the
        request's override of it); check each output against its port; bind the outputs."""
        comp = self.wf.components[step.component]
        where = f"{format_location(step.path)} (invoke {step.component!r})"
        ports = sorted(step.inputs)
        inputs = {port: self.read(frame, step.inputs[port], where) for port in ports}
        scope = Symbols()  # the component scope: symbols bind per invocation
        for port in ports:
            contract = comp.ports.inputs.get(port)
            if contract is not None:
                where_port = f"{where}, input port {port!r}"
                check(step.inputs[port], inputs[port], contract, scope, where_port)
        if step.component in self.scatter_writers:
            check_scatter_bounds(
                self.scatter_groups, step.component, inputs, frame.values, self.counters, where
            )
        session = self.sessions[step.component]
        if session.host_only:
            inputs = {port: to_host(value, self.counters) for port, value in inputs.items()}
        ports = list(step.outputs)
        override = frame.overrides.get(step.component)
        if override is not None:
            replacement = self.sessions[override.replacement]
            results = invoke_override(override, replacement, inputs, ports, where)
            self.counters.invoked(override.replacement, replacement.executor)
        else:
            contract_id = session.contract
            if contract_id is not None:  # a runtime contract executor: counted at dispatch
                self.counters.add("contract_executions", contract_id)
            results = session.run(inputs, ports)
            self.counters.invoked(step.component, session.executor)
        for port, name in step.outputs.items():
            contract = comp.ports.outputs.get(port)
            if contract is not None:
                check(name, results[port], contract, scope, f"{where}, output port {port!r}")
        for port, name in step.outputs.items():
            frame.values[name] = results[port]

    # ------------------------------------------------------------------ loop

    def loop(self, step: LoopStep, frame: Frame) -> None:
        """``setup`` runs once; ``max_iterations`` is read once; each carried cell starts from
        its stored session value, its ``initial`` or its initializer; then, at most
        ``max_iterations`` times: the predicate is read before the body (the loop ends when no
        row is active), the body runs, and each carried cell takes its next value (checked
        against its recurrence; inactive rows keep theirs)."""
        where = format_location(step.path)
        self.steps(step.setup, frame)
        limit = self.iteration_limit(step, frame, where)
        bounds = self.enter_cells(step, frame, where)
        iteration = step.iteration
        # How many bodies each row was active for: bodies with every row active are counted
        # once; the masks of the others are summed per row.
        full_iterations, partial, width = 0, None, 1
        for index in range(limit):
            mask = self.predicate(step, frame, where, index)
            all_active = True
            if mask is not None:
                any_active, all_active = self.activity(mask)
                if not any_active:
                    break
                width = mask.size
            if all_active:
                full_iterations += 1
            else:
                partial = mask.astype(np.int64) if partial is None else partial + mask
            if iteration is not None:
                frame.values[iteration.value] = self.iteration_value(iteration, index, frame, where)
            if not all_active:  # per-row emits skip the rows this mask marks inactive
                frame.active_rows.append(mask)
            self.body(step, frame)
            if not all_active:
                frame.active_rows.pop()
            self.counters.iteration()
            # Inactive rows are merged back only when some rows are active and some are not.
            merge = None if all_active or mask.size == 1 else mask
            self.next_cells(step, frame, merge, bounds, where)
        if iteration is not None:
            frame.values.pop(iteration.value, None)
        if partial is not None:
            active_iterations = partial + full_iterations
        else:
            active_iterations = np.full(width, full_iterations, dtype=np.int64)
        frame.loop_reports[id(step)] = LoopReport(active_iterations, limit)
        for carry in step.carried:
            if self.wf.state[carry.cell].scope == "session":
                frame.final_refs[carry.cell] = carry.cell

    def iteration_limit(self, step: LoopStep, frame: Frame, where: str) -> int:
        value = to_host(
            self.read(frame, step.max_iterations, f"{where}.max_iterations"), self.counters
        )
        limit = scalar_int(value, f"{where}: max_iterations {step.max_iterations!r}", "D44")
        if limit < 0:
            raise RunError("D44", f"{where}: max_iterations is {limit}, negative")
        return limit

    def enter_cells(self, step: LoopStep, frame: Frame, where: str) -> dict[str, tuple]:
        """Bind each carried cell's start value (checked against the cell's contract in the
        package scope); the recurrence bounds of growing/bounded cells, read once."""
        bounds: dict[str, tuple] = {}
        for carry in step.carried:
            cell = self.wf.state[carry.cell]
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
            if not isinstance(cell.recurrence, InvariantRecurrence):
                bounds[carry.cell] = cells.recurrence_bounds(
                    cell, lambda name, what: self.read(frame, name, what), where, self.counters
                )
        return bounds

    def predicate(self, step: LoopStep, frame: Frame, where: str, index: int):
        """The active-row mask read before each body, or None when it is not read (a
        ``generation_eos`` loop of a request that does not stop on end tokens)."""
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
        return to_host(value, self.counters).reshape(-1)

    @staticmethod
    def activity(mask: np.ndarray) -> tuple[bool, bool]:
        """Whether any row, and whether every row, of a predicate's mask is active."""
        return bool(mask.any()), bool(mask.all())

    @staticmethod
    def iteration_value(iteration, index: int, frame: Frame, where: str) -> np.ndarray:
        """The zero-based iteration index, shaped by the iteration contract."""
        shape = []
        for dim in iteration.contract.shape or ():
            extent = frame.symbols.resolve(dim)
            if extent is None:
                raise RunError(
                    "D44", f"{where}: iteration shape symbol {dim!r} is not bound by any value"
                )
            shape.append(extent)
        return np.full(tuple(shape), index, dtype=np.int64)

    def body(self, step: LoopStep, frame: Frame) -> None:
        self.steps(step.steps, frame)

    def next_cells(self, step: LoopStep, frame: Frame, merge, bounds, where: str) -> None:
        for carry in step.carried:
            cell = self.wf.state[carry.cell]
            grouped = carry.cell in self.group_cells
            cells.next_value(carry, cell, grouped, frame.values, merge, bounds, where)

    # ------------------------------------------------------------------ branch

    def branch(self, step: BranchStep, frame: Frame) -> None:
        """The predicate (one bool or int64 value) picks the case whose key it spells (else the
        default); the case runs on a copy of the values; afterwards only the phi outputs (and
        what the case emitted) leave it. A session cell a case carries leaves it through the phi
        of its own name (rule D37; values are single-assignment, D29), so the cell's name holds
        its final value after the branch, as it does after a loop."""
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
        arm = step.cases.get(key, step.default)
        if arm is None:
            raise RunError("D43", f"{where}: no case {key!r} and no default")
        saved = dict(frame.values)
        self.steps((arm,), frame)
        exported: dict[str, np.ndarray] = {}
        for name, phi in step.outputs.items():
            source = phi.cases.get(key) if key in step.cases else phi.default
            if source is None:
                raise RunError("D43", f"{where}: phi {name!r} has no source for case {key!r}")
            exported[name] = self.read(frame, source, f"{where}: phi {name!r}")
        frame.values = saved
        frame.values.update(exported)

    # ------------------------------------------------------------------ emit

    def emit(self, step: EmitStep, frame: Frame) -> None:
        """Publish ``value`` into ``output`` (replace, append or event); ``when`` and
        ``valid_length`` guard and cut it row by row. Emits publish to the host: every value
        they read is materialised there."""
        where = f"{format_location(step.path)} (emit into {step.output!r})"
        when = length = None
        if step.when:
            when = to_host(self.read(frame, step.when, where), self.counters)
            if when.dtype != np.bool_ or when.ndim > 1 or when.size == 0:
                raise RunError(
                    "D85", f"{where}: when {step.when!r} must be a non-empty bool of rank <= 1"
                )
        if step.valid_length:
            length = to_host(self.read(frame, step.valid_length, where), self.counters)
            if length.dtype.kind not in "iu" or length.ndim > 1 or length.size == 0:
                raise RunError(
                    "D85",
                    f"{where}: valid_length {step.valid_length!r} must be a non-empty integer of "
                    "rank <= 1",
                )
        value = to_host(self.read(frame, step.value, where), self.counters)
        frame.outputs.emit(step, value, when, length, frame.symbols, where, frame.active_rows)
