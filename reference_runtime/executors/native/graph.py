"""Plans and runs ONNX graphs with the registered kernels.

A :class:`Plan` is built once per graph (and once per subgraph): every node's kernel is chosen
by (domain, op type, opset), its attributes decoded, its subgraphs planned, and for every value
the node after which it is no longer needed, so values are freed after their last use. Anything
the executor does not implement is collected while planning and refused as a whole.

At run time a plan walks its nodes in order (ONNX graphs are topologically sorted). Each
node's outputs are checked against the dtypes ONNX shape inference gave them, so a kernel can
never let a float64 (or any other dtype) creep in unnoticed.
"""

from __future__ import annotations

from collections import ChainMap
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper

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
                 "env", "n_outputs", "plan_context")  # fmt: skip

    def __init__(self, proto: onnx.NodeProto, xp, opset: int):
        self.proto = proto
        self.name = proto.name or proto.op_type
        self.op_type = proto.op_type
        self.domain = proto.domain
        self.xp = xp
        self.opset = opset
        self.attrs: dict = {}
        self.subgraphs: dict[str, Plan | list[Plan]] = {}
        self.env = None  # the enclosing values, set for nodes that run subgraphs
        self.n_outputs = len(proto.output)

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
        self.nodes: list[PlannedNode] = []
        self._steps: list | None = None  # compiled on the first run (after folding)
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
        env: dict = dict(self.initializers)
        env.update(feeds)
        scope = ChainMap(env, outer) if outer is not None else env
        steps = self._steps if self._steps is not None else self._compile_steps()
        node = None
        try:
            for node, call, view, inputs, outputs, checks, free in steps:
                if view.subgraphs:
                    view.env = scope
                results = call(view, *[scope[name] if name else None for name in inputs])
                if results.__class__ is not tuple and results.__class__ is not list:
                    results = (results,)
                for name, value in zip(outputs, results, strict=False):
                    if name:
                        env[name] = value
                for index, name, want in checks:
                    if index < len(results) and results[index].dtype != want:
                        raise _wrong_dtype(node, name, results[index].dtype, want)
                for name in free:
                    env.pop(name, None)
        except RunError:
            raise
        except Exception as exc:
            if node is None:
                raise
            view = node.view
            raise RunError(
                "C86",
                f"native kernel {view.op_type} (node {view.name!r}) failed: "
                f"{type(exc).__name__}: {exc}",
                hint="Run the component with --executor ort to compare.",
            ) from exc
        return {name: scope[name] for name in self.outputs}

    def _compile_steps(self) -> list:
        """Per node, what the run loop needs, unpacked once: the callable, its view, the value
        names, the output dtypes to check and the values to free afterwards."""
        steps = []
        for node in self.nodes:
            if node.function is not None:
                function = node.function

                def call(view, *args, function=function):
                    return function.run_positional(list(args))

            else:
                call = node.kernel.fn
            checks = tuple(
                (i, name, want)
                for i, (name, want) in enumerate(zip(node.outputs, node.expected, strict=False))
                if name and want is not None
            )
            steps.append((node, call, node.view, node.inputs, node.outputs, checks, node.free))
        self._steps = steps
        return steps

    def _fold_constants(self) -> None:
        """Run, once at load, every deterministic node whose inputs are all constants; its
        outputs become constants of the plan (a graph's Constant nodes, shape arithmetic on
        initializers...)."""
        kept = []
        for node in self.nodes:
            foldable = (
                node.kernel is not None
                and not node.view.subgraphs
                and node.view.op_type not in NONDETERMINISTIC
                and all(not n or n in self.initializers for n in node.inputs)
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
