"""Operators against ONNX Runtime's own schemas (C125).

ONNX's checker knows the schemas of ONNX's operator sets only: a node in another domain
(``com.microsoft``'s contrib operators, a vendor's domain) passes it unexamined, and so does an
operator set version ONNX Runtime does not support. ONNX Runtime builds a session from its own
registry (ONNX's schemas plus its contrib operators), so each graph is held to that registry
here, as ONNX Runtime holds it when it builds the graph:

- every operator set the model imports, in a domain ONNX Runtime has operators for, at a version
  it supports (at most the newest version of any operator of that domain);
- every node names an operator the registry defines at the version the model imports for its
  domain, or else a function of the model itself (a schema, when there is one, is used before
  a function of the same name, as ONNX Runtime does);
- for a node in a domain ONNX's checker does not know, what ONNX Runtime verifies against the
  schema: the number of inputs and outputs, no required input or output left empty, only
  attributes the operator defines, each of the type it declares, every required attribute
  given, and every input and output of a known element type among those its type constraint
  allows, the same type for every parameter bound to one constraint.

The registry is that of the ONNX Runtime installed (``get_all_operator_schema`` of
``onnxruntime.capi.onnxruntime_pybind11_state``), read once. ``tests/test_ort_operators.py``
hands each kind of graph to ONNX Runtime itself: refused here exactly when it cannot build it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass

import onnx

# domains whose schemas ONNX's checker has (it examines their nodes itself)
_ONNX_DOMAINS = frozenset(s.domain for s in onnx.defs.get_all_schemas_with_history()) | {"ai.onnx"}


def _domain(domain: str) -> str:
    return "" if domain == "ai.onnx" else domain


def _shown(domain: str) -> str:
    return domain or "ai.onnx"


@dataclass(frozen=True)
class _Registry:
    version: str  # ONNX Runtime's version
    schemas: dict[tuple[str, str], tuple]  # (domain, op type) -> schemas, oldest first
    newest: dict[str, int]  # domain -> newest since-version of any operator


@functools.cache
def _registry() -> _Registry:
    import onnxruntime
    from onnxruntime.capi import onnxruntime_pybind11_state as state

    table: dict[tuple[str, str], list] = {}
    newest: dict[str, int] = {}
    for schema in state.get_all_operator_schema():
        domain = _domain(schema.domain)
        table.setdefault((domain, schema.name), []).append(schema)
        newest[domain] = max(newest.get(domain, 0), schema.since_version)
    schemas = {k: tuple(sorted(v, key=lambda s: s.since_version)) for k, v in table.items()}
    return _Registry(onnxruntime.__version__, schemas, newest)


# ONNX's names of element types, as ONNX Runtime's schemas write them: ``tensor(float)``
_ELEM_NAMES = {
    value: name.lower()
    for name, value in onnx.TensorProto.DataType.items()
    if value != onnx.TensorProto.UNDEFINED
}


def _type_string(type_proto: onnx.TypeProto) -> str | None:
    """``tensor(float)``, ``seq(tensor(int64))``, ...; None when the type is not fully known."""
    kind = type_proto.WhichOneof("value")
    if kind == "tensor_type":
        name = _ELEM_NAMES.get(type_proto.tensor_type.elem_type)
        return f"tensor({name})" if name else None
    if kind == "sparse_tensor_type":
        name = _ELEM_NAMES.get(type_proto.sparse_tensor_type.elem_type)
        return f"sparse_tensor({name})" if name else None
    if kind == "sequence_type":
        inner = _type_string(type_proto.sequence_type.elem_type)
        return f"seq({inner})" if inner else None
    if kind == "optional_type":
        inner = _type_string(type_proto.optional_type.elem_type)
        return f"optional({inner})" if inner else None
    return None


def _graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """The graph and every subgraph beneath it."""
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("g"):
                yield from _graphs(attr.g)
            for sub in attr.graphs:
                yield from _graphs(sub)


def _known_types(model: onnx.ModelProto) -> dict[str, str]:
    """The type of every value whose type the model declares or ONNX's inference finds."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # strict inference already passed (C104); this one only adds types
        inferred = model
    types: dict[str, str] = {}
    for graph in _graphs(inferred.graph):
        for tensor in graph.initializer:
            name = _ELEM_NAMES.get(tensor.data_type)
            if name:
                types.setdefault(tensor.name, f"tensor({name})")
        for value in (*graph.input, *graph.output, *graph.value_info):
            shown = _type_string(value.type)
            if shown:
                types.setdefault(value.name, shown)
    return types


def _attr_type_name(value: int) -> str:
    try:
        return onnx.AttributeProto.AttributeType.Name(value)
    except ValueError:
        return f"type {value}"


def _schema_problem(node: onnx.NodeProto, schema, types: dict[str, str]) -> str | None:
    """What ONNX Runtime's verification of ``node`` against ``schema`` refuses, or None."""
    single = type(schema).FormalParameterOption.Single
    for kind, names, params, least, most in (
        ("input", node.input, schema.inputs, schema.min_input, schema.max_input),
        ("output", node.output, schema.outputs, schema.min_output, schema.max_output),
    ):
        if not least <= len(names) <= most:
            bound = f"{least}" if least == most else f"{least} to {most}"
            return f"it has {len(names)} {kind}(s); the operator takes {bound}"
        for i, name in enumerate(names):
            if i >= len(params):
                break
            if not name and params[i].option == single:
                return f"its required {kind} {params[i].name!r} is empty"
    defined = schema.attributes
    for attr in node.attribute:
        if attr.ref_attr_name or attr.name.startswith("__"):
            continue  # a function's attribute reference; a name reserved to ONNX Runtime
        declared = defined.get(attr.name)
        if declared is None:
            known = ", ".join(sorted(defined)) or "none"
            return f"attribute {attr.name!r} is not one the operator defines (it defines: {known})"
        want = int(declared.type)
        if attr.type != want:
            return (
                f"attribute {attr.name!r} is {_attr_type_name(attr.type)}; the operator declares "
                f"it {_attr_type_name(want)}"
            )
    given = {attr.name for attr in node.attribute}
    for name, declared in sorted(defined.items()):
        if declared.required and name not in given:
            return f"required attribute {name!r} is missing"
    bound: dict[str, tuple[str, str]] = {}
    constraints = {c.type_param_str for c in schema.type_constraints}
    for kind, names, params in (
        ("input", node.input, schema.inputs),
        ("output", node.output, schema.outputs),
    ):
        for i, name in enumerate(names):
            if not params or not name:
                continue
            # past the last parameter only when it is variadic: the counts were checked above,
            # and no schema takes more operands than it lists unless its last is variadic
            param = params[min(i, len(params) - 1)]
            shown = types.get(name)
            if shown is None:
                continue
            if shown not in param.types:
                allowed = ", ".join(sorted(param.types))
                return f"{kind} {param.name!r} ({name!r}) is {shown}; the operator allows {allowed}"
            if param.typeStr in constraints and param.isHomogeneous:
                first = bound.setdefault(param.typeStr, (name, shown))
                if first[1] != shown:
                    return (
                        f"{kind} {name!r} is {shown} but {first[0]!r} is {first[1]}; the "
                        f"operator binds both to one type ({param.typeStr})"
                    )
    return None


def ort_operator_problem(model: onnx.ModelProto) -> str | None:
    """Why ONNX Runtime would refuse to build the graph's operators (C125), or None. Called
    once ONNX's checker and strict inference accept the graph (C104)."""
    registry = _registry()
    imports = {_domain(o.domain): o.version for o in model.opset_import}
    for domain, version in imports.items():
        newest = registry.newest.get(domain)
        if newest is not None and version > newest:
            return (
                f"it imports operator set {_shown(domain)} at version {version}; ONNX Runtime "
                f"{registry.version} supports versions up to {newest}"
            )
    functions = {(_domain(f.domain), f.name) for f in model.functions}
    types: dict[str, str] = {}
    typed = False
    for graph in _graphs(model.graph):
        for node in graph.node:
            if not typed and node.domain not in _ONNX_DOMAINS:
                types, typed = _known_types(model), True
            problem = _node_problem(node, imports, functions, types, registry)
            if problem:
                return problem
    for function in model.functions:  # ONNX Runtime inlines them: their nodes must build too
        local = {**imports, **{_domain(o.domain): o.version for o in function.opset_import}}
        for node in function.node:
            problem = _node_problem(node, local, functions, {}, registry)
            if problem:
                return f"function {function.name!r}: {problem}"
    return None


def _node_problem(node, imports, functions, types, registry: _Registry) -> str | None:
    domain = _domain(node.domain)
    where = f"node {node.name or '(unnamed)'!r} ({_shown(domain)}::{node.op_type})"
    version = imports.get(domain)
    known = registry.schemas.get((domain, node.op_type), ())
    chosen = [s for s in known if version is not None and s.since_version <= version]
    if not chosen:
        if (domain, node.op_type) in functions:
            return None  # a function of the model (a schema, when there is one, wins)
        if not known:
            return (
                f"{where}: ONNX Runtime {registry.version} defines no operator "
                f"{node.op_type!r} in domain {_shown(domain)!r}"
            )
        return (
            f"{where}: ONNX Runtime {registry.version} defines {node.op_type} from version "
            f"{known[0].since_version} of {_shown(domain)}; the model imports version {version}"
        )
    if node.domain in _ONNX_DOMAINS:
        return None  # ONNX's checker verified this node against the same schema
    schema = chosen[-1]
    if schema.deprecated:
        return f"{where}: the operator is deprecated at version {version}"
    problem = _schema_problem(node, schema, types)
    return f"{where}: {problem}" if problem else None
