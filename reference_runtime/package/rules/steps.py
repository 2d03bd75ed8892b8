"""D rules: steps, SSA visibility and invoke ports.

One walk over the steps in document order, with a scope chain that mirrors the format's
visibility rules (FORMAT.md section 2):

- workflow inputs and ``present_as`` flags are global;
- invoke outputs are visible from the next step on, in the current scope;
- a loop's ``setup`` runs in the enclosing scope; its body is a child scope where the carried
  cells and the iteration value are visible; body values never leave the loop; after the loop
  each carried cell name holds its final value;
- each branch case is a child scope; only phi outputs leave it;
- a ``sequence`` does not open a scope.

The walk records what later rule families need (:class:`Flow`): invocation counts, emits, loops
and the components they invoke, the features that derive capabilities, and the root scope.
"""

from __future__ import annotations

import difflib
from collections import Counter
from dataclasses import dataclass, field

from ... import dtypes
from ...errors import DocPath, format_location
from ..model import (
    BranchStep,
    EmitStep,
    InvokeStep,
    LoopStep,
    SequenceStep,
    SharedLayout,
)
from .context import UNKNOWN, Ctx, VType, is_integer_scalar, layout_name, mismatch, same_layout

BOOL_SCALAR = VType("bool", 0, (), SharedLayout(kind="shared"))


@dataclass
class Def:
    name: str
    vtype: VType
    path: DocPath
    origin: str  # input | presence | invoke | cell | iteration | phi
    guard: str | None = None  # the present_as flag that guards an optional input


class Scope:
    def __init__(self, parent: Scope | None = None, label: str = "workflow"):
        self.parent = parent
        self.label = label
        self.defs: dict[str, Def] = {}

    def lookup(self, name: str) -> Def | None:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.defs:
                return scope.defs[name]
            scope = scope.parent
        return None

    def names(self) -> list[str]:
        out: list[str] = []
        scope: Scope | None = self
        while scope is not None:
            out += list(scope.defs)
            scope = scope.parent
        return out


@dataclass
class LoopInfo:
    step: LoopStep
    components: set[str] = field(default_factory=set)
    children: list[LoopInfo] = field(default_factory=list)


@dataclass
class EmitInfo:
    step: EmitStep
    value: Def | None
    per_row: bool


@dataclass
class Flow:
    root: Scope
    invoke_count: Counter = field(default_factory=Counter)
    invokes: list[InvokeStep] = field(default_factory=list)
    emits: list[EmitInfo] = field(default_factory=list)
    loops: list[LoopInfo] = field(default_factory=list)
    features: set[str] = field(default_factory=set)
    carried: dict[str, list[DocPath]] = field(default_factory=dict)


def _is_bool_flag(t: VType) -> bool | None:
    if t.dtype is None or t.rank is None:
        return None
    return t.dtype == "bool" and t.rank <= 1


def _is_row_control(t: VType, dtype_ok) -> bool | None:
    if t.dtype is None or t.rank is None:
        return None
    return dtype_ok(t.dtype) and t.rank <= 1


class _Walker:
    def __init__(self, ctx: Ctx):
        self.ctx = ctx
        self.wf = ctx.workflow
        self.flow = Flow(root=Scope())
        self.ever: dict[str, Def] = {}
        self.later: dict[str, DocPath] = {}  # every definition site of the steps, by name
        self.carriers: dict[str, DocPath] = {}  # the first loop carrying each cell
        self.loop_stack: list[LoopInfo] = []
        self.setup_of: list[tuple[DocPath, set[str]]] = []  # loops whose setup is being walked
        self.per_row_outputs: dict[str, DocPath] = {}

    # ------------------------------------------------------------------ helpers

    def define(self, scope: Scope, d: Def) -> None:
        previous = scope.lookup(d.name)
        if previous is not None:
            self.ctx.add(
                "D29",
                d.path,
                f"value {d.name!r} is defined twice (first at {format_location(previous.path)}); "
                "workflow values are single-assignment",
                "Give the second definition a new name and read that name afterwards.",
            )
            return
        scope.defs[d.name] = d
        self.ever.setdefault(d.name, d)

    def use(self, scope: Scope, name: str, path: DocPath, guards: frozenset) -> Def | None:
        d = scope.lookup(name)
        if d is None:
            self.ctx.add("D29", path, self._undefined_message(scope, name), self._hint(scope, name))
            return None
        if d.guard is not None and d.guard not in guards:
            self.ctx.add(
                "B13",
                path,
                f"optional input {name!r} is read outside a branch on its presence flag "
                f"{d.guard!r}",
            )
        return d

    def _undefined_message(self, scope: Scope, name: str) -> str:
        wf = self.wf
        if name in self.ever:
            where = format_location(self.ever[name].path)
            return (
                f"{name!r} is not visible here: it is defined at {where}, in a scope that has ended"
            )
        if name in wf.state:
            for loop_path, cells in reversed(self.setup_of):
                if name in cells:
                    return (
                        f"cell {name!r} is not a value in the setup of the loop at "
                        f"{format_location(loop_path)}: setup runs before the carried cells "
                        "are bound (read the cell in the body)"
                    )
            where = self.carriers.get(name)
            return f"cell {name!r} is not a value here: no enclosing loop carries it" + (
                f" (the loop at {format_location(where)} does; its final value is visible "
                "after that loop)"
                if where is not None
                else ""
            )
        if name in self.later:
            return f"{name!r} is read before it is defined (at {format_location(self.later[name])})"
        return f"{name!r} is not defined anywhere in the workflow"

    def _hint(self, scope: Scope, name: str) -> str:
        close = difflib.get_close_matches(name, scope.names(), n=1)
        if close:
            return f"did you mean {close[0]!r}? Define the value before this step."
        return "Define the value before this step, in a scope that reaches it."

    def check_type(self, code, path, actual: Def | None, expected: VType, what: str) -> None:
        if actual is None:
            return
        why = mismatch(actual.vtype, expected)
        if why:
            self.ctx.add(
                code, path, f"{what}: value {actual.name!r} is {actual.vtype.describe()} ({why})"
            )

    # ------------------------------------------------------------------ walk

    def run(self) -> Flow:
        wf = self.wf
        root = self.flow.root
        base = ("pipeline", "workflow", "inputs")
        for name, inp in wf.inputs.items():
            root.defs[name] = Def(name, VType.of_contract(inp.contract), (*base, name), "input")
            self.ever[name] = root.defs[name]
        for name, inp in wf.inputs.items():
            flag = inp.present_as
            if not flag:
                continue
            path = (*base, name, "present_as")
            if flag in root.defs:
                self.ctx.add(
                    "B12",
                    path,
                    f"present_as name {flag!r} clashes with another value "
                    f"({format_location(root.defs[flag].path)})",
                )
                continue
            root.defs[name].guard = flag
            root.defs[flag] = Def(flag, BOOL_SCALAR, path, "presence")
            self.ever[flag] = root.defs[flag]
        self.collect(wf.steps, ("pipeline", "workflow", "steps"))
        self.steps(wf.steps, root, ("pipeline", "workflow", "steps"), frozenset())
        self.finish()
        return self.flow

    def collect(self, steps, path: DocPath) -> None:
        """Note every name the steps define (to tell a late definition from a missing one)."""
        for i, step in enumerate(steps):
            self.collect_one(step, (*path, i))

    def collect_one(self, step, here: DocPath) -> None:
        if isinstance(step, InvokeStep):
            for port, value in step.outputs.items():
                self.later.setdefault(value, (*here, "outputs", port))
        elif isinstance(step, LoopStep):
            self.collect(step.setup, (*here, "setup"))
            for carry in step.carried:
                self.carriers.setdefault(carry.cell, here)
            if step.iteration is not None:
                self.later.setdefault(step.iteration.value, (*here, "iteration", "value"))
            self.collect(step.steps, (*here, "steps"))
        elif isinstance(step, BranchStep):
            for key, arm in step.cases.items():
                self.collect_one(arm, (*here, "cases", key))
            if step.default is not None:
                self.collect_one(step.default, (*here, "default"))
            for name in step.outputs:
                self.later.setdefault(name, (*here, "outputs", name))
        elif isinstance(step, SequenceStep):
            self.collect(step.steps, (*here, "steps"))

    def steps(self, steps, scope: Scope, path: DocPath, guards: frozenset) -> None:
        for i, step in enumerate(steps):
            self.step(step, scope, (*path, i), guards)

    def step(self, step, scope: Scope, here: DocPath, guards: frozenset) -> None:
        if isinstance(step, InvokeStep):
            self.invoke(step, scope, here, guards)
        elif isinstance(step, LoopStep):
            self.loop(step, scope, here, guards)
        elif isinstance(step, BranchStep):
            self.branch(step, scope, here, guards)
        elif isinstance(step, EmitStep):
            self.emit(step, scope, here, guards)
        elif isinstance(step, SequenceStep):
            self.steps(step.steps, scope, (*here, "steps"), guards)

    # ------------------------------------------------------------------ invoke

    def invoke(self, step: InvokeStep, scope: Scope, path: DocPath, guards: frozenset) -> None:
        ctx = self.ctx
        name = step.component
        comp = ctx.component(name)
        self.flow.invoke_count[name] += 1
        self.flow.invokes.append(step)
        for info in self.loop_stack:
            info.components.add(name)
        if comp is None:
            ctx.add(
                "D26",
                (*path, "component"),
                f"component {name!r} is not declared",
                self._component_hint(name),
            )
        bound: dict[str, Def | None] = {}
        for port, value in step.inputs.items():
            bound[port] = self.use(scope, value, (*path, "inputs", port), guards)
        if comp is not None:
            self.check_ports(step, comp, bound, path)
        for port, value in step.outputs.items():
            vtype = UNKNOWN
            if comp is not None:
                vtype = ctx.port_type(name, port, "outputs") or UNKNOWN
                if comp.implementation.kind == "binding" and comp.contract is None:
                    source = bound.get(port)
                    vtype = source.vtype if source is not None else UNKNOWN
            self.define(scope, Def(value, vtype, (*path, "outputs", port), "invoke"))

    def _component_hint(self, name: str) -> str:
        close = difflib.get_close_matches(name, list(self.wf.components), n=1)
        prefix = f"did you mean {close[0]!r}? " if close else ""
        return prefix + "Declare the component under pipeline.workflow.components."

    def check_ports(self, step: InvokeStep, comp, bound: dict, path: DocPath) -> None:
        ctx = self.ctx
        name = step.component
        kind = comp.implementation.kind
        declared_in = comp.ports.inputs or None  # empty: the graph's own ports
        declared_out = comp.ports.outputs or None
        graph = ctx.graphs.get(name)
        in_names = ctx.port_names(name, "inputs")
        out_names = ctx.port_names(name, "outputs")
        where_in = "declared input ports" if declared_in is not None else "graph inputs"
        where_out = "declared output ports" if declared_out is not None else "graph outputs"
        if in_names is not None:
            for port in step.inputs:
                if port not in in_names:
                    ctx.add(
                        "D28",
                        (*path, "inputs", port),
                        f"component {name!r} has no input port {port!r} ({where_in}: "
                        f"{', '.join(in_names) or 'none'})",
                    )
        if out_names is not None:
            for port in step.outputs:
                if port not in out_names:
                    ctx.add(
                        "D28",
                        (*path, "outputs", port),
                        f"component {name!r} has no output port {port!r} ({where_out}: "
                        f"{', '.join(out_names) or 'none'})",
                    )
        # Required inputs: declared non-optional ports, or the graph's non-initializer inputs.
        if declared_in is not None:
            required = [p for p, c in declared_in.items() if not c.optional]
        elif graph is not None and kind == "onnx":
            required = graph.required_inputs
        else:
            required = []
        missing = [p for p in required if p not in step.inputs]
        if missing:
            ctx.add(
                "D28",
                (*path, "inputs"),
                f"invoke of {name!r} leaves required input port(s) unbound: {', '.join(missing)}",
                "Bind every required port (declare a port `optional: true` to allow "
                "leaving it unbound).",
            )
        if declared_out is not None:
            unbound = [
                p for p, c in declared_out.items() if not c.optional and p not in step.outputs
            ]
            if unbound:
                ctx.add(
                    "D28",
                    (*path, "outputs"),
                    f"invoke of {name!r} leaves declared output port(s) unbound: "
                    f"{', '.join(unbound)}",
                    "Bind every declared output port to a value (declare a port `optional: true` "
                    "to allow leaving it unbound).",
                )
        for port, d in bound.items():
            expected = ctx.port_type(name, port, "inputs")
            if d is not None and expected is not None:
                self.check_type(
                    "D28",
                    (*path, "inputs", port),
                    d,
                    expected,
                    f"input port {port!r} of {name!r} expects {expected.describe()}",
                )
        if kind == "binding" and comp.contract is None:
            for port in step.outputs:
                if port not in step.inputs:
                    ctx.add(
                        "D28",
                        (*path, "outputs", port),
                        f"binding component {name!r} copies input port {port!r} to the output "
                        f"port of the same name, but no input {port!r} is bound",
                    )

    # ------------------------------------------------------------------ loop

    def loop(self, step: LoopStep, scope: Scope, path: DocPath, guards: frozenset) -> None:
        ctx, wf = self.ctx, self.wf
        info = LoopInfo(step)
        (self.loop_stack[-1].children if self.loop_stack else self.flow.loops).append(info)
        self.flow.features.add("loop")
        if step.iteration is not None:
            self.flow.features.add("iteration")
        if step.carried:
            self.flow.features.add("linear_effects")
        self.loop_stack.append(info)
        self.setup_of.append((path, {c.cell for c in step.carried}))
        self.steps(step.setup, scope, (*path, "setup"), guards)
        self.setup_of.pop()
        self.loop_stack.pop()

        mi = self.use(scope, step.max_iterations, (*path, "max_iterations"), guards)
        if mi is not None and is_integer_scalar(mi.vtype) is False:
            ctx.add(
                "D30",
                (*path, "max_iterations"),
                f"max_iterations {mi.name!r} is {mi.vtype.describe()}, not an integer [] or [1]",
            )

        carried: dict[str, object] = {}
        for i, carry in enumerate(step.carried):
            cpath = (*path, "carried", i)
            cell = wf.state.get(carry.cell)
            if cell is None:
                ctx.add("D26", (*cpath, "cell"), f"cell {carry.cell!r} is not declared under state")
                continue
            if carry.cell in carried:
                ctx.add(
                    "D29", (*cpath, "cell"), f"cell {carry.cell!r} is carried twice by this loop"
                )
                continue
            carried[carry.cell] = cell
            self.flow.carried.setdefault(carry.cell, []).append(cpath)
            expected = VType.of_contract(cell.contract)
            cell_path = ("pipeline", "workflow", "state", carry.cell)
            d = scope.lookup(cell.initializer)
            if d is None:
                ctx.add(
                    "D33",
                    (*cell_path, "initializer"),
                    f"initializer {cell.initializer!r} of cell {carry.cell!r} is not visible "
                    f"where the loop at {format_location(path)} starts",
                )
            else:
                self.use(scope, cell.initializer, (*cell_path, "initializer"), guards)
                self.check_type(
                    "D33",
                    (*cell_path, "initializer"),
                    d,
                    expected,
                    f"initializer of cell {carry.cell!r}",
                )
            if carry.initial is not None:
                d = scope.lookup(carry.initial)
                if d is None:
                    ctx.add(
                        "D33",
                        (*cpath, "initial"),
                        f"initial value {carry.initial!r} is not visible where the loop starts",
                    )
                else:
                    self.use(scope, carry.initial, (*cpath, "initial"), guards)
                    self.check_type(
                        "D33",
                        (*cpath, "initial"),
                        d,
                        expected,
                        f"initial value of cell {carry.cell!r}",
                    )
            self.recurrence_bounds(carry.cell, cell, scope)

        cw_path = (*path, "continue_when")
        if step.continue_when in carried:
            cw_type = VType.of_contract(carried[step.continue_when].contract)
        else:
            d = scope.lookup(step.continue_when)
            if d is None:
                ctx.add(
                    "D32",
                    cw_path,
                    f"continue_when {step.continue_when!r} is not visible before the loop "
                    "body (use a value defined before the loop, or a carried cell)",
                )
                cw_type = UNKNOWN
            else:
                self.use(scope, step.continue_when, cw_path, guards)
                cw_type = d.vtype
        if _is_bool_flag(cw_type) is False:
            ctx.add(
                "D32",
                cw_path,
                f"continue_when {step.continue_when!r} is {cw_type.describe()}, not a bool of "
                "rank <= 1",
            )

        body = Scope(scope, "loop body")
        for cell_name, cell in carried.items():
            previous = scope.lookup(cell_name)
            if previous is not None:
                where = format_location(previous.path)
                ctx.add(
                    "D29",
                    (*self.flow.carried[cell_name][-1], "cell"),
                    f"cell {cell_name!r} is already carried at {where}, by a loop whose scope "
                    "reaches this one; a cell is carried by at most one loop per scope"
                    if previous.origin == "cell"
                    else f"carried cell {cell_name!r} clashes with a visible value defined at "
                    f"{where}",
                )
            body.defs[cell_name] = Def(
                cell_name,
                VType.of_contract(cell.contract),
                self.flow.carried[cell_name][-1],
                "cell",
            )
        if step.iteration is not None:
            self.iteration(step, body, path)

        self.loop_stack.append(info)
        self.steps(step.steps, body, (*path, "steps"), guards)
        self.loop_stack.pop()

        for i, carry in enumerate(step.carried):
            cell = carried.get(carry.cell)
            if cell is None:
                continue
            npath = (*path, "carried", i, "next")
            d = body.lookup(carry.next)
            if d is None:
                ctx.add(
                    "D29",
                    npath,
                    f"next value {carry.next!r} of cell {carry.cell!r} is not defined by the "
                    "loop body",
                    self._hint(body, carry.next),
                )
                continue
            self.use(body, carry.next, npath, guards)
            self.check_type(
                "D33",
                npath,
                d,
                VType.of_contract(cell.contract),
                f"next value of cell {carry.cell!r}",
            )

        for cell_name, cell in carried.items():
            if scope.lookup(cell_name) is None:
                self.define(
                    scope,
                    Def(
                        cell_name,
                        VType.of_contract(cell.contract),
                        self.flow.carried[cell_name][-1],
                        "cell",
                    ),
                )

    def iteration(self, step: LoopStep, body: Scope, path: DocPath) -> None:
        ctx = self.ctx
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
        self.define(
            body, Def(it.value, VType.of_contract(c), (*path, "iteration", "value"), "iteration")
        )

    def recurrence_bounds(self, cell_name: str, cell, scope: Scope) -> None:
        rec = cell.recurrence
        rpath = ("pipeline", "workflow", "state", cell_name, "recurrence")
        for key in ("increment", "max"):
            name = getattr(rec, key, None)
            if name is None:
                continue
            d = scope.lookup(name)
            if d is None:
                self.ctx.add(
                    "D34",
                    (*rpath, key),
                    f"recurrence {key} {name!r} of cell {cell_name!r} is not visible at loop entry",
                )
            elif is_integer_scalar(d.vtype) is False and not (
                key == "increment" and cell.service_group is not None
            ):
                self.ctx.add(
                    "D34",
                    (*rpath, key),
                    f"recurrence {key} {name!r} is {d.vtype.describe()}, not an integer scalar",
                )

    # ------------------------------------------------------------------ branch

    def branch(self, step: BranchStep, scope: Scope, path: DocPath, guards: frozenset) -> None:
        ctx = self.ctx
        self.flow.features.add("branch")
        ppath = (*path, "predicate")
        pred = self.use(scope, step.predicate, ppath, guards)
        pdtype = pred.vtype.dtype if pred else None
        if pred is not None and pred.vtype.dtype is not None:
            t = pred.vtype
            ok_dtype = t.dtype == "bool" or t.dtype == "int64"
            # a rank-one predicate has the static shape [1] (a contract must say so)
            ok_shape = t.rank == 0 or (
                t.rank == 1 and (t.dims[0] == 1 if t.dims is not None else t.layout is None)
            )
            if not ok_dtype or not ok_shape:
                ctx.add(
                    "D35",
                    ppath,
                    f"predicate {step.predicate!r} is {t.describe()}; a branch needs one bool "
                    "or int64 value of shape [] or [1]",
                )
        seen_ints: dict[int, str] = {}
        for key in step.cases:
            is_bool_key = key in ("true", "false")
            if pdtype == "bool" and not is_bool_key or pdtype == "int64" and is_bool_key:
                ctx.add(
                    "D35",
                    (*path, "cases", key),
                    f"case {key!r} can never match the {pdtype} predicate {step.predicate!r}",
                )
            elif not is_bool_key and int(key) in seen_ints:
                ctx.add(
                    "D35",
                    (*path, "cases", key),
                    f"case {key!r} matches the same value as case {seen_ints[int(key)]!r}",
                )
            if not is_bool_key:
                seen_ints.setdefault(int(key), key)

        case_scopes: dict[str, Scope] = {}
        case_cells: dict[str, set[str]] = {}
        emitting = False
        arms = [(k, v, (*path, "cases", k)) for k, v in step.cases.items()]
        if step.default is not None:
            arms.append(("default", step.default, (*path, "default")))
        case_guards: dict[str, frozenset] = {}
        for key, arm, apath in arms:
            child = Scope(scope, f"case {key}")
            g = guards
            if key == "true" and pred is not None and pred.origin == "presence":
                g = guards | {pred.name}
            case_guards[key] = g
            before_carried = {c: len(p) for c, p in self.flow.carried.items()}
            before_emits = len(self.flow.emits)
            self.step(arm, child, apath, g)
            emitting |= len(self.flow.emits) > before_emits
            case_scopes[key] = child
            case_cells[key] = {
                c for c, p in self.flow.carried.items() if len(p) > before_carried.get(c, 0)
            }
        if emitting:
            self.flow.features.add("linear_effects")

        for name, phi in step.outputs.items():
            opath = (*path, "outputs", name)
            for key in step.cases:
                if key not in phi.cases:
                    ctx.add(
                        "D36", (*opath, "cases"), f"phi {name!r} names no source for case {key!r}"
                    )
            for key in phi.cases:
                if key not in step.cases:
                    ctx.add(
                        "D36",
                        (*opath, "cases", key),
                        f"phi {name!r} names a source for case {key!r}, which the branch "
                        "does not have",
                    )
            if step.default is not None and phi.default is None:
                ctx.add("D36", opath, f"phi {name!r} names no source for the default case")
            if step.default is None and phi.default is not None:
                ctx.add(
                    "D36",
                    (*opath, "default"),
                    f"phi {name!r} names a default source but the branch has no default",
                )
            sources = [(k, v, (*opath, "cases", k)) for k, v in phi.cases.items()]
            if phi.default is not None:
                sources.append(("default", phi.default, (*opath, "default")))
            first: Def | None = None
            for key, src, spath in sources:
                child = case_scopes.get(key)
                if child is None:
                    continue
                d = child.lookup(src)
                if d is None:
                    ctx.add(
                        "D36",
                        spath,
                        f"phi {name!r}: {src!r} is not visible at the end of case {key!r}",
                    )
                    continue
                self.use(child, src, spath, case_guards.get(key, guards))  # B13 for a phi too
                if first is None:
                    first = d
                elif why := mismatch(d.vtype, first.vtype):
                    ctx.add(
                        "D36",
                        spath,
                        f"phi {name!r}: sources disagree; {src!r} has {why} (as {first.name!r})",
                    )
            self.define(scope, Def(name, first.vtype if first else UNKNOWN, opath, "phi"))

        for key, cells in case_cells.items():
            for cell_name in cells:
                cell = self.wf.state.get(cell_name)
                if cell is None or cell.scope != "session":
                    continue
                # The session store keeps the value the cell's own name holds at the end, so
                # the phi exporting it must be named after the cell.
                sources = {
                    out: phi.cases.get(key) if key != "default" else phi.default
                    for out, phi in step.outputs.items()
                }
                if sources.get(cell_name) == cell_name:
                    continue
                others = [out for out, src in sources.items() if src == cell_name]
                arm = (*path, "cases", key) if key != "default" else (*path, "default")
                ctx.add(
                    "D37",
                    arm,
                    f"case {key!r} updates session cell {cell_name!r} but "
                    + (
                        f"exports it only as {others[0]!r}, so the cell's final value is lost"
                        if others
                        else "no phi output exports it"
                    ),
                    f"Add a phi output named {cell_name!r} whose case {key!r} source is "
                    f"{cell_name!r}.",
                )

    # ------------------------------------------------------------------ emit

    def emit(self, step: EmitStep, scope: Scope, path: DocPath, guards: frozenset) -> None:
        ctx, wf = self.ctx, self.wf
        features = self.flow.features
        features.add("emit")
        if step.mode == "event":
            features.add("event")
        if step.valid_length is not None:
            features.add("valid_length")
        if self.loop_stack:
            features.add("linear_effects")
        value = self.use(scope, step.value, (*path, "value"), guards)
        output = wf.outputs.get(step.output)
        if output is None:
            close = difflib.get_close_matches(step.output, list(wf.outputs), n=1)
            ctx.add(
                "D38",
                (*path, "output"),
                f"output {step.output!r} is not declared",
                (f"did you mean {close[0]!r}? " if close else "")
                + "Declare it under pipeline.workflow.outputs.",
            )
        per_row = step.when is not None or step.valid_length is not None
        if step.when is not None:
            d = self.use(scope, step.when, (*path, "when"), guards)
            if d is not None and _is_row_control(d.vtype, lambda t: t == "bool") is False:
                ctx.add(
                    "D38",
                    (*path, "when"),
                    f"when {d.name!r} is {d.vtype.describe()}, not a bool of rank <= 1",
                )
        if step.valid_length is not None:
            d = self.use(scope, step.valid_length, (*path, "valid_length"), guards)
            if d is not None and _is_row_control(d.vtype, lambda t: t in dtypes.INTEGER) is False:
                ctx.add(
                    "D38",
                    (*path, "valid_length"),
                    f"valid_length {d.name!r} is {d.vtype.describe()}, not an integer of rank <= 1",
                )
        if value is not None:
            t = value.vtype
            if per_row and t.layout is not None and t.request_axis is None:
                ctx.add(
                    "D38",
                    (*path, "value"),
                    f"per-row emit of {value.name!r}, whose layout {layout_name(t.layout)} "
                    "has no request axis",
                )
            if step.valid_length is not None and t.rank == 0:
                ctx.add(
                    "D39",
                    (*path, "value"),
                    f"valid_length emit of {value.name!r}, which has rank 0",
                )
            if output is not None:
                expected = VType.of_contract(output.contract)
                problems = _dtype_rank_mismatch(t, expected)
                for why in problems:
                    ctx.add(
                        "D39",
                        (*path, "value"),
                        f"emit of {value.name!r} into {step.output!r}: the value has {why}",
                    )
                if not problems and t.dims is not None and expected.dims is not None:
                    # fixed extents must agree, except on a valid_length emit's prefix axis
                    prefix = t.rank - 1 if step.valid_length is not None else None
                    for axis, (a, e) in enumerate(zip(t.dims, expected.dims, strict=False)):
                        if axis != prefix and isinstance(a, int) and isinstance(e, int) and a != e:
                            ctx.add(
                                "D39",
                                (*path, "value"),
                                f"emit of {value.name!r} into {step.output!r}: axis {axis} is "
                                f"{a} but the output's contract fixes it to {e}",
                            )
                # Every emit's layout must equal its output's, so emits into one output can
                # never mix layouts: one check covers both halves of format rule 40.
                if not same_layout(t.layout, output.contract.batch_layout):
                    ctx.add(
                        "D40",
                        (*path, "value"),
                        f"value {value.name!r} has layout {layout_name(t.layout)} but output "
                        f"{step.output!r} is {layout_name(output.contract.batch_layout)}",
                    )
            if (
                wf.serving is not None
                and isinstance(t.layout, SharedLayout)
                and t.rank is not None
                and t.rank > 0
            ):
                ctx.add(
                    "D42",
                    (*path, "value"),
                    f"serving workflows publish per-row values; {value.name!r} is a shared "
                    f"tensor of rank {t.rank}",
                )
        if per_row and step.output not in self.per_row_outputs:
            self.per_row_outputs[step.output] = path
        self.flow.emits.append(EmitInfo(step, value, per_row))

    def finish(self) -> None:
        for name in self.per_row_outputs:
            output = self.wf.outputs.get(name)
            if output is None:
                continue
            layout = output.contract.batch_layout
            if layout.kind != "request_aligned":
                self.ctx.add(
                    "D41",
                    ("pipeline", "workflow", "outputs", name, "contract", "batch_layout"),
                    f"output {name!r} receives per-row emits (when / valid_length) but is "
                    f"{layout_name(layout)}, not request_aligned",
                )


def _dtype_rank_mismatch(actual: VType, expected: VType) -> list[str]:
    out = []
    if actual.dtype and expected.dtype and actual.dtype != expected.dtype:
        out.append(f"dtype {actual.dtype}, the output {expected.dtype}")
    elif actual.rank is not None and expected.rank is not None and actual.rank != expected.rank:
        out.append(f"rank {actual.rank}, the output rank {expected.rank}")
    return out


def check(ctx: Ctx) -> None:
    if ctx.workflow is None:
        return
    ctx.flow = _Walker(ctx).run()
