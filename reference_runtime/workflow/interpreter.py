"""The one interpreter: walks the declared steps; components run beneath it.

Semantics follow FORMAT.md sections 2-7 and RUNTIME_NOTES.md sections 4-6, with the departures
in docs/format.md. The interpreter never imports an executor: it receives one
:class:`~reference_runtime.executors.base.ComponentSession` per component.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial

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
from ..package.visit import all_steps
from .outputs import OutputStore, compile_row_emit
from .overrides import invoke_override
from .tensors import Symbols, check, checker, dtype_name, scalar_int, to_host

BOOL = np.dtype(np.bool_)


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

    __slots__ = ("step", "comp", "session", "inputs", "outputs", "output_ports", "scatter",
                 "input_names", "input_ports", "output_names", "host_only", "contract")  # fmt: skip

    def __init__(self, interpreter: Interpreter, step: InvokeStep):
        self.step = step
        self.comp = comp = interpreter.wf.components[step.component]
        self.session = interpreter.sessions[step.component]
        declared_in = comp.ports.inputs or None  # empty: the graph's own ports
        declared_out = comp.ports.outputs or None

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
        self.input_ports = tuple(port for port, _, _, _ in self.inputs)
        self.input_names = tuple(name for _, name, _, _ in self.inputs)
        self.output_ports = list(step.outputs)
        self.output_names = tuple(step.outputs.values())
        self.scatter = any(
            step.component in g.update.write_indices_ports for _, g in interpreter.scatter_groups
        )
        self.host_only = getattr(self.session, "host_only", False)
        self.contract = getattr(self.session, "contract", None)

    def check_inputs(self, args: list) -> Symbols:
        """Check the input ports in a fresh component scope; returns the scope they leave."""
        scope = Symbols()
        for (_, value_name, check_port, where), value in zip(self.inputs, args, strict=True):
            if check_port is not None:
                check_port(value_name, value, scope, where)
        return scope

    def check_outputs(self, results: list, scope: Symbols) -> None:
        for (_, value_name, check_port, where), value in zip(self.outputs, results, strict=True):
            if check_port is not None:
                check_port(value_name, value, scope, where)

    def refuse_inputs(self, args: list) -> None:
        """A compiled input check failed: the general checks report why."""
        self.check_inputs(args)
        raise _disagreement(self, "input")

    def refuse_outputs(self, args: list, results: list) -> None:
        self.check_outputs(results, self.check_inputs(args))
        raise _disagreement(self, "output")

    def compile(self, interpreter: Interpreter, general: Callable) -> Callable:
        """The invoke as one straight-line function of the frame, specialised to its ports.

        It does exactly what :meth:`Interpreter.invoke_general` does for a plain invoke (read
        the bound values, check them against the ports' contracts, run the session, check and
        store the outputs, count the call) without the per-port loops: each contract check is
        unrolled into comparisons of the value's dtype and extents, with each shape symbol of
        the component scope held in a local variable once a port binds it. When a comparison
        fails, the general checks run and report the error. Invokes that need more (scatter
        bounds, host-only executors, contract executors, an unavailable value) take the general
        path; so does every step of a run with request-time overrides.
        """
        if self.scatter or self.host_only or self.contract is not None:
            return lambda frame: general(self.step, frame)
        arg = [f"a{i}" for i in range(len(self.inputs))]
        out = [f"o{i}" for i in range(len(self.outputs))]
        binding = getattr(self.session, "binding", None)
        ports = ", ".join(f"{p!r}: {a}" for p, a in zip(self.input_ports, arg, strict=True))
        namespace: dict = {}
        symbols: dict[str, str] = {}  # shape symbol -> the local holding its extent
        lines = [
            "def invoke(frame):",
            "    values = frame.values",
            "    try:",
            *(f"        {a} = values[{n!r}]" for a, n in zip(arg, self.input_names, strict=True)),
            "        pass",
            "    except KeyError:",
            "        return general(step, frame)",
        ]
        refuse = f"plan.refuse_inputs([{', '.join(arg)}])"
        for a, (_, _, check_port, _) in zip(arg, self.inputs, strict=True):
            lines += _contract_lines(a, check_port, symbols, namespace, refuse)
        unpack = f"({''.join(o + ', ' for o in out)})"
        if binding:  # the executor's own call, outputs in order; its errors are reported
            lines += [
                "    try:",
                f"        {unpack} = binding(output_ports, {{{ports}}}, None)",
                "    except Exception as exc:",
                "        raise session.failure(exc) from exc",
            ]
        else:
            lines.append(f"    results = session.run({{{ports}}}, output_ports)")
            lines += [
                f"    {o} = results[{p!r}]" for o, p in zip(out, self.output_ports, strict=True)
            ]
        lines.append("    calls[executor] += 1")
        refuse = f"plan.refuse_outputs([{', '.join(arg)}], [{', '.join(out)}])"
        for o, (_, _, check_port, _) in zip(out, self.outputs, strict=True):
            lines += _contract_lines(o, check_port, symbols, namespace, refuse)
        lines += [f"    values[{n!r}] = {o}" for o, n in zip(out, self.output_names, strict=True)]
        namespace.update(
            interpreter=interpreter,
            general=general,
            step=self.step,
            plan=self,
            session=self.session,
            binding=binding,
            output_ports=self.output_ports,
            executor=self.session.executor,
            calls=interpreter.counters.invocations[self.step.component],
        )
        exec(compile("\n".join(lines), f"<invoke {self.step.component}>", "exec"), namespace)
        return namespace["invoke"]

    def where(self) -> str:
        return f"{format_location(self.step.path)} (invoke {self.step.component!r})"

    def port_where(self, port: str, direction: str):
        return lambda: f"{self.where()}, {direction} port {port!r}"


class _Described:
    """``{where}: carried cell {name!r}``, formatted only if an error message uses it."""

    __slots__ = ("where", "name")

    def __init__(self, where: str, name: str):
        self.where, self.name = where, name

    def __str__(self) -> str:
        return f"{self.where}: carried cell {self.name!r}"


class CarryPlan:
    """A loop's carried cell, resolved once: its state declaration and how it is checked."""

    __slots__ = ("name", "next", "cell", "grouped", "invariant")

    def __init__(self, carry, cell, grouped: bool):
        self.name = carry.cell
        self.next = carry.next
        self.cell = cell
        self.grouped = grouped
        self.invariant = isinstance(cell.recurrence, InvariantRecurrence)


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
    ):
        self.wf = workflow
        self.sessions = sessions
        self.counters = counters
        groups = workflow.serving.state_service.groups if workflow.serving else {}
        self.group_cells = {n for n, c in workflow.state.items() if c.service_group in groups}
        self.scatter_groups = [
            (name, g) for name, g in groups.items() if isinstance(g.update, IndexedScatterUpdate)
        ]
        self.per_row_outputs = _per_row_outputs(workflow)
        self.plans: dict[int, InvokePlan] = {}
        self.compiled: dict[int, Callable] = {}  # id(invoke step) -> its compiled invoke
        self.step_lists: dict[int, tuple] = {}  # id(step list) -> (the list, its callables)
        self.overrides: dict = {}  # target component -> Override, for the current run
        self.carries: dict[int, Callable] = {}  # id(loop step) -> its compiled carried update
        self.wheres: dict[int, str] = {}  # id(emit or loop step) -> its location (diagnostics)
        self._dispatch = {
            InvokeStep: self.invoke,
            LoopStep: self.loop,
            BranchStep: self.branch,
            EmitStep: self.emit,
            SequenceStep: self.sequence,
        }

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
        for run_step in self.compiled_steps(steps):
            run_step(frame)

    def compiled_steps(self, steps) -> tuple:
        """A step list as callables of the frame, resolved once per list: an invoke's
        compiled function, or the step kind's method bound to the step. A run with request-time
        overrides takes every step's general path."""
        if self.overrides:
            return tuple(partial(self._dispatch[step.__class__], step) for step in steps)
        entry = self.step_lists.get(id(steps))
        if entry is None:
            callables = tuple(self._compiled_step(step) for step in steps)
            entry = self.step_lists[id(steps)] = (steps, callables)  # the list stays alive
        return entry[1]

    def _compiled_step(self, step) -> Callable:
        if isinstance(step, InvokeStep):
            return self._compiled_invoke(step)
        if isinstance(step, EmitStep) and step.output in self.per_row_outputs:
            fast = compile_row_emit(
                step, self.wf.outputs[step.output], self._emit_where(step), self.emit
            )
            if fast is not None:
                return fast
        return partial(self._dispatch[step.__class__], step)

    def sequence(self, step: SequenceStep, frame: Frame) -> None:
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
        if self.overrides:
            self.invoke_general(step, frame)
        else:
            self._compiled_invoke(step)(frame)

    def _compiled_invoke(self, step: InvokeStep) -> Callable:
        compiled = self.compiled.get(id(step))
        if compiled is None:
            compiled = self.compiled[id(step)] = self.plan(step).compile(self, self.invoke_general)
        return compiled

    def plan(self, step: InvokeStep) -> InvokePlan:
        plan = self.plans.get(id(step))
        if plan is None:
            plan = self.plans[id(step)] = InvokePlan(self, step)
        return plan

    def invoke_general(self, step: InvokeStep, frame: Frame) -> None:
        plan = self.plan(step)
        values = frame.values
        args = [self.read(frame, name, plan.where()) for name in plan.input_names]
        scope = plan.check_inputs(args)
        inputs = dict(zip(plan.input_ports, args, strict=True))
        if plan.scatter:
            self.check_scatter(step.component, inputs, frame, plan.where())
        if plan.host_only:
            inputs = {port: to_host(value, self.counters) for port, value in inputs.items()}
        override = self.overrides.get(step.component)
        if override is not None:
            session = self.sessions[override.replacement]
            results = invoke_override(override, session, inputs, plan.output_ports, plan.where())
            self.counters.invoked(override.replacement, session.executor)
        else:
            if plan.contract is not None:  # a runtime contract executor: counted at dispatch
                self.counters.contract_executions[plan.contract] += 1
            results = plan.session.run(inputs, plan.output_ports)
            self.counters.invoked(step.component, plan.session.executor)
        produced = [results[port] for port in plan.output_ports]
        plan.check_outputs(produced, scope)
        values.update(zip(plan.output_names, produced, strict=True))

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
        where = self.wheres.get(id(step))
        if where is None:
            where = self.wheres[id(step)] = format_location(step.path)
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
                start = frame.values.get(source)
                if start is None:
                    self.read(frame, source, f"{where}: start value of cell {carry.cell!r}")
            check(
                carry.cell,
                start,
                cell.contract,
                frame.symbols,
                lambda carry=carry: f"{where}: cell {carry.cell!r} at loop entry",
            )
            frame.values[carry.cell] = start
            if not isinstance(cell.recurrence, InvariantRecurrence):
                bounds[carry.cell] = self._recurrence_bounds(cell, frame, where)
        iteration = step.iteration
        if iteration is not None and iteration.value in frame.values:
            raise RunError(
                "D44", f"{where}: iteration value {iteration.value!r} shadows an existing value"
            )
        store = self.carries.get(id(step))
        if store is None:
            carries = [
                CarryPlan(c, wf.state[c.cell], c.cell in self.group_cells) for c in step.carried
            ]
            store = self.carries[id(step)] = _compile_carries(carries, self._update_carry)
        predicate_after_body = faults.active("predicate_after_body")
        skip_merge = faults.active("skip_inactive_merge")
        body = self.compiled_steps(step.steps)
        iteration_shape = None
        counters = self.counters
        # How many bodies each row was active for: bodies with every row active are counted
        # once; the masks of the others are summed per row.
        full_iterations, partial, width = 0, None, 1
        read_predicate = not (step.termination == "generation_eos" and not frame.stop_on_eos)
        continue_when = step.continue_when
        for index in range(limit):
            if predicate_after_body and index == 0:
                mask = None  # the first body runs unconditionally, as in a do-while loop
            elif not read_predicate:
                mask = None
            else:
                mask = frame.values.get(continue_when)
                # a host bool of rank <= 1 with a row: read as is; anything else is checked,
                # copied to the host or refused by the general path
                host = mask.__class__ is np.ndarray and mask.dtype is BOOL and mask.ndim == 1
                if not (host and mask.size):
                    mask = self._predicate(step, frame, where)
            all_active = True
            if mask is not None:
                flags = mask.tolist()
                if True not in flags:
                    break
                all_active = False not in flags
                width = len(flags)
            if all_active:
                full_iterations += 1
            else:
                partial = mask.astype(np.int64) if partial is None else partial + mask
            if iteration is not None:
                if iteration_shape is None:
                    iteration_shape = self._iteration_shape(iteration, frame, where)
                value = np.empty(iteration_shape, dtype=np.int64)
                value.fill(index)
                frame.values[iteration.value] = value
            if not all_active:  # per-row emits skip the rows this mask marks inactive
                frame.active_rows.append(mask)
            for run_step in body:
                run_step(frame)
            if not all_active:
                frame.active_rows.pop()
            counters.loop_iterations += 1
            # Inactive rows are merged back only when some rows are active and some are not.
            merge = None if all_active or mask.size == 1 or skip_merge else mask
            store(frame.values, merge, bounds, where)
        if iteration is not None:
            frame.values.pop(iteration.value, None)
        if partial is not None:
            active_iterations = partial + full_iterations
        else:
            active_iterations = np.full(width, full_iterations, dtype=np.int64)
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
        return to_host(value, self.counters).reshape(-1)

    def _iteration_shape(self, iteration, frame: Frame, where: str) -> tuple[int, ...]:
        """The shape of the iteration value (its symbols are bound before the first body)."""
        shape = []
        for dim in iteration.contract.shape or ():
            extent = frame.symbols.resolve(dim)
            if extent is None:
                raise RunError(
                    "D44", f"{where}: iteration shape symbol {dim!r} is not bound by any value"
                )
            shape.append(extent)
        return tuple(shape)

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
        increment, maximum = out
        largest = int(maximum.max()) if maximum is not None else None
        # One increment for every row (and at most one max): growth is checked exactly.
        uniform = increment is not None and increment.size == 1
        uniform = uniform and (maximum is None or maximum.size == 1)
        step = int(increment[0]) if uniform else None
        return increment, maximum, largest, step

    def _update_carry(self, carry: CarryPlan, old, merge, bounds, values: dict, where) -> None:
        """Store a carried cell's next value after checking its recurrence; ``merge`` is the
        active-row mask when inactive rows must keep their previous values (else None)."""
        name = carry.name
        new = values.get(carry.next)
        if new is None:
            if carry.grouped:
                values[name] = old
                return
            raise RunError(
                "E57", f"{where}: next value {carry.next!r} of cell {name!r} is unavailable"
            )
        if not (carry.invariant and new.shape == old.shape and new.dtype == old.dtype):
            self._check_recurrence(
                name, carry.cell, old, new, bounds.get(name), carry.grouped, where
            )
        if merge is None or carry.grouped:
            values[name] = new
        else:
            values[name] = _merge_inactive(name, carry.cell, old, new, merge, where)

    def _check_recurrence(self, name, cell, old, new, bounds, grouped, where) -> None:
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
            changed = next(
                i for i, (a, b) in enumerate(zip(o, n, strict=True)) if a != b and i != axis
            )
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
                    raise RunError(
                        "E57", f"{what} grew by {grown} along axis {axis}, expected {step}"
                    )
                if largest is not None and n[axis] > largest:
                    raise RunError(
                        "E57",
                        f"{what} reached {n[axis]} along axis {axis}, above max {largest}",
                    )
                return
            if not grouped:
                raise RunError(
                    "E57", f"{what}: per-row growth is allowed only for service-group cells"
                )
            if maximum is not None and increment is not None and (increment > maximum).any():
                raise RunError("E57", f"{what}: a row's increment exceeds its max")
            if maximum is not None and new.shape[axis] > largest:
                raise RunError("E57", f"{what} reached {new.shape[axis]}, above the largest max")
            return
        # bounded
        limit = largest
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
            if source in self.wf.state and frame.final_refs.get(source) == source:
                frame.final_refs[source] = name
        frame.values = saved
        frame.values.update(exported)

    # ------------------------------------------------------------------ emit

    def _emit_where(self, step: EmitStep) -> str:
        where = self.wheres.get(id(step))
        if where is None:
            where = self.wheres[id(step)] = (
                f"{format_location(step.path)} (emit into {step.output!r})"
            )
        return where

    def emit(self, step: EmitStep, frame: Frame) -> None:
        where = self._emit_where(step)
        values = frame.values
        counters = self.counters
        # Emits publish to the host: every value they read is materialised there.
        when = length = None
        if step.when:
            when = values.get(step.when)
            if when is None:
                when = self.read(frame, step.when, where)
            when = to_host(when, counters)
            if when.dtype != np.bool_ or when.ndim > 1 or when.size == 0:
                raise RunError(
                    "D85", f"{where}: when {step.when!r} must be a non-empty bool of rank <= 1"
                )
        if step.valid_length:
            length = values.get(step.valid_length)
            if length is None:
                length = self.read(frame, step.valid_length, where)
            length = to_host(length, counters)
            if length.dtype.kind not in "iu" or length.ndim > 1 or length.size == 0:
                raise RunError(
                    "D85",
                    f"{where}: valid_length {step.valid_length!r} must be a non-empty integer of "
                    "rank <= 1",
                )
        value = values.get(step.value)
        if value is None:
            value = self.read(frame, step.value, where)
        value = to_host(value, counters)
        frame.outputs.emit(step, value, when, length, frame.symbols, where, frame.active_rows)


def _compile_carries(carries: list[CarryPlan], update: Callable) -> Callable:
    """A loop's carried update as one straight-line function ``store(values, merge, bounds,
    where)``. A cell's value before the update is still under its name (nothing else writes a
    cell's name). The common case, an invariant cell whose next value has its dtype and shape
    while every row is active, is stored at once; everything else (recurrences, inactive-row
    merges, a missing next value) goes through ``update``, which checks it and reports errors.
    """
    lines = ["def store(values, merge, bounds, where):", "    if merge is None:"]
    for i, carry in enumerate(carries):
        if carry.invariant:
            lines += [
                f"        old = values[{carry.name!r}]",
                f"        new = values.get({carry.next!r})",
                "        if new is not None and new.shape == old.shape and new.dtype == old.dtype:",
                f"            values[{carry.name!r}] = new",
                "        else:",
                f"            update(C{i}, old, None, bounds, values, where)",
            ]
        else:
            lines.append(
                f"        update(C{i}, values[{carry.name!r}], None, bounds, values, where)"
            )
    lines += ["        return", "    else:"]
    lines += [
        f"        update(C{i}, values[{c.name!r}], merge, bounds, values, where)"
        for i, c in enumerate(carries)
    ]
    lines.append("        return")
    namespace = {"update": update, **{f"C{i}": carry for i, carry in enumerate(carries)}}
    exec(compile("\n".join(lines), "<carried update>", "exec"), namespace)
    return namespace["store"]


def _contract_lines(var: str, chk, symbols: dict, namespace: dict, refuse: str) -> list[str]:
    """The checks of a compiled contract (:class:`~.tensors.Checker`) on local ``var``, as
    lines of a generated function: dtype, rank, fixed extents, and shape symbols (the first port
    that has a symbol binds it to a local, later ones compare; an axis of a request-expanded
    layout counts rows of ``factor``). Any failure runs ``refuse``, which reports it."""
    if chk is None:
        return []
    dtype = f"DT{len(namespace)}"
    namespace[dtype] = chk.dtype
    wrong_dtype = f"({var}.dtype is not {dtype} and {var}.dtype != {dtype})"
    if len(chk.axes) == chk.rank and all(d.__class__ is int or d in symbols for _, d in chk.axes):
        # Every extent is known here: one comparison of the whole shape.
        parts = []
        for axis, dim in chk.axes:
            if dim.__class__ is int:
                parts.append(str(dim))
            elif axis == chk.request_axis and chk.factor > 1:
                parts.append(f"{symbols[dim]} * {chk.factor}")
            else:
                parts.append(symbols[dim])
        expected = "(" + "".join(part + ", " for part in parts) + ")"
        return [f"    if {wrong_dtype} or {var}.shape != {expected}:", f"        {refuse}"]
    lines = [
        f"    shape = {var}.shape",
        f"    if {wrong_dtype} or len(shape) != {chk.rank}:",
        f"        {refuse}",
    ]
    for axis, dim in chk.axes:
        extent = f"shape[{axis}]"
        if dim.__class__ is int:
            lines += [f"    if {extent} != {dim}:", f"        {refuse}"]
            continue
        if axis == chk.request_axis and chk.factor > 1:
            lines += [f"    if {extent} % {chk.factor}:", f"        {refuse}"]
            extent = f"{extent} // {chk.factor}"
        local = symbols.get(dim)
        if local is None:
            local = symbols[dim] = f"y{len(symbols)}"
            lines.append(f"    {local} = {extent}")
        else:
            lines += [f"    if {extent} != {local}:", f"        {refuse}"]
    return lines


def _disagreement(plan: InvokePlan, direction: str) -> RuntimeError:
    return RuntimeError(
        f"{plan.where()}: the compiled {direction} checks refused a value the general checks "
        "accept; this is a bug in the runtime"
    )


def _per_row_outputs(workflow: Workflow) -> set[str]:
    found = {
        step.output
        for step in all_steps(workflow.steps)
        if isinstance(step, EmitStep) and (step.when or step.valid_length)
    }
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
