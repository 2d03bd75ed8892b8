"""The machinery behind the typed document model.

The model (``model.py``) is written once, as frozen dataclasses. From it we derive both the
published JSON Schema (``schema.py`` writes ``schema.json``) and the conversion of a parsed
document into model objects (``build``). Constraints that the schema enforces are declared on
the fields with :func:`fld`; nothing is written twice.

Each model object remembers where it came from in the document (``node.path``), so semantic
rules can point at the exact spot they reject.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import types
import typing
from collections.abc import Iterator, Mapping
from typing import Any, Literal, get_args, get_origin

from ..errors import DocPath


class FrozenMap(Mapping):
    """An immutable, order-preserving mapping (document order is meaningful)."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping | None = None):
        object.__setattr__(self, "_data", dict(data or {}))

    def __getitem__(self, key):
        return self._data[key]

    def __iter__(self) -> Iterator:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"FrozenMap({self._data!r})"

    def __hash__(self) -> int:
        return hash(tuple(self._data.items()))

    def __setattr__(self, name, value):
        raise AttributeError("FrozenMap is immutable")

    def __reduce__(self):
        return (FrozenMap, (self._data,))


MISSING = dataclasses.MISSING


def fld(
    default: Any = MISSING,
    *,
    factory: Any = MISSING,
    key: str | None = None,
    rule: str | None = None,
    doc: str = "",
    schema: dict | None = None,
    any_schema: dict | None = None,
):
    """Declare a model field.

    ``key``: the document key when it differs from the Python name (``class``).
    ``rule``: the rule code reported when this field breaks a schema constraint (otherwise the
    generic parsing codes apply). ``schema``: extra JSON Schema keywords (``minimum``...).
    ``any_schema``: the whole schema of a field typed ``Any``.
    """
    metadata = {"key": key, "rule": rule, "doc": doc, "schema": schema or {}, "any": any_schema}
    kwargs: dict[str, Any] = {"metadata": metadata}
    if default is not MISSING:
        kwargs["default"] = default
    if factory is not MISSING:
        kwargs["default_factory"] = factory
    return dataclasses.field(**kwargs)


class Node:
    """Base of every model class: remembers its document path (set by :func:`build`)."""

    # Document keys that used to exist and are now rejected with a dedicated message.
    __removed_keys__: typing.ClassVar[dict[str, str]] = {}
    # Rule code reported when a required key of this object is missing (default: A03).
    __required_rule__: typing.ClassVar[str | None] = None
    # The upstream schema type this class models (published as ``x-upstream``).
    __upstream__: typing.ClassVar[str | None] = None
    # True where upstream accepts (and ignores) keys it does not define.
    __open__: typing.ClassVar[bool] = False

    @property
    def path(self) -> DocPath:
        return getattr(self, "_path", ())


def doc_key(f: dataclasses.Field) -> str:
    return f.metadata.get("key") or f.name


@functools.cache
def type_hints(cls) -> dict[str, Any]:
    """``typing.get_type_hints``, once per class (it re-evaluates annotations on every call)."""
    return typing.get_type_hints(cls)


@functools.cache
def model_fields(cls) -> tuple[tuple[dataclasses.Field, Any], ...]:
    hints = type_hints(cls)
    return tuple((f, hints[f.name]) for f in dataclasses.fields(cls) if not f.name.startswith("_"))


def is_required(f: dataclasses.Field) -> bool:
    return f.default is MISSING and f.default_factory is MISSING


# ---------------------------------------------------------------- type helpers


def unwrap_optional(tp) -> Any:
    """``X | None`` -> ``X`` (any other type as it is)."""
    if get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) != len(get_args(tp)):
            return args[0] if len(args) == 1 else functools.reduce(operator.or_, args)
    return tp


def union_members(tp) -> list | None:
    if get_origin(tp) in (typing.Union, types.UnionType):
        return list(get_args(tp))
    return None


@functools.cache
def kind_of(cls) -> str:
    """The ``kind`` literal that tags a variant of a discriminated union."""
    hints = type_hints(cls)
    (value,) = get_args(hints["kind"])
    return value


def is_tagged_union(members: list) -> bool:
    return _tagged(tuple(members))


@functools.cache
def _tagged(members: tuple) -> bool:
    return all(dataclasses.is_dataclass(m) and "kind" in type_hints(m) for m in members)


# ---------------------------------------------------------------- building model objects


def build(tp, raw, path: DocPath = ()):
    """Convert a schema-valid parsed document into model objects (recording paths)."""
    tp = unwrap_optional(tp)
    members = union_members(tp)
    if members is not None:
        if is_tagged_union(members):
            for member in members:
                if kind_of(member) == raw.get("kind"):
                    return build(member, raw, path)
            raise ValueError(f"no variant of {tp} for kind {raw.get('kind')!r}")
        return raw  # plain unions (int | str) keep their value
    origin = get_origin(tp)
    if dataclasses.is_dataclass(tp):
        kwargs = {}
        for f, ftp in model_fields(tp):
            k = doc_key(f)
            if k in raw:
                kwargs[f.name] = build(ftp, raw[k], (*path, k))
        obj = tp(**kwargs)
        object.__setattr__(obj, "_path", path)
        return obj
    if origin is tuple:
        (item_tp, _ellipsis) = get_args(tp)
        return tuple(build(item_tp, item, (*path, i)) for i, item in enumerate(raw))
    if origin is Mapping:
        _, value_tp = get_args(tp)
        return FrozenMap({k: build(value_tp, v, (*path, k)) for k, v in raw.items()})
    if tp is Any:
        return freeze(raw)
    if tp is float and isinstance(raw, int) and not isinstance(raw, bool):
        return float(raw)
    return raw


def freeze(value):
    """Make a raw JSON-like value immutable (lists -> tuples, dicts -> FrozenMap)."""
    if isinstance(value, dict):
        return FrozenMap({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(freeze(v) for v in value)
    return value


def literal_values(tp) -> list | None:
    if get_origin(tp) is Literal:
        return list(get_args(tp))
    return None
