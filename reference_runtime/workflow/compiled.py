"""The fast path: the plain interpreter's semantics, specialised per step.

:class:`CompiledInterpreter` is :class:`~.interpreter.Interpreter` with three kinds of steps
generated as straight-line Python (through :mod:`reference_runtime.codegen`, so each keeps its
source and shows it in tracebacks): invokes (the ports' contract checks unrolled into
comparisons), a loop's carried-cell update, and per-row ``append`` / ``replace`` emits. A
generated function handles the common case only; anything unusual (an unavailable value, a
check that fails, scatter bounds, a device value bound to a host-only executor, inactive rows,
a run with request-time overrides) calls the plain step, which does the work and reports every
error. ``Engine.from_dir(path, compiled=True)`` (the default) runs this class; the goldens, the
interpreter tests and a property test hold it to the plain interpreter's results.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np

from ..codegen import generate
from ..errors import format_location
from ..package.model import (
    EmitStep,
    GrowingRecurrence,
    InvariantRecurrence,
    InvokeStep,
    LoopStep,
    WorkflowOutput,
)
from . import cells
from .interpreter import Frame, Interpreter
from .outputs import _append, _Appended
from .tensors import Symbols, check, checker

BOOL = np.dtype(np.bool_)
INT64 = np.dtype(np.int64)


class CompiledInterpreter(Interpreter):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Filled once per step, on first use; two threads racing to fill an entry build equal
        # functions and one of them is kept (each fill is a single dict store).
        self.step_lists: dict[int, tuple] = {}  # id(step list) -> (the list, its callables)
        self.invokes: dict[int, Callable] = {}  # id(invoke step) -> its generated function
        self.carries: dict[int, Callable] = {}  # id(loop step) -> its generated cell update
        self.iteration_shapes: dict[int, tuple] = {}  # id(iteration) -> its literal shape

    def steps(self, steps, frame: Frame) -> None:
        if frame.overrides:  # a run with request-time overrides takes the plain path
            return super().steps(steps, frame)
        for run_step in self.callables(steps):
            run_step(frame)
        return None

    def callables(self, steps) -> tuple:
        """A step list as callables of the frame, resolved once per list."""
        entry = self.step_lists.get(id(steps))
        if entry is None:
            made = tuple(self._callable(step) for step in steps)
            entry = self.step_lists[id(steps)] = (steps, made)  # the list stays alive
        return entry[1]

    def _callable(self, step) -> Callable:
        if isinstance(step, InvokeStep):
            return self._invoke_function(step)
        if isinstance(step, EmitStep) and step.output in self.per_row_outputs:
            where = f"{format_location(step.path)} (emit into {step.output!r})"
            fast = compile_row_emit(step, self.wf.outputs[step.output], where, self.emit)
            if fast is not None:
                return fast
        return partial(self.kinds[step.__class__], step)

    # ------------------------------------------------------------------ invoke

    def _invoke_function(self, step: InvokeStep) -> Callable:
        function = self.invokes.get(id(step))
        if function is None:
            plain = partial(Interpreter.invoke, self)
            function = self.invokes[id(step)] = InvokePlan(self, step).compile(self, plain)
        return function

    # ------------------------------------------------------------------ loop hooks

    def predicate(self, step: LoopStep, frame: Frame, where: str, index: int):
        # a host bool of rank 1 with rows is read as it is; anything else takes the plain read
        mask = frame.values.get(step.continue_when)
        if (
            mask.__class__ is np.ndarray
            and mask.dtype is BOOL
            and mask.ndim == 1
            and mask.size
            and not (step.termination == "generation_eos" and not frame.stop_on_eos)
        ):
            return mask
        return super().predicate(step, frame, where, index)

    @staticmethod
    def activity(mask: np.ndarray) -> tuple[bool, bool]:
        if mask.size == 1:  # the predicate's mask is one-dimensional
            active = bool(mask[0])
            return active, active
        return bool(mask.any()), bool(mask.all())

    def iteration_value(self, iteration, index: int, frame: Frame, where: str) -> np.ndarray:
        # an iteration contract of literal extents has one shape: it is read once
        shape = self.iteration_shapes.get(id(iteration))
        if shape is None:
            value = super().iteration_value(iteration, index, frame, where)
            if all(isinstance(dim, int) for dim in iteration.contract.shape or ()):
                self.iteration_shapes[id(iteration)] = value.shape
            return value
        value = np.empty(shape, dtype=INT64)
        value.fill(index)
        return value

    def body(self, step: LoopStep, frame: Frame) -> None:
        self.steps(step.steps, frame)

    def next_cells(self, step: LoopStep, frame: Frame, merge, bounds, where: str) -> None:
        store = self.carries.get(id(step))
        if store is None:
            store = self.carries[id(step)] = compile_carries(self, step)
        store(frame.values, merge, bounds, where)


class InvokePlan:
    """What a generated invoke needs, computed once: ports, their contracts, the session."""

    def __init__(self, interpreter: Interpreter, step: InvokeStep):
        self.step = step
        comp = interpreter.wf.components[step.component]
        self.session = interpreter.sessions[step.component]
        self.input_ports = tuple(sorted(step.inputs))
        self.input_names = tuple(step.inputs[port] for port in self.input_ports)
        self.input_contracts = tuple(comp.ports.inputs.get(p) for p in self.input_ports)
        self.output_ports = list(step.outputs)
        self.output_names = tuple(step.outputs.values())
        self.output_contracts = tuple(comp.ports.outputs.get(p) for p in self.output_ports)
        # steps the generated function does not handle: the plain invoke runs them
        self.plain_only = step.component in interpreter.scatter_writers

    def where(self) -> str:
        return f"{format_location(self.step.path)} (invoke {self.step.component!r})"

    def _check(self, names, ports, contracts, values, scope: Symbols, direction: str) -> None:
        for name, port, contract, value in zip(names, ports, contracts, values, strict=True):
            if contract is not None:
                check(name, value, contract, scope, f"{self.where()}, {direction} port {port!r}")

    def refuse_inputs(self, args: list) -> None:
        """A generated input check failed: the plain checks report why."""
        ports, names = self.input_ports, self.input_names
        self._check(names, ports, self.input_contracts, args, Symbols(), "input")
        raise _disagreement(self, "input")

    def refuse_outputs(self, args: list, results: list) -> None:
        scope = Symbols()
        self._check(self.input_names, self.input_ports, self.input_contracts, args, scope, "input")
        ports, names = self.output_ports, self.output_names
        self._check(names, ports, self.output_contracts, results, scope, "output")
        raise _disagreement(self, "output")

    def compile(self, interpreter: Interpreter, plain: Callable) -> Callable:
        """The invoke as one straight-line function of the frame.

        It does what the plain invoke does (read the bound values, check them against the
        ports' contracts, run the session, check and store the outputs, count the call)
        without the per-port loops: each contract check is unrolled into comparisons of the
        value's dtype and extents, with each shape symbol of the component scope held in a
        local variable once a port binds it. When a comparison fails, the plain checks run and
        report the error.
        """
        if self.plain_only:
            return lambda frame: plain(self.step, frame)
        arg = [f"a{i}" for i in range(len(self.input_ports))]
        out = [f"o{i}" for i in range(len(self.output_ports))]
        binding = self.session.binding
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
            "        return plain(step, frame)",
        ]
        if self.session.host_only:  # a device value takes the plain invoke (a counted copy)
            lines += [
                f"    if {' or '.join(f'{a}.__class__ is not ARRAY' for a in arg) or 'False'}:",
                "        return plain(step, frame)",
            ]
        refuse = f"plan.refuse_inputs([{', '.join(arg)}])"
        for a, contract in zip(arg, self.input_contracts, strict=True):
            lines += _contract_lines(a, contract, symbols, namespace, refuse)
        if self.session.contract is not None:  # a runtime contract executor: counted at dispatch
            lines.append("    add('contract_executions', contract_id)")
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
        lines.append("    invoked(component, executor)")
        refuse = f"plan.refuse_outputs([{', '.join(arg)}], [{', '.join(out)}])"
        for o, contract in zip(out, self.output_contracts, strict=True):
            lines += _contract_lines(o, contract, symbols, namespace, refuse)
        lines += [f"    values[{n!r}] = {o}" for o, n in zip(out, self.output_names, strict=True)]
        namespace.update(
            plain=plain,
            step=self.step,
            plan=self,
            session=self.session,
            binding=binding,
            output_ports=self.output_ports,
            executor=self.session.executor,
            invoked=interpreter.counters.invoked,
            component=self.step.component,
            ARRAY=np.ndarray,
            add=interpreter.counters.add,
            contract_id=self.session.contract,
        )
        return generate(lines, "invoke", namespace, f"compiled {self.where()}", self).function


def _contract_lines(var: str, contract, symbols: dict, namespace: dict, refuse: str) -> list:
    """The checks of ``contract`` on local ``var``, as lines of a generated function: dtype,
    rank, fixed extents, and shape symbols (the first port that has a symbol binds it to a
    local, later ones compare; an axis of a request-expanded layout counts rows of ``factor``).
    Any failure runs ``refuse``, which reports it."""
    if contract is None:
        return []
    chk = checker(contract)
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
        f"{plan.where()}: the compiled {direction} checks refused a value the plain checks "
        "accept; this is a bug in the runtime"
    )


def compile_carries(interpreter: Interpreter, step: LoopStep) -> Callable:
    """A loop's carried-cell update as one straight-line function ``store(values, merge,
    bounds, where)``. A cell's value before the update is still under its name (nothing else
    writes a cell's name). While every row is active, a next value that plainly keeps the
    cell's recurrence is stored at once: an invariant cell's with its dtype and shape, a
    bounded cell's within its bound, a uniformly growing cell's grown by its one increment.
    Everything else (per-row growth, inactive-row merges, any doubt) goes through
    :func:`cells.next_value`, which checks it and reports errors."""
    carried = []
    for carry in step.carried:
        cell = interpreter.wf.state[carry.cell]
        carried.append((carry, cell, carry.cell in interpreter.group_cells))
    lines = ["def store(values, merge, bounds, where):", "    if merge is None:"]
    for i, (carry, cell, _) in enumerate(carried):
        keeps = _keeps_recurrence(carry.cell, cell)
        update = f"update(*C{i}, values, None, bounds, where)"
        if keeps is None:
            lines.append(f"        {update}")
            continue
        lines += [
            f"        old = values[{carry.cell!r}]",
            f"        new = values[{carry.next!r}]",
            f"        if (new.dtype is old.dtype or new.dtype == old.dtype) and {keeps}:",
            f"            values[{carry.cell!r}] = new",
            "        else:",
            f"            {update}",
        ]
    lines += ["        return", "    else:"]
    lines += [f"        update(*C{i}, values, merge, bounds, where)" for i in range(len(carried))]
    lines.append("        return")
    namespace = {"update": cells.next_value, **{f"C{i}": c for i, c in enumerate(carried)}}
    label = f"compiled carried cells of the loop at {format_location(step.path)}"
    return generate(lines, "store", namespace, label, interpreter).function


def _keeps_recurrence(name: str, cell) -> str | None:
    """The condition under which ``new`` plainly keeps the recurrence of cell ``name`` after
    ``old`` (same dtype assumed), or None where only :func:`cells.check_recurrence` can say."""
    rec = cell.recurrence
    if isinstance(rec, InvariantRecurrence):
        return "new.shape == old.shape"
    rank = cell.contract.rank
    axis = rec.axis
    if rank is None or not 0 <= axis < rank:
        return None
    others = [f"o[{d}] == n[{d}]" for d in range(rank) if d != axis]
    shapes = f"new.ndim == old.ndim == {rank} and (o := old.shape, n := new.shape)"
    bound = f"bounds[{name!r}]"
    if isinstance(rec, GrowingRecurrence):  # grown by the one increment, at most the max
        grows = f"(b := {bound})[3] is not None and n[{axis}] - o[{axis}] == b[3]"
        return " and ".join([shapes, *others, grows, f"n[{axis}] <= b[2]"])
    # bounded: old and new within the bound
    within = f"o[{axis}] <= (m := {bound}[2]) and n[{axis}] <= m"
    return " and ".join([shapes, *others, within])


def compile_row_emit(
    step: EmitStep, output: WorkflowOutput, where: str, plain: Callable
) -> Callable | None:
    """A per-row ``append`` / ``replace`` emit as one straight-line function of the frame, or
    None where the step's shape is unusual (the plain emit runs it).

    It does what :meth:`OutputStore.emit` does for a per-row output when every enclosing loop
    row is active, the values are host arrays of the declared rank, the value's contract check
    is cached for its signature, and the rows' streams exist: read ``when`` / ``valid_length``
    per row, cut each publishing row's chunk, append or replace. Anything else (the first emit
    of a run, an invalid control value, a length out of range, an inactive row) calls
    ``plain(step, frame)``, which reports every error.
    """
    contract = output.contract
    rank, axis_r = contract.rank, contract.request_axis or 0
    if step.mode not in ("append", "replace") or rank == 0:
        return None
    chunk = None
    if step.valid_length or step.mode == "append":
        chunk = step.axis if step.axis is not None else rank - 1
        if chunk >= rank or chunk == axis_r:
            return None
    request_dim = contract.shape[axis_r] if contract.shape else None
    if isinstance(request_dim, int) and request_dim != 1:
        return None
    row = "".join(":, " * axis_r) + "r:r + 1"
    lines = [
        "def emit(frame):",
        "    store = frame.outputs",
        "    if frame.active_rows:",
        "        return plain(step, frame)",
        "    values = frame.values",
        "    try:",
        f"        v = values[{step.value!r}]",
        *([f"        w = values[{step.when!r}]"] if step.when else []),
        *([f"        n = values[{step.valid_length!r}]"] if step.valid_length else []),
        "    except KeyError:",
        "        return plain(step, frame)",
        f"    if v.__class__ is not ARRAY or v.ndim != {rank}:",
        "        return plain(step, frame)",
        f"    rows = v.shape[{axis_r}]",
    ]
    for var, control, test in (
        ("w", step.when, "w.dtype is not BOOL"),
        ("n", step.valid_length, "n.dtype.kind not in 'iu'"),
    ):
        if control:
            lines += [
                f"    if {var}.__class__ is not ARRAY or {test} or {var}.ndim > 1:",
                "        return plain(step, frame)",
                f"    {var} = {var}.reshape(-1).tolist()",
                f"    if len({var}) != rows:",
                f"        if len({var}) != 1:",
                "            return plain(step, frame)",
                f"        {var} = {var} * rows",
            ]
    lines += [
        "    if store.checked.get(ID) != (v.dtype, v.shape, len(frame.symbols.bound)):",
        "        return plain(step, frame)",
        f"    streams = store.rows.get({step.output!r})",
        "    if streams is None or len(streams) != rows:",
        "        return plain(step, frame)",
    ]
    if step.valid_length:
        lines.append(f"    extent = v.shape[{chunk}]")
    lines.append("    for r in range(rows):")
    if step.when:
        lines += ["        if not w[r]:", "            continue"]
    lines.append(f"        chunk = v[{row}]")
    if step.valid_length:
        cut = "".join(":, " * chunk) + ":k"
        lines += [
            "        k = n[r]",
            "        if k < 0 or k > extent:",
            "            return plain(step, frame)",
            "        if k != extent:",
            f"            chunk = chunk[{cut}]",
        ]
    if step.mode == "append":
        lines += [
            "        previous = streams[r]",
            f"        if previous.__class__ is APPENDED and previous.axis == {chunk}:",
            "            previous.add(chunk, where)",
            "        else:",
            f"            streams[r] = append(previous, chunk, {chunk}, where)",
        ]
    else:
        lines.append("        streams[r] = chunk.copy()")
    namespace = {
        "plain": plain,
        "step": step,
        "where": where,
        "ID": id(step),
        "ARRAY": np.ndarray,
        "BOOL": BOOL,
        "append": _append,
        "APPENDED": _Appended,
    }
    return generate(lines, "emit", namespace, f"compiled {where}", step).function
