"""Plans and runs ONNX graphs with the registered kernels.

A :class:`Plan` is built once per graph (and once per subgraph): every node's kernel is chosen
by (domain, op type, opset), its attributes decoded, its subgraphs planned, nodes whose inputs
are all constants folded, and for every value the node after which it is no longer needed, so
values are freed after their last use. Anything the executor does not implement is collected
while planning and refused as a whole.

On its first run a plan is compiled into one Python function (see :class:`_Codegen`, and
``plan.source`` to read it): the nodes in order (ONNX graphs are topologically sorted), one
kernel call each, with the values in local variables. On tiny graphs, where the cost of a node
is the Python around its kernel, this keeps that cost close to the kernel call itself. Each
node's outputs are checked against the dtypes ONNX shape inference gave them, so a kernel can
never let a float64 (or any other dtype) creep in unnoticed.
"""

from __future__ import annotations

import re
import string
import threading
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ...codegen import generate
from ...errors import RunError
from . import dtypes
from .registry import Kernel, Unsupported, _load_kernels, lookup

# Ops whose result is not a function of their inputs: never folded.
NONDETERMINISTIC = frozenset(
    {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial",
     "Bernoulli", "Dropout"}
)  # fmt: skip


@dataclass
class Problem:
    """One reason the executor refuses a graph."""

    node: str
    op: str
    reason: str


class NodeView:
    """What a kernel sees: attributes, the array module, subgraphs, the node's identity."""

    __slots__ = ("proto", "name", "op_type", "domain", "attrs", "xp", "opset", "subgraphs",
                 "_env", "n_outputs", "plan_context")  # fmt: skip

    def __init__(self, proto: onnx.NodeProto, xp, opset: int):
        self.proto = proto
        self.name = proto.name or proto.op_type
        self.op_type = proto.op_type
        self.domain = proto.domain
        self.xp = xp
        self.opset = opset
        self.attrs: dict = {}
        self.subgraphs: dict[str, Plan | list[Plan]] = {}
        # For nodes that run subgraphs: the enclosing values those subgraphs read, by name
        # (set just before the node runs). Per thread: runs on several threads share a plan.
        self._env = threading.local()
        self.n_outputs = len(proto.output)

    @property
    def env(self):
        return getattr(self._env, "value", None)

    @env.setter
    def env(self, value) -> None:
        self._env.value = value

    def attr(self, name: str, default=None):
        return self.attrs.get(name, default)

    def run_subgraph(self, attr: str, inputs: list) -> list:
        """Run the subgraph held by attribute ``attr`` with positional inputs; outer values come
        from the enclosing scope."""
        return self.subgraphs[attr].run_positional(inputs, outer=self.env)


@dataclass
class PlannedNode:
    view: NodeView
    kernel: Kernel | None
    function: Plan | None  # a model-local function call
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    expected: tuple  # per output: the numpy dtype shape inference assigned, or None
    free: tuple[str, ...] = ()


@dataclass
class Context:
    """What planning needs: the model's opsets, local functions, inferred dtypes, device."""

    opsets: dict[str, int]
    functions: dict[tuple[str, str], onnx.FunctionProto]
    value_types: dict[str, int]
    xp: object
    cuda: bool
    problems: list[Problem] = field(default_factory=list)


def decode_attribute(attr: onnx.AttributeProto, ctx: Context, view: NodeView, outer: set[str]):
    kind = attr.type
    A = onnx.AttributeProto
    if kind == A.GRAPH:
        plan = Plan(attr.g, ctx, outer)
        view.subgraphs[attr.name] = plan
        return plan
    if kind == A.GRAPHS:
        plans = [Plan(g, ctx, outer) for g in attr.graphs]
        view.subgraphs[attr.name] = plans
        return plans
    if kind == A.TENSOR:
        return numpy_helper.to_array(attr.t)
    if kind == A.TENSORS:
        return [numpy_helper.to_array(t) for t in attr.tensors]
    if kind in (A.SPARSE_TENSOR, A.SPARSE_TENSORS, A.TYPE_PROTO, A.TYPE_PROTOS):
        raise Unsupported(f"attribute {attr.name!r} of type {A.AttributeType.Name(kind)}")
    value = helper.get_attribute_value(attr)
    if kind == A.STRING:
        return value.decode("utf-8")
    if kind == A.STRINGS:
        return [v.decode("utf-8") for v in value]
    return list(value) if kind in (A.INTS, A.FLOATS) else value


class Plan:
    def __init__(self, graph: onnx.GraphProto, ctx: Context, outer: set[str] = frozenset()):
        self.ctx = ctx
        self.inputs = [v.name for v in graph.input]
        self.outputs = [v.name for v in graph.output]
        self.initializers: dict[str, object] = {}
        for tensor in graph.initializer:
            self.initializers[tensor.name] = self._constant(tensor)
        if graph.sparse_initializer:
            ctx.problems.append(Problem(graph.name, "-", "sparse initializers are not supported"))
        local = set(self.inputs) | set(self.initializers)
        for node in graph.node:
            local |= {o for o in node.output if o}
        visible = set(outer) | local
        self.name = graph.name
        self.nodes: list[PlannedNode] = []
        self._compiled: _Compiled | None = None  # built on the first run (after folding)
        self.outer_refs: set[str] = set()
        for proto in graph.node:
            planned = self._plan_node(proto, visible)
            if planned is None:
                continue
            self.nodes.append(planned)
            for name in planned.inputs:
                if name and name not in local:
                    self.outer_refs.add(name)
            for sub in planned.view.subgraphs.values():
                for plan in sub if isinstance(sub, list) else [sub]:
                    self.outer_refs |= {n for n in plan.outer_refs if n not in local}
        if not ctx.problems:
            self._fold_constants()
        self._plan_freeing()

    def _constant(self, tensor: onnx.TensorProto):
        if tensor.data_type not in dtypes.NUMPY or (
            self.ctx.cuda and tensor.data_type in dtypes.CUDA_UNSUPPORTED
        ):
            self.ctx.problems.append(
                Problem(tensor.name, "initializer", f"dtype {dtypes.name(tensor.data_type)}")
            )
            return None
        return self.ctx.xp.asarray(numpy_helper.to_array(tensor))

    def _plan_node(self, proto: onnx.NodeProto, visible: set[str]) -> PlannedNode | None:
        ctx = self.ctx
        domain = "" if proto.domain in ("", "ai.onnx") else proto.domain
        opset = ctx.opsets.get(domain)
        view = NodeView(proto, ctx.xp, opset or 0)
        where = proto.name or f"<{proto.op_type} -> {', '.join(proto.output)}>"
        label = f"{domain or 'ai.onnx'}::{proto.op_type}"
        kernel = function = None
        try:
            for attr in proto.attribute:
                if attr.ref_attr_name:
                    raise Unsupported(f"attribute {attr.name!r} refers to an enclosing function")
                view.attrs[attr.name] = decode_attribute(attr, ctx, view, visible)
            fproto = ctx.functions.get((proto.domain, proto.op_type))
            if fproto is not None:
                function = _instantiate(fproto, proto, ctx)
            else:
                if opset is None:
                    raise Unsupported(
                        f"the model imports no opset for domain {domain or 'ai.onnx'!r}"
                    )
                kernel = lookup(domain, proto.op_type, opset)
                if kernel.check is not None:
                    kernel.check(view)
        except Unsupported as exc:
            ctx.problems.append(Problem(where, f"{label} (opset {opset})", str(exc)))
            return None
        expected = []
        for name in proto.output:
            elem = ctx.value_types.get(name)
            if elem is not None and elem not in dtypes.NUMPY:
                ctx.problems.append(
                    Problem(where, label, f"output {name!r} has dtype {dtypes.name(elem)}")
                )
            expected.append(dtypes.NUMPY.get(elem) if elem else None)
        return PlannedNode(
            view, kernel, function, tuple(proto.input), tuple(proto.output), tuple(expected)
        )

    def _plan_freeing(self) -> None:
        keep = set(self.outputs)
        last: dict[str, int] = {}
        for i, node in enumerate(self.nodes):
            uses = [n for n in node.inputs if n]
            for sub in node.view.subgraphs.values():
                for plan in sub if isinstance(sub, list) else [sub]:
                    uses += list(plan.outer_refs)
            for name in uses:
                last[name] = i
            for name in node.outputs:
                last.setdefault(name, i)  # produced but never read: free at once
        by_node: dict[int, list[str]] = {}
        for name, i in last.items():
            if name not in keep:
                by_node.setdefault(i, []).append(name)
        for i, node in enumerate(self.nodes):
            node.free = tuple(by_node.get(i, ()))

    # ------------------------------------------------------------------ running

    def run(self, feeds: dict, outer=None) -> dict:
        if outer is None and self.ctx.xp is np:
            # ONNX defines IEEE results (log(0) = -inf, 0/0 = NaN): they are not warnings here.
            with np.errstate(all="ignore"):
                return self._run(feeds, outer)
        return self._run(feeds, outer)

    def _run(self, feeds: dict, outer=None) -> dict:
        compiled = self._compiled or self._compile()
        try:
            return compiled.function(feeds, outer)
        except RunError:
            raise
        except Exception as exc:
            node = compiled.failed_node(exc)
            if node is None:
                raise
            view = node.view
            raise RunError(
                "C86",
                f"native kernel {view.op_type} (node {view.name!r}) failed: "
                f"{type(exc).__name__}: {exc}",
                hint="Run the component with --executor ort to compare.",
            ) from exc

    @property
    def source(self) -> str:
        """The Python source of this plan's run function (for reading and debugging)."""
        return (self._compiled or self._compile()).source

    def _compile(self) -> _Compiled:
        self._compiled = _Codegen(self).compile()
        return self._compiled

    def _fold_constants(self) -> None:
        """Run, once at load, every deterministic node whose inputs are all constants; its
        outputs become constants of the plan (a graph's Constant nodes, shape arithmetic on
        initializers...)."""
        kept = []
        inputs = set(self.inputs)
        for node in self.nodes:
            foldable = (
                node.kernel is not None
                and not node.view.subgraphs
                and node.view.op_type not in NONDETERMINISTIC
                # An initializer that is also a graph input is only a default: a feed may
                # replace it.
                and all(not n or (n in self.initializers and n not in inputs) for n in node.inputs)
            )
            if foldable:
                args = [self.initializers[n] if n else None for n in node.inputs]
                try:
                    with np.errstate(all="ignore"):
                        results = node.kernel.fn(node.view, *args)
                except Exception:  # noqa: BLE001 - it fails at run time, with its diagnostic
                    kept.append(node)
                    continue
                if not isinstance(results, tuple | list):
                    results = (results,)
                results = [_as_array(node.view.xp, value) for value in results]
                if any(
                    want is not None and value.dtype != want
                    for value, want in zip(results, node.expected, strict=False)
                ):
                    kept.append(node)  # refused at run time, naming the dtype
                    continue
                for name, value in zip(node.outputs, results, strict=False):
                    if name:
                        self.initializers[name] = value
                continue
            kept.append(node)
        self.nodes = kept

    def run_positional(self, inputs: list, outer=None) -> list:
        feeds = {
            name: value
            for name, value in zip(self.inputs, inputs, strict=False)
            if value is not None
        }
        results = self.run(feeds, outer)
        return [results[name] for name in self.outputs]


def _instantiate(fproto: onnx.FunctionProto, call: onnx.NodeProto, ctx: Context) -> Plan:
    """A model-local function call site as a plan of the function body, with the caller's
    attribute values substituted for the body's attribute references."""
    given = {a.name: a for a in call.attribute}
    defaults = {a.name: a for a in fproto.attribute_proto}
    nodes = []
    for node in fproto.node:
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        del copy.attribute[:]
        for attr in node.attribute:
            if attr.ref_attr_name:
                source = given.get(attr.ref_attr_name) or defaults.get(attr.ref_attr_name)
                if source is None:
                    continue
                resolved = onnx.AttributeProto()
                resolved.CopyFrom(source)
                resolved.name = attr.name
                copy.attribute.append(resolved)
            else:
                copy.attribute.append(attr)
        nodes.append(copy)
    graph = helper.make_graph(
        nodes,
        fproto.name,
        [helper.make_value_info(n, onnx.TypeProto()) for n in fproto.input],
        [helper.make_value_info(n, onnx.TypeProto()) for n in fproto.output],
    )
    body_opsets = {
        ("" if o.domain == "ai.onnx" else o.domain): o.version for o in fproto.opset_import
    }
    sub = Context({**ctx.opsets, **body_opsets}, ctx.functions, {}, ctx.xp, ctx.cuda, ctx.problems)
    return Plan(graph, sub)


def plan_model(model: onnx.ModelProto, xp, cuda: bool = False) -> tuple[Plan, list[Problem]]:
    """Plan a whole model; returns the plan and every reason to refuse it."""
    _load_kernels()
    opsets = {("" if o.domain == "ai.onnx" else o.domain): o.version for o in model.opset_import}
    functions = {(f.domain, f.name): f for f in model.functions}
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=False)
    except Exception:  # inference is advisory: kernels still run, dtypes are checked where known
        inferred = model
    types: dict[str, int] = {}
    for info in (*inferred.graph.value_info, *inferred.graph.output, *inferred.graph.input):
        if info.type.HasField("tensor_type") and info.type.tensor_type.elem_type:
            types[info.name] = info.type.tensor_type.elem_type
    ctx = Context(opsets, functions, types, xp, cuda)
    for info in (*model.graph.input, *model.graph.output):
        elem = info.type.tensor_type.elem_type if info.type.HasField("tensor_type") else 0
        if elem and (elem not in dtypes.NUMPY or (cuda and elem in dtypes.CUDA_UNSUPPORTED)):
            ctx.problems.append(Problem(info.name, "graph value", f"dtype {dtypes.name(elem)}"))
        if not info.type.HasField("tensor_type"):
            ctx.problems.append(
                Problem(info.name, "graph value", "a non-tensor type (sequence, map or optional)")
            )
    plan = Plan(model.graph, ctx)
    return plan, ctx.problems


def _wrong_dtype(node: PlannedNode, name: str, got, want) -> RunError:
    view = node.view
    return RunError(
        "C86",
        f"native kernel {view.op_type} (node {view.name!r}) produced {got} for {name!r} where "
        f"the graph says {want}",
        hint="This is a bug in the native kernel; run with --executor ort.",
    )


# ---------------------------------------------------------------------- compiling plans


def _as_array(xp, value):
    """A kernel result as an array: NumPy arithmetic on 0-d arrays returns NumPy scalars (and a
    kernel may return a Python number); ONNX values are arrays, 0-d for scalars."""
    if value is None or isinstance(value, xp.ndarray):
        return value
    return xp.asarray(value)


def _settle(node: PlannedNode, index: int, value):
    """Output ``index`` of ``node`` as an array of the dtype the graph gives it, or RunError."""
    value = _as_array(node.view.xp, value)
    want = node.expected[index]
    if want is not None and (value is None or value.dtype != want):
        raise _wrong_dtype(node, node.outputs[index], getattr(value, "dtype", None), want)
    return value


def _one(node: PlannedNode, results):
    """The slow path of a single-output node: a result that is not an array of the expected
    dtype (a one-element tuple, a NumPy scalar, a wrong dtype)."""
    if isinstance(results, tuple | list):
        if not results:
            raise ValueError("the kernel returned no result")
        results = results[0]
    return _settle(node, 0, results)


def _several(node: PlannedNode, results) -> list:
    """The results of a multi-output node for its named outputs, settled."""
    if not isinstance(results, tuple | list):
        results = (results,)
    values = []
    for index, name in enumerate(node.outputs):
        if name:
            if index >= len(results):
                raise ValueError(
                    f"the kernel returned {len(results)} results, output {index} ({name!r}) "
                    "is missing"
                )
            values.append(_settle(node, index, results[index]))
    return values


def _lookup(feeds: dict, outer, name: str):
    """A value the graph does not define: fed by the caller, or from the enclosing scope."""
    if name in feeds:
        return feeds[name]
    if outer is None:
        raise KeyError(name)
    return outer[name]


@dataclass
class _Compiled:
    """A plan's generated run function, its source, and which node each source line runs."""

    function: object
    source: str
    code: object
    line_nodes: dict[int, PlannedNode]

    def failed_node(self, exc: BaseException) -> PlannedNode | None:
        """The node whose line of the run function raised ``exc`` (None: outside any node)."""
        tb = exc.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code is self.code:
                return self.line_nodes.get(tb.tb_lineno)
            tb = tb.tb_next
        return None


class _Codegen:
    """Writes a plan as one Python function, ``run(feeds, outer) -> {output name: value}``.

    The function is the plan's node list unrolled, in order. For every node::

        # 12: Add 'add_3'
        v_sum = K12(N12, v_x, c_one)
        if v_sum.__class__ is not ARRAY or (v_sum.dtype is not T12 and v_sum.dtype != T12): ...
        del v_x

    ``K12`` is the kernel, ``N12`` its node view, ``P12`` the planned node and ``T12`` the
    dtype its output must have; the second line is the output check, whose fast path is two
    identity tests (``...`` is ``v_sum = ONE(P12, v_sum)``, which converts a NumPy scalar or
    raises the dtype error; an equal dtype held by another object passes). Values live in
    local variables (``v_`` + the ONNX name made an identifier) and are ``del``-ed after their
    last use so large intermediates are freed as early as before. Constants (initializers and
    folded values, ``c_`` + name), kernels and views are names of the function's own global
    namespace. Graph inputs are read from ``feeds`` on the line of their first use, values of
    an enclosing graph (a subgraph's outer references) from ``outer`` likewise; a node that
    runs subgraphs first gets, in ``view.env``, the outer values they reference.

    A kernel's exception is mapped back to its node by the line of the run function it came
    through (``line_nodes``), so no bookkeeping runs per node.
    """

    def __init__(self, plan: Plan):
        self.plan = plan
        xp = plan.ctx.xp
        self.namespace: dict = {
            "ARRAY": xp.ndarray,
            "ONE": _one,
            "SEVERAL": _several,
            "LOOKUP": _lookup,
            "XP": xp,
        }
        self.lines: list[str] = []
        self.line_nodes: dict[int, PlannedNode] = {}
        self.identifiers: dict[str, str] = {}  # value name -> local or global identifier
        self.taken: set[str] = set(self.namespace) | {"run", "feeds", "outer"}
        self.bound: set[str] = set()  # value names held in local variables at this point
        self.inputs = set(plan.inputs)

    def compile(self) -> _Compiled:
        plan = self.plan
        self.lines.append("def run(feeds, outer):")
        for index, node in enumerate(plan.nodes):
            self._node(index, node)
        returned = ", ".join(f"{name!r}: {self._value(name, None)}" for name in plan.outputs)
        self._emit(f"return {{{returned}}}", None)
        # tracebacks through the generated function show its lines
        made = generate(self.lines, "run", self.namespace, f"native plan {plan.name!r}", plan)
        return _Compiled(made.function, made.source, made.function.__code__, self.line_nodes)

    def _emit(self, line: str, node: PlannedNode | None) -> None:
        self.lines.append("    " + line)
        if node is not None:
            self.line_nodes[len(self.lines)] = node

    def _identifier(self, name: str, prefix: str) -> str:
        base = prefix + re.sub(r"\W", "_", name, flags=re.ASCII)
        candidate, n = base, 1
        while candidate in self.taken:
            n += 1
            candidate = f"{base}_{n}"
        self.taken.add(candidate)
        return candidate

    def _value(self, name: str, node: PlannedNode | None) -> str:
        """The expression for value ``name`` read by ``node``; emits its load from ``feeds``
        or ``outer`` first if it is not bound yet."""
        if not name:
            return "None"
        if name in self.bound:
            return self.identifiers[name]
        plan = self.plan
        if name in plan.initializers and name not in self.inputs:
            if name not in self.identifiers:
                constant = self.identifiers[name] = self._identifier(name, "c_")
                self.namespace[constant] = plan.initializers[name]
            return self.identifiers[name]
        target = self.identifiers[name] = self._identifier(name, "v_")
        if name in self.inputs and name in plan.initializers:  # a default the feeds may replace
            constant = self._identifier(name, "c_")
            self.namespace[constant] = plan.initializers[name]
            self._emit(f"{target} = feeds.get({name!r}, {constant})", node)
        elif name in self.inputs:
            self._emit(f"{target} = feeds[{name!r}]", node)
        else:
            self._emit(f"{target} = LOOKUP(feeds, outer, {name!r})", node)
        self.bound.add(name)
        return target

    def _output(self, name: str) -> str:
        if name not in self.bound:
            self.identifiers[name] = self._identifier(name, "v_")
            self.bound.add(name)
        return self.identifiers[name]

    def _prepared(self, node: PlannedNode):
        """The node's kernel specialised to its attributes and constant inputs, if the kernel
        has a prepare step and it applies (see the registry)."""
        prepare = node.kernel.prepare
        if prepare is None:
            return None
        constants = {
            i: self.plan.initializers[name]
            for i, name in enumerate(node.inputs)
            if name in self.plan.initializers and name not in self.inputs
        }
        try:
            return prepare(node.view, constants)
        except Exception:  # noqa: BLE001 - the kernel itself reports it at run time
            return None

    @staticmethod
    def _inline(node: PlannedNode) -> str | None:
        """The kernel's expression (see the registry), if it has one that reads exactly the
        node's inputs, all given."""
        kernel = node.kernel
        if kernel is None or kernel.inline is None or node.view.subgraphs:
            return None
        fields = {int(f) for _, f, _, _ in string.Formatter().parse(kernel.inline) if f}
        if fields != set(range(len(node.inputs))) or not all(node.inputs):
            return None
        return kernel.inline

    def _node(self, index: int, node: PlannedNode) -> None:
        view = node.view
        op_type = view.op_type if view.op_type.isidentifier() else repr(view.op_type)
        self.lines.append(f"    # {index}: {op_type} {view.name!r}")
        inline = self._inline(node)
        if inline is not None:
            kernel = None
            self.lines[-1] += " (inline)"
        elif node.function is not None:
            function = node.function

            def kernel(view, *args, function=function):
                return function.run_positional(list(args))

        else:
            kernel = self._prepared(node)
            if kernel is not None:
                self.lines[-1] += " (prepared)"
            else:
                kernel = node.kernel.fn
        if kernel is not None:
            self.namespace[f"K{index}"] = kernel
        self.namespace[f"N{index}"] = view
        self.namespace[f"P{index}"] = node
        if view.subgraphs:
            refs: list[str] = []
            for sub in view.subgraphs.values():
                for plan in sub if isinstance(sub, list) else [sub]:
                    refs += [n for n in sorted(plan.outer_refs) if n not in refs]
            scope = ", ".join(f"{n!r}: {self._value(n, node)}" for n in refs)
            self._emit(f"N{index}.env = {{{scope}}}", node)
        if inline is not None:
            call = inline.format(*(self._value(n, node) for n in node.inputs))
        else:
            args = ", ".join([f"N{index}", *(self._value(n, node) for n in node.inputs)])
            call = f"K{index}({args})"
        named = [name for name in node.outputs if name]
        if len(node.outputs) == 1 and named:
            target = self._output(named[0])
            self._emit(f"{target} = {call}", node)
            check = f"{target}.__class__ is not ARRAY"
            if node.expected[0] is not None:
                self.namespace[f"T{index}"] = node.expected[0]
                # Identity first (the canonical dtype objects); an equal dtype that is
                # another object (arrays unpickled or made by other libraries) passes too.
                check += f" or ({target}.dtype is not T{index} and {target}.dtype != T{index})"
            self._emit(f"if {check}: {target} = ONE(P{index}, {target})", node)
        elif named:
            targets = "".join(f"{self._output(name)}, " for name in named)
            self._emit(f"{targets}= SEVERAL(P{index}, {call})", node)
        else:
            self._emit(call, node)
        freed = [self.identifiers[n] for n in node.free if n in self.bound]
        if freed:
            self._emit(f"del {', '.join(freed)}", node)
            self.bound -= set(node.free)
