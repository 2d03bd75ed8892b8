"""Shared state of one validation run: the model, graphs, what the runtime supports, the
violations found so far, and static knowledge about values (:class:`VType`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ... import dtypes
from ...errors import DocPath, Violation
from ...support import RuntimeSupport
from ..artifacts import GraphSignature, GraphValue
from ..docmodel import Node
from ..model import (
    Component,
    Metadata,
    RequestAlignedLayout,
    RequestExpandedLayout,
    TensorContract,
    Workflow,
)
from .catalogue import RULES


@dataclass(frozen=True)
class VType:
    """What validation knows statically about a value; ``None`` fields are unknown."""

    dtype: str | None = None
    rank: int | None = None
    dims: tuple[int | str | None, ...] | None = None
    layout: object | None = None  # a BatchLayout model object, or None when unknown

    @classmethod
    def of_contract(cls, contract: TensorContract) -> VType:
        dims = tuple(contract.shape) if contract.shape is not None else None
        if dims is not None and len(dims) != contract.rank:
            dims = None  # reported as B07 elsewhere
        return cls(dtypes.canonical(contract.dtype), contract.rank, dims, contract.batch_layout)

    @classmethod
    def of_graph(cls, value: GraphValue) -> VType:
        return cls(value.dtype, value.rank, value.dims, None)

    @property
    def request_axis(self) -> int | None:
        if isinstance(self.layout, RequestAlignedLayout | RequestExpandedLayout):
            return self.layout.axis
        return None

    def describe(self) -> str:
        if self.rank == 0:
            return f"{self.dtype or '?'} []"
        dims = (
            "[" + ", ".join("?" if d is None else str(d) for d in self.dims) + "]"
            if self.dims is not None
            else f"rank {self.rank}"
            if self.rank is not None
            else "unknown shape"
        )
        return f"{self.dtype or '?'} {dims}"


UNKNOWN = VType()


def mismatch(actual: VType, expected: VType) -> str | None:
    """Why ``actual`` cannot be ``expected`` (dtype, rank, fixed dims), or None if it may."""
    if actual.dtype and expected.dtype and actual.dtype != expected.dtype:
        return f"dtype {actual.dtype} where {expected.dtype} is expected"
    if actual.rank is not None and expected.rank is not None and actual.rank != expected.rank:
        return f"rank {actual.rank} where rank {expected.rank} is expected"
    if actual.dims is not None and expected.dims is not None:
        for axis, (a, e) in enumerate(zip(actual.dims, expected.dims, strict=False)):
            if isinstance(a, int) and isinstance(e, int) and a != e:
                return f"axis {axis} is {a} where {e} is expected"
    return None


def layout_name(layout) -> str:
    axis = getattr(layout, "axis", None)
    factor = getattr(layout, "factor", None)
    text = layout.kind
    if axis is not None:
        text += f"(axis {axis}"
        text += f", factor {factor})" if factor is not None else ")"
    return text


def same_layout(a, b) -> bool:
    """Equal batch layouts (an unknown layout matches anything)."""
    if a is None or b is None:
        return True

    def ident(layout):
        return (layout.kind, getattr(layout, "axis", None), getattr(layout, "factor", None))

    return ident(a) == ident(b)


def is_integer_scalar(t: VType) -> bool | None:
    """True / False when known, None when the value's type is unknown."""
    if t.dtype is None or t.rank is None:
        return None
    if t.dtype not in dtypes.INTEGER:
        return False
    if t.rank == 0:
        return True
    if t.rank == 1 and t.dims is not None:
        return t.dims[0] == 1  # a graph value of unknown extent (None) is not known to be one
    return False  # a contract of rank 1 must say shape [1]


@dataclass
class Ctx:
    metadata: Metadata
    document: dict
    root: Path
    support: RuntimeSupport
    graphs: dict[str, GraphSignature | None] = field(default_factory=dict)
    violations: list[Violation] = field(default_factory=list)
    flow: object | None = None  # the steps analysis (flow.Flow), set by the D rules
    # folder name -> folder outside the package (a lowered decoder's draft; Package.mounts)
    mounts: dict[str, Path] = field(default_factory=dict)

    @property
    def workflow(self) -> Workflow | None:
        return self.metadata.workflow

    def add(self, code: str, path: DocPath, message: str, hint: str | None = None) -> None:
        if code not in RULES:  # pragma: no cover - a programming error, caught by tests
            raise KeyError(f"unknown rule code {code}")
        self.violations.append(Violation(code, tuple(path), message, hint or RULES[code].fix))

    def component(self, name: str) -> Component | None:
        wf = self.workflow
        return wf.components.get(name) if wf else None

    def port_type(self, component: str, port: str, direction: str) -> VType | None:
        """The type of a component port: declared contract, else the graph's, else None."""
        comp = self.component(component)
        if comp is None:
            return None
        declared = getattr(comp.ports, direction) or None  # empty: the graph's own ports
        if declared is not None:
            contract = declared.get(port)
            return VType.of_contract(contract) if contract is not None else None
        graph = self.graphs.get(component)
        if graph is not None:
            values = graph.inputs if direction == "inputs" else graph.outputs
            if port in values:
                return VType.of_graph(values[port])
        return None

    def port_names(self, component: str, direction: str) -> list[str] | None:
        """Known port names of a component, or None when they cannot be known statically."""
        comp = self.component(component)
        if comp is None:
            return None
        declared = getattr(comp.ports, direction) or None  # empty: the graph's own ports
        if declared is not None:
            return list(declared)
        graph = self.graphs.get(component)
        if graph is not None:
            return list(graph.inputs if direction == "inputs" else graph.outputs)
        return None


def walk_nodes(node) -> Iterator[Node]:
    """Every model object under ``node`` (depth first, document order)."""
    if isinstance(node, Node):
        yield node
        for f in dataclasses.fields(node):
            yield from walk_nodes(getattr(node, f.name))
    elif isinstance(node, tuple):
        for item in node:
            yield from walk_nodes(item)
    elif hasattr(node, "items") and not isinstance(node, str | bytes):
        for value in node.values():
            yield from walk_nodes(value)


class DocumentOrder:
    """Sort key putting a document path where it appears in the document (missing keys after
    their siblings). Key positions are computed once per mapping, so sorting thousands of
    violations of a large document stays linear in practice."""

    def __init__(self, document):
        self.document = document
        self.positions: dict[int, dict] = {}

    def __call__(self, path: DocPath) -> tuple:
        out: list[int] = []
        node = self.document
        for i, part in enumerate(path):
            if isinstance(node, dict):
                index = self.positions.get(id(node))
                if index is None:
                    index = self.positions[id(node)] = {k: n for n, k in enumerate(node)}
                if part not in index:
                    return (*out, len(index), *[1 << 30] * (len(path) - i - 1))
                out.append(index[part])
                node = node[part]
            elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
                out.append(part)
                node = node[part]
            else:
                return (*out, *[1 << 30] * (len(path) - i))
        return tuple(out)
