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


def _value(info: onnx.ValueInfoProto) -> GraphValue:
    type_ = info.type
    if not type_.HasField("tensor_type"):
        return GraphValue(info.name, None, None, None)
    tensor = type_.tensor_type
    dtype = onnx_dtype_name(tensor.elem_type) if tensor.elem_type else None
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


def load_model(path: Path, external_data: bool = False) -> onnx.ModelProto:
    """Load a graph (``.onnx`` or ``.onnx.textproto``), with its external data if asked.

    Text-format graphs are parsed once per file version (pure-Python protobuf text parsing is
    slow; binary parsing is not): the binary form is kept, keyed by path, mtime and size.
    """
    if path.name.endswith(".textproto"):
        stat = os.stat(path)
        model = onnx.load_model_from_string(
            _textproto_as_binary(os.fspath(path), stat.st_mtime_ns, stat.st_size)
        )
    else:
        model = onnx.load(os.fspath(path), load_external_data=False)
    if external_data:
        onnx.load_external_data_for_model(model, os.fspath(path.parent))
    return model


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


def _tensors(graph: onnx.GraphProto):
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    yield from _node_tensors(graph.node)


def external_data_locations(model: onnx.ModelProto) -> list[str]:
    """Every external-data ``location`` the model's tensors refer to (in model order)."""
    found: list[str] = []
    tensors = [*_tensors(model.graph)]
    for function in model.functions:
        tensors += _node_tensors(function.node)
    for tensor in tensors:
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            for entry in tensor.external_data:
                if entry.key == "location" and entry.value not in found:
                    found.append(entry.value)
    return found
