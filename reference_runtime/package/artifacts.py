"""Artifact paths and ONNX graphs.

Every path a package names must stay inside the package: absolute paths and ``..`` are refused
as written, and the resolved path (symlinks followed) must lie under the package root. ONNX
graphs load from ``.onnx`` (binary) or ``.onnx.textproto`` (text format); their external data
locations obey the same confinement, relative to the graph file's folder.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath

import onnx

from ..dtypes import onnx_dtype_name
from .limits import limit
from .ort_operators import ort_operator_problem


def locate(root: Path, relative: str, mounts=None) -> tuple[Path | None, str | None]:
    """Resolve an artifact path of a package: inside ``root``, or, when its first segment is
    the name of one of ``mounts`` (folder name -> folder), inside that folder (a lowered bare
    decoder's draft, given explicitly). Returns ``(path, None)`` or ``(None, problem)``."""
    head, _, rest = str(relative).replace("\\", "/").partition("/")
    if mounts and head in mounts:
        return confine(Path(mounts[head]), rest)
    return confine(root, relative)


def confine(root: Path, relative: str) -> tuple[Path | None, str | None]:
    """Resolve ``relative`` inside ``root``. Returns ``(path, None)`` or ``(None, problem)``."""
    if not relative:
        return None, "the path is empty"
    if PurePosixPath(relative).is_absolute() or PureWindowsPath(relative).is_absolute():
        return None, f"path {relative!r} is absolute; artifact paths are relative to the package"
    parts = relative.replace("\\", "/").split("/")
    if ".." in parts:
        return None, f"path {relative!r} contains '..'; artifacts must stay inside the package"
    if "\x00" in relative:
        return None, f"path {relative!r} contains a NUL character"
    candidate = root.joinpath(*[p for p in parts if p not in ("", ".")])
    try:
        real_root = root.resolve(strict=True)
        real = candidate.resolve(strict=False)
        if real != real_root and real_root not in real.parents:
            return None, f"path {relative!r} resolves outside the package (through a symlink)"
        if not real.exists():
            return None, f"file {relative!r} does not exist in the package"
        if not real.is_file():
            return None, f"path {relative!r} is not a regular file"
    except (OSError, RuntimeError) as exc:  # symlink loops, names too long and the like
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        return None, f"path {relative!r} cannot be resolved: {reason}"
    return candidate, None


@dataclass(frozen=True)
class GraphValue:
    name: str
    dtype: str | None  # the format's dtype name (or ONNX's name when the format has none)
    rank: int | None  # None when the graph declares no shape
    dims: tuple[int | str | None, ...] | None  # int = static, str = dim_param, None = unknown


@dataclass(frozen=True)
class GraphSignature:
    path: Path
    inputs: dict[str, GraphValue]
    outputs: dict[str, GraphValue]
    initializers: frozenset[str]
    unnamed_inputs: int
    unnamed_outputs: int

    @property
    def required_inputs(self) -> list[str]:
        """Graph inputs that are not initializers (a caller must bind them)."""
        return [name for name in self.inputs if name not in self.initializers]


def _elem_type_name(elem_type: int) -> str | None:
    if not elem_type:
        return None
    if elem_type not in _KNOWN_ELEM_TYPES:
        raise ValueError(f"element type {elem_type} is not an ONNX tensor element type")
    return onnx_dtype_name(elem_type)


_KNOWN_ELEM_TYPES = frozenset(onnx.TensorProto.DataType.values()) - {0}


def _value(info: onnx.ValueInfoProto) -> GraphValue:
    type_ = info.type
    if not type_.HasField("tensor_type"):
        return GraphValue(info.name, None, None, None)
    tensor = type_.tensor_type
    dtype = _elem_type_name(tensor.elem_type)
    if not tensor.HasField("shape"):
        return GraphValue(info.name, dtype, None, None)
    dims: list[int | str | None] = []
    for dim in tensor.shape.dim:
        if dim.HasField("dim_value"):
            dims.append(int(dim.dim_value))
        elif dim.HasField("dim_param"):
            dims.append(dim.dim_param)
        else:
            dims.append(None)
    return GraphValue(info.name, dtype, len(dims), tuple(dims))


def signature(model: onnx.ModelProto, path: Path) -> GraphSignature:
    graph = model.graph
    return GraphSignature(
        path=path,
        inputs={v.name: _value(v) for v in graph.input if v.name},
        outputs={v.name: _value(v) for v in graph.output if v.name},
        initializers=frozenset(t.name for t in graph.initializer)
        | frozenset(t.values.name for t in graph.sparse_initializer),
        unnamed_inputs=sum(1 for v in graph.input if not v.name),
        unnamed_outputs=sum(1 for v in graph.output if not v.name),
    )


class TextGraphTooLarge(ValueError):
    """A text-format graph over the size limit, refused before it is parsed (C103)."""


def load_model(path: Path, external_data: bool = False) -> onnx.ModelProto:
    """Load a graph (``.onnx`` or ``.onnx.textproto``), with its external data if asked; a
    text-format graph over the size limit raises ``TextGraphTooLarge``.

    Text-format graphs are parsed once per file version (pure-Python protobuf text parsing is
    slow; binary parsing is not): the binary form is kept, keyed by path, mtime and size.
    """
    if path.name.endswith(".textproto"):
        stat = os.stat(path)
        problem = text_graph_too_large(path)
        if problem:
            raise TextGraphTooLarge(problem)
        model = onnx.load_model_from_string(
            _textproto_as_binary(os.fspath(path), stat.st_mtime_ns, stat.st_size)
        )
    else:
        model = onnx.load(os.fspath(path), load_external_data=False)
    if external_data:
        onnx.load_external_data_for_model(model, os.fspath(path.parent))
    return model


def text_graph_too_large(path: Path) -> str | None:
    """Why the text-format graph at ``path`` is not parsed (C103), or None."""
    most = limit("text_graph_bytes")
    size = os.stat(path).st_size
    if size <= most:
        return None
    return (
        f"{path.name} holds {size} bytes of text-format graph, more than the {most} this runtime "
        "parses (REFERENCE_RUNTIME_MAX_TEXT_GRAPH_BYTES raises the limit)"
    )


@functools.lru_cache(maxsize=128)
def _textproto_as_binary(path: str, mtime_ns: int, size: int) -> bytes:
    return onnx.load(path, format="textproto", load_external_data=False).SerializeToString()


def _node_tensors(nodes):
    for node in nodes:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors
            if attr.HasField("g"):
                yield from _tensors(attr.g)
            for sub in attr.graphs:
                yield from _tensors(sub)
            sparse = [attr.sparse_tensor] if attr.HasField("sparse_tensor") else []
            for tensor in (*sparse, *attr.sparse_tensors):
                yield tensor.values
                yield tensor.indices


def _tensors(graph: onnx.GraphProto):
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    yield from _node_tensors(graph.node)


def all_tensors(model: onnx.ModelProto) -> list[onnx.TensorProto]:
    """Every tensor the model stores: initializers, sparse tensors (values and indices) and
    node attributes, in subgraphs and functions too (in model order)."""
    tensors = [*_tensors(model.graph)]
    for function in model.functions:
        tensors += _node_tensors(function.node)
    return tensors


def external_data_locations(model: onnx.ModelProto) -> list[str]:
    """Every external-data ``location`` the model's tensors refer to (in model order)."""
    found: list[str] = []
    for tensor in all_tensors(model):
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            for entry in tensor.external_data:
                if entry.key == "location" and entry.value not in found:
                    found.append(entry.value)
    return found


# ------------------------------------------------------------------ well-formedness

# Bits per element of each element type (strings have no fixed size).
_BITS = {
    **dict.fromkeys(("FLOAT", "INT32", "UINT32"), 32),
    **dict.fromkeys(("UINT8", "INT8", "BOOL"), 8),
    **dict.fromkeys(("UINT16", "INT16", "FLOAT16", "BFLOAT16"), 16),
    **dict.fromkeys(("INT64", "UINT64", "DOUBLE", "COMPLEX64"), 64),
    "COMPLEX128": 128,
    **dict.fromkeys(("FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ"), 8),
    **dict.fromkeys(("FLOAT8E8M0",), 8),
    **dict.fromkeys(("UINT4", "INT4", "FLOAT4E2M1"), 4),
    **dict.fromkeys(("UINT2", "INT2"), 2),
}
_TYPE_BITS = {
    getattr(onnx.TensorProto, name): bits
    for name, bits in _BITS.items()
    if hasattr(onnx.TensorProto, name)
}
# typed fields hold one entry per element, but two per complex element and one int32 per
# two (or four) packed sub-byte elements
_PER_FIELD = {onnx.TensorProto.COMPLEX64: 2, onnx.TensorProto.COMPLEX128: 2}
_TYPED_FIELDS = (
    "float_data", "int32_data", "string_data", "int64_data", "double_data", "uint64_data",
)  # fmt: skip


def elem_type_problems(model: onnx.ModelProto) -> list[str]:
    """Element types of the main graph's values and of stored tensors that ONNX does not
    define (C104)."""
    found: list[str] = []
    graph = model.graph
    for kind, values in (
        ("input", graph.input),
        ("output", graph.output),
        ("value", graph.value_info),
    ):
        for value in values:
            if value.type.HasField("tensor_type"):
                elem = value.type.tensor_type.elem_type
                if elem not in _KNOWN_ELEM_TYPES:  # 0 (undefined) too: ONNX Runtime refuses it
                    found.append(
                        f"graph {kind} {value.name!r} has element type {elem}, which ONNX does "
                        "not define"
                    )
    for tensor in all_tensors(model):
        if tensor.data_type not in _KNOWN_ELEM_TYPES:
            found.append(
                f"tensor {tensor.name!r} has element type {tensor.data_type}, which ONNX does not "
                "define"
            )
    return found


def _numel(tensor: onnx.TensorProto) -> int:
    return _numel_of(tensor.dims)


def _numel_of(dims) -> int:
    count = 1
    for dim in dims:
        count *= dim
    return count


# ONNX Runtime densifies sparse constants and refuses one of more than 2 GiB.
MAX_DENSE_BYTES = 2**31


def _sparse_tensors(model: onnx.ModelProto):
    """Every sparse tensor of the model: sparse initializers and node attributes, in
    subgraphs and functions too."""

    def in_nodes(nodes):
        for node in nodes:
            for attr in node.attribute:
                if attr.HasField("sparse_tensor"):
                    yield attr.sparse_tensor
                yield from attr.sparse_tensors
                if attr.HasField("g"):
                    yield from in_graph(attr.g)
                for sub in attr.graphs:
                    yield from in_graph(sub)

    def in_graph(graph):
        yield from graph.sparse_initializer
        yield from in_nodes(graph.node)

    yield from in_graph(model.graph)
    for function in model.functions:
        yield from in_nodes(function.node)


def _finding(code: str, why: str) -> tuple[str, str]:
    return code, why


def tensor_data_problem(tensor: onnx.TensorProto, folder: Path) -> tuple[str, str] | None:
    """``(code, why)`` when a tensor's stored data disagrees with its declared type and
    dimensions (C105), or its external data lies beyond the end of its file (C83). Only
    declarations are read: nothing is allocated. External files that are missing or escape
    the package are H74, reported elsewhere; a tensor whose type is undefined is C104."""
    name = tensor.name or "(unnamed)"
    if any(dim < 0 for dim in tensor.dims):
        return _finding("C105", f"tensor {name!r} has negative dimensions {list(tensor.dims)}")
    numel = _numel(tensor)
    bits = _TYPE_BITS.get(tensor.data_type)
    expected = (numel * bits + 7) // 8 if bits is not None else None
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        info = {}
        for entry in tensor.external_data:
            info.setdefault(entry.key, entry.value)
        if not info.get("location"):
            return _finding("C105", f"tensor {name!r} has external data without a location")
        numbers = {}
        for key in ("offset", "length"):
            raw = info.get(key)
            if raw is None and key == "offset":
                numbers[key] = 0  # ONNX: absent means 0
                continue
            if raw is None:
                return _finding("C105", f"tensor {name!r} has external data without a length")
            if not (raw.isascii() and raw.isdigit() and len(raw) <= 20):
                return _finding(
                    "C105",
                    f"tensor {name!r} has external data {key} {raw[:40]!r}, not an integer >= 0",
                )
            numbers[key] = int(raw)
        offset, length = numbers["offset"], numbers["length"]
        if expected is not None and length != expected:
            return _finding(
                "C105",
                f"tensor {name!r} ({numel} element(s) of type {tensor.data_type}) needs "
                f"{expected} byte(s) but its external data length is {length}",
            )
        resolved, problem = confine(folder, info["location"])
        if problem:
            return None
        size = resolved.stat().st_size
        if offset + length > size:
            return _finding(
                "C83",
                f"tensor {name!r} reads bytes {offset}..{offset + length} of "
                f"{info['location']!r}, which holds {size} byte(s)",
            )
        return None
    if tensor.HasField("raw_data"):
        if expected is not None and len(tensor.raw_data) != expected:
            return _finding(
                "C105",
                f"tensor {name!r} ({numel} element(s)) needs {expected} byte(s) but holds "
                f"{len(tensor.raw_data)} byte(s) of raw data",
            )
        return None
    if bits is not None and bits < 8:  # packed sub-byte types: left to the checker
        return None
    stored = sum(len(getattr(tensor, f)) for f in _TYPED_FIELDS)
    want = numel * _PER_FIELD.get(tensor.data_type, 1)
    if stored != want:
        return _finding(
            "C105",
            f"tensor {name!r} declares {numel} element(s) but holds {stored} value(s)",
        )
    return None


def _without_external_data(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy for the checker and type inference: external initializers of the main graph
    become graph inputs of the same type and shape, other external tensors become empty (their
    data was checked on its own, by ``tensor_data_problem``)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    graph = copy.graph
    inputs = {v.name for v in graph.input}
    kept = []
    for tensor in graph.initializer:
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            kept.append(tensor)
        elif tensor.name not in inputs:
            dims = list(tensor.dims)
            graph.input.append(
                onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, dims)
            )
    if len(kept) != len(graph.initializer):
        kept = [onnx.TensorProto.FromString(t.SerializeToString()) for t in kept]
        del graph.initializer[:]
        graph.initializer.extend(kept)
    for tensor in all_tensors(copy):
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            del tensor.external_data[:]
            tensor.data_location = onnx.TensorProto.DEFAULT
            del tensor.dims[:]
            tensor.dims.append(0)
    return copy


_ONNX_OPSET = onnx.defs.onnx_opset_version()


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]


def checker_problem(model: onnx.ModelProto) -> str | None:
    """What ONNX's checker, or its type and shape inference in strict mode, refuses in the
    graph (C104), or None: an operator set ONNX does not define, an unknown operator, a
    missing required input, an initializer or value whose type conflicts with its use, shapes
    that cannot meet (a matrix product of incompatible inputs), ... External data was checked
    on its own (``tensor_data_problem``)."""
    for opset in model.opset_import:
        if opset.domain in ("", "ai.onnx") and not 1 <= opset.version <= _ONNX_OPSET:
            return (
                f"it imports the ONNX operator set at version {opset.version}; ONNX defines "
                f"versions 1 to {_ONNX_OPSET}"
            )
    missing = _missing_required_input(model) or _initializer_shape_problem(model)
    if missing:
        return missing
    if any(t.data_location == onnx.TensorProto.EXTERNAL for t in all_tensors(model)):
        model = _without_external_data(model)
    try:
        onnx.checker.check_model(model)
    except Exception as exc:  # ValidationError, and whatever the checker raises on odd input
        return _first_line(exc)
    # The declared shapes of graph outputs are hints ONNX Runtime replaces by the inferred
    # ones (intermediate values' declared shapes stay: inference needs them where an operator
    # alone cannot tell).
    hints = onnx.ModelProto()
    hints.CopyFrom(model)
    for value in hints.graph.output:
        if value.type.HasField("tensor_type"):
            value.type.tensor_type.ClearField("shape")
    try:
        onnx.shape_inference.infer_shapes(hints, check_type=True, strict_mode=True)
    except Exception as exc:  # InferenceError lists every node's error
        text = str(exc).strip()
        items = text.split("(op_type:")[1:]
        first = ("(op_type:" + items[0]) if items else text
        return "type and shape inference fails: " + first.strip().splitlines()[0][:300]
    return None


def _missing_required_input(model: onnx.ModelProto) -> str | None:
    """A node of the main graph that leaves a required input empty (ONNX Runtime refuses it;
    so does the checker, in words that name neither the node nor the operand)."""
    version = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    if version is None:
        return None
    for node in model.graph.node:
        if node.domain not in ("", "ai.onnx"):
            continue
        try:
            schema = onnx.defs.get_schema(node.op_type, version, "")
        except Exception:  # an unknown operator: the checker names it
            continue
        single = onnx.defs.OpSchema.FormalParameterOption.Single
        for i, name in enumerate(node.input):
            if not name and i < len(schema.inputs) and schema.inputs[i].option == single:
                return (
                    f"node {node.name or node.op_type!r} ({node.op_type}) leaves its required "
                    f"input {schema.inputs[i].name!r} empty"
                )
    return None


def graph_problems(model: onnx.ModelProto, folder: Path) -> list[tuple[str, str]]:
    """``(code, why)`` for each reason a loaded graph is refused: element types ONNX does not
    define (C104), external data outside the package (H74), stored data that disagrees with
    its declared size (C105) or lies beyond its file (C83), what ONNX's checker refuses (C104),
    operators ONNX Runtime's own schemas refuse (C125). At most a few of each kind."""
    found = [_finding("C104", problem) for problem in elem_type_problems(model)[:3]]
    if found:
        return found
    for location in external_data_locations(model):
        _, problem = confine(folder, location)
        if problem:
            found.append(
                _finding("H74", f"external data: {problem} (relative to the graph's folder)")
            )
    for tensor in all_tensors(model):
        problem = tensor_data_problem(tensor, folder)
        if problem is not None and sum(code == problem[0] for code, _ in found) < 3:
            found.append(problem)  # every code the tensors break, each at most three times
    for sparse in _sparse_tensors(model):
        dense = _numel_of(sparse.dims) * _TYPE_BITS.get(sparse.values.data_type, 8) // 8
        if any(d < 0 for d in sparse.dims) or dense > MAX_DENSE_BYTES:
            found.append(
                _finding(
                    "C105",
                    f"sparse tensor {sparse.values.name!r} has dimensions {list(sparse.dims)[:8]} "
                    f"({dense} bytes dense; at most {MAX_DENSE_BYTES}, negative dimensions "
                    "never)",
                )
            )
            break
    if found:
        return found
    problem = checker_problem(model)
    if problem:
        return [_finding("C104", f"not a well-formed ONNX model: {problem}")]
    problem = ort_operator_problem(model)
    return [_finding("C125", f"ONNX Runtime cannot build it: {problem}")] if problem else []


def _initializer_shape_problem(model: onnx.ModelProto) -> str | None:
    """An initializer that gives a graph input its default but not of the input's declared
    rank and fixed dimensions (ONNX Runtime refuses it; type inference does not look)."""
    inputs = {v.name: v for v in model.graph.input}
    for tensor in model.graph.initializer:
        value = inputs.get(tensor.name)
        if value is None or not value.type.tensor_type.HasField("shape"):
            continue
        declared = value.type.tensor_type.shape.dim
        dims = list(tensor.dims)
        if len(declared) != len(dims) or any(
            d.HasField("dim_value") and d.dim_value != n
            for d, n in zip(declared, dims, strict=True)
        ):
            shown = [
                d.dim_value if d.HasField("dim_value") else d.dim_param or "?" for d in declared
            ]
            return (
                f"initializer {tensor.name!r} has dimensions {dims[:8]}, but the graph input it "
                f"gives a default is declared {shown[:8]}"
            )
    return None
