"""Read the format's upstream schema types (Rust, serde) into plain data.

The upstream definition of the document is a set of Rust types deserialised with serde
(``schema/*.rs`` of the pinned snapshot). This module extracts what serde makes of them:
each struct's fields (after ``rename``), which are required and which default to what, whether
unknown keys are refused (``deny_unknown_fields``), and each enum's variants (after
``rename_all`` / ``rename``), with the tagged-union shape of ``#[serde(tag = "kind")]``.

It is a reader for this one, well-formed source, not a Rust parser: it understands attributes,
``pub struct`` / ``pub enum`` items, named fields, unit / struct / tuple variants and the
generic types the schema uses. The crosswalk test (``test_upstream_crosswalk.py``) compares its
output with our published JSON Schema.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

# ---------------------------------------------------------------- data


@dataclass(frozen=True)
class RType:
    """A Rust type: ``name`` plus generic ``args`` (``Option<Vec<String>>``)."""

    name: str
    args: tuple[RType, ...] = ()

    def __str__(self) -> str:
        if not self.args:
            return self.name
        return f"{self.name}<{', '.join(map(str, self.args))}>"


@dataclass
class RField:
    name: str  # the document key (after rename)
    rust_name: str
    type: RType
    serde: dict[str, str | bool]
    schemars: dict[str, str | bool]

    @property
    def is_option(self) -> bool:
        return self.type.name == "Option"

    @property
    def has_default(self) -> bool:
        return "default" in self.serde

    @property
    def required(self) -> bool:
        return not self.is_option and not self.has_default


@dataclass
class RVariant:
    name: str  # the document value (after rename_all / rename)
    rust_name: str
    fields: list[RField] | None  # struct variant fields, None for a unit variant
    tuple_types: list[RType] | None  # tuple variant
    is_default: bool


@dataclass
class RItem:
    kind: str  # "struct" | "enum"
    name: str
    serde: dict[str, str | bool]
    schemars: dict[str, str | bool]
    derives: set[str]
    fields: list[RField] = field(default_factory=list)
    variants: list[RVariant] = field(default_factory=list)
    source: str = ""

    @property
    def deserialized(self) -> bool:
        return "Deserialize" in self.derives

    @property
    def closed(self) -> bool:
        return bool(self.serde.get("deny_unknown_fields"))

    @property
    def tag(self) -> str | None:
        tag = self.serde.get("tag")
        return tag if isinstance(tag, str) else None

    @property
    def untagged(self) -> bool:
        return bool(self.serde.get("untagged"))


@dataclass
class UpstreamSchema:
    items: dict[str, RItem]
    functions: dict[str, str]  # fn name -> body text (for `default = "fn"`)
    vocabularies: dict[str, list[str]]  # extensible string vocabularies by type name

    def __getitem__(self, name: str) -> RItem:
        return self.items[name]


# ---------------------------------------------------------------- lexing


def _strip_comments(text: str) -> str:
    out = []
    for line in text.splitlines():
        if line.lstrip().startswith("//"):
            continue
        out.append(line)
    return "\n".join(out)


def _balanced(text: str, start: int, open_ch: str, close_ch: str) -> int:
    """Index just after the bracket that closes the one at ``start`` (strings respected)."""
    depth = 0
    i = start
    in_str = False
    while i < len(text):
        ch = text[i]
        if in_str:
            if ch == "\\":
                i += 2
                continue
            if ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch == open_ch:
            depth += 1
        elif ch == close_ch:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ValueError(f"unbalanced {open_ch} at {start}")


def _split_top(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside brackets, angle brackets and strings."""
    parts, depth, cur, in_str, i = [], 0, [], False, 0
    while i < len(text):
        ch = text[i]
        if in_str:
            cur.append(ch)
            if ch == "\\":
                cur.append(text[i + 1])
                i += 2
                continue
            if ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
            cur.append(ch)
        elif ch in "([{<":
            depth += 1
            cur.append(ch)
        elif ch in ")]}>":
            # `->` is not a closing angle bracket
            if ch == ">" and i > 0 and text[i - 1] == "-":
                cur.append(ch)
            else:
                depth -= 1
                cur.append(ch)
        elif ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    if "".join(cur).strip():
        parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def _parse_attr_args(inner: str) -> dict[str, str | bool]:
    """``default, rename = "x", tag = "kind"`` -> ``{"default": True, "rename": "x", ...}``."""
    out: dict[str, str | bool] = {}
    for part in _split_top(inner):
        if "=" in part and not part.startswith(("extend", "inner", "range", "length")):
            key, _, value = part.partition("=")
            value = value.strip()
            if value.startswith('"') and value.endswith('"'):
                value = value[1:-1]
            out[key.strip()] = value
        else:
            key = part.split("(", 1)[0].strip()
            out[key] = part if "(" in part else True
    return out


_ATTR = re.compile(r"#\s*\[")


def _read_attributes(text: str, pos: int) -> tuple[list[str], int]:
    """Attributes starting at ``pos`` (whitespace skipped): their inner texts, and the end."""
    attrs = []
    while True:
        m = re.compile(r"\s*").match(text, pos)
        pos = m.end()
        if text.startswith("#[", pos) or text.startswith("#![", pos):
            bracket = text.index("[", pos)
            end = _balanced(text, bracket, "[", "]")
            attrs.append(text[bracket + 1 : end - 1].strip())
            pos = end
        else:
            return attrs, pos


def _collect(attrs: list[str]) -> tuple[dict, dict, set[str], bool]:
    serde: dict[str, str | bool] = {}
    schemars: dict[str, str | bool] = {}
    derives: set[str] = set()
    is_default = False
    for attr in attrs:
        name, _, rest = attr.partition("(")
        name = name.strip()
        inner = rest[: rest.rfind(")")] if rest else ""
        if name == "serde":
            serde.update(_parse_attr_args(inner))
        elif name == "schemars":
            schemars.update(_parse_attr_args(inner))
        elif name == "derive":
            derives.update(p.strip() for p in inner.split(","))
        elif name == "default":
            is_default = True
    return serde, schemars, derives, is_default


def parse_type(text: str) -> RType:
    text = text.strip()
    # path prefixes (crate::schema::TensorContract, std::sync::OnceLock)
    m = re.match(r"([A-Za-z_][A-Za-z0-9_:]*)\s*(<.*>)?$", text, re.S)
    if not m:
        raise ValueError(f"cannot read type {text!r}")
    name = m.group(1).split("::")[-1]
    args: tuple[RType, ...] = ()
    if m.group(2):
        args = tuple(parse_type(a) for a in _split_top(m.group(2)[1:-1]))
    return RType(name, args)


def _snake(name: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    s = re.sub(r"(?<=[A-Z])([A-Z][a-z])", r"_\1", s)
    return s.lower()


def _rename(name: str, rule: str | None) -> str:
    if rule in (None, True):
        return name
    if rule == "snake_case":
        return _snake(name)
    if rule == "lowercase":
        return name.lower()
    if rule == "kebab-case":
        return _snake(name).replace("_", "-")
    if rule == "SCREAMING_SNAKE_CASE":
        return _snake(name).upper()
    raise ValueError(f"unknown rename_all {rule!r}")


def _parse_fields(body: str, rename_all: str | None) -> list[RField]:
    fields = []
    for chunk in _split_top(body):
        attrs, pos = _read_attributes(chunk, 0)
        decl = chunk[pos:].strip()
        m = re.match(r"(?:pub(?:\([a-z]+\))?\s+)?([a-z_][a-z0-9_]*)\s*:\s*(.+)$", decl, re.S)
        if not m:
            raise ValueError(f"cannot read field {decl!r}")
        serde, schemars, _, _ = _collect(attrs)
        if serde.get("skip") is True or serde.get("skip_deserializing") is True:
            continue
        rust_name = m.group(1)
        doc_name = serde.get("rename") if isinstance(serde.get("rename"), str) else None
        fields.append(
            RField(
                name=doc_name or _rename(rust_name, rename_all),
                rust_name=rust_name,
                type=parse_type(m.group(2)),
                serde=serde,
                schemars=schemars,
            )
        )
    return fields


def _parse_variants(body: str, rename_all: str | None) -> list[RVariant]:
    variants = []
    for chunk in _split_top(body):
        attrs, pos = _read_attributes(chunk, 0)
        decl = chunk[pos:].strip()
        serde, _schemars, _, is_default = _collect(attrs)
        m = re.match(r"([A-Z][A-Za-z0-9_]*)\s*(.*)$", decl, re.S)
        if not m:
            raise ValueError(f"cannot read variant {decl!r}")
        rust_name, rest = m.group(1), m.group(2).strip()
        doc = serde.get("rename") if isinstance(serde.get("rename"), str) else None
        fields = tuple_types = None
        if rest.startswith("{"):
            # field names of struct variants are not renamed by the enum's rename_all
            fields = _parse_fields(rest[1 : _balanced(rest, 0, "{", "}") - 1], None)
        elif rest.startswith("("):
            inner = rest[1 : _balanced(rest, 0, "(", ")") - 1]
            tuple_types = []
            for part in _split_top(inner):
                _, p = _read_attributes(part, 0)
                tuple_types.append(parse_type(part[p:]))
        variants.append(
            RVariant(
                name=doc or _rename(rust_name, rename_all),
                rust_name=rust_name,
                fields=fields,
                tuple_types=tuple_types,
                is_default=is_default,
            )
        )
    return variants


_ITEM = re.compile(r"pub(?:\([a-z]+\))?\s+(struct|enum)\s+([A-Z][A-Za-z0-9_]*)\s*(\{|;|\()")
_FN = re.compile(r"fn\s+([a-z_][a-z0-9_]*)\s*\(\s*\)\s*->\s*[A-Za-z0-9_]+\s*\{")
_VOCAB = re.compile(
    r"extensible_string!\(\s*(?:#\[[^\]]*\]\s*)*([A-Za-z]+)\s*,\s*[a-z_]+\s*,\s*[A-Z_]+\s*,"
    r"\s*\[(.*?)\]\s*\);",
    re.S,
)
_PROPOSAL = re.compile(
    r"fn proposal_type\(.*?extensible_string_enum\(\s*schema,\s*&\[(.*?)\]", re.S
)


def _attributes_before(text: str, start: int) -> list[str]:
    """The attribute block that ends right before ``start`` (an item's header)."""
    attrs: list[str] = []
    pos = start
    while True:
        before = text[:pos].rstrip()
        if not before.endswith("]"):
            return list(reversed(attrs))
        # find the matching '#[' walking backwards
        depth, i = 0, len(before) - 1
        while i >= 0:
            if before[i] == "]":
                depth += 1
            elif before[i] == "[":
                depth -= 1
                if depth == 0:
                    break
            i -= 1
        if i <= 0 or before[i - 1] != "#":
            return list(reversed(attrs))
        attrs.append(before[i + 1 : -1].strip())
        pos = i - 1


def parse_source(text: str, schema: UpstreamSchema) -> None:
    text = _strip_comments(text)
    for m in _VOCAB.finditer(text):
        schema.vocabularies[m.group(1)] = re.findall(r'"([^"]*)"', m.group(2))
    m = _PROPOSAL.search(text)
    if m:
        schema.vocabularies["ProposalType"] = re.findall(r'"([^"]*)"', m.group(1))
    for m in _FN.finditer(text):
        end = _balanced(text, m.end() - 1, "{", "}")
        schema.functions[m.group(1)] = text[m.end() : end - 1].strip()
    for m in _ITEM.finditer(text):
        kind, name, opener = m.group(1), m.group(2), m.group(3)
        attrs = _attributes_before(text, m.start())
        serde, schemars, derives, _ = _collect(attrs)
        item = RItem(kind=kind, name=name, serde=serde, schemars=schemars, derives=derives)
        if opener == "{":
            start = m.end() - 1
            end = _balanced(text, start, "{", "}")
            body = text[start + 1 : end - 1]
            item.source = text[m.start() : end]
            rename_all = serde.get("rename_all")
            rename_all = rename_all if isinstance(rename_all, str) else None
            if kind == "struct":
                item.fields = _parse_fields(body, rename_all)
            else:
                item.variants = _parse_variants(body, rename_all)
        if name in schema.items and not item.deserialized:
            continue
        schema.items[name] = item


def load_upstream_schema(schema_dir: Path) -> UpstreamSchema:
    schema = UpstreamSchema(items={}, functions={}, vocabularies={})
    for path in sorted(schema_dir.glob("*.rs")):
        parse_source(path.read_text(encoding="utf-8"), schema)
    return schema


# ---------------------------------------------------------------- defaults


def default_value(schema: UpstreamSchema, f: RField):
    """What serde fills in when the key is absent (``MISSING_REQUIRED`` if it is required).

    Returns a JSON-like value: ``None`` for an absent ``Option``, ``[]`` / ``{}`` for empty
    collections, the ``#[default]`` variant of an enum, the value of a ``default = "fn"``
    function, and ``OBJECT_DEFAULT`` for a struct whose ``Default`` is a whole object.
    """
    spec = f.serde.get("default")
    if isinstance(spec, str):
        body = schema.functions[spec]
        return _literal(body)
    if f.is_option:
        return None
    if spec is not True:
        return MISSING_REQUIRED
    return type_default(schema, f.type)


class _Marker:
    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


MISSING_REQUIRED = _Marker("MISSING_REQUIRED")
OBJECT_DEFAULT = _Marker("OBJECT_DEFAULT")


def type_default(schema: UpstreamSchema, tp: RType):
    if tp.name in ("Vec", "BTreeSet"):
        return []
    if tp.name == "BTreeMap":
        return {}
    if tp.name == "Option":
        return None
    if tp.name == "bool":
        return False
    if tp.name in ("usize", "u16", "u32", "u64", "i32", "i64"):
        return 0
    if tp.name in ("f32", "f64"):
        return 0.0
    if tp.name == "String":
        return ""
    item = schema.items.get(tp.name)
    if item is not None and item.kind == "enum":
        for v in item.variants:
            if v.is_default:
                return v.name
        raise ValueError(f"enum {tp.name} has no #[default] variant")
    if item is not None and item.kind == "struct":
        return OBJECT_DEFAULT
    raise ValueError(f"no default for {tp}")


def _literal(body: str):
    body = body.strip()
    if body == "true":
        return True
    if body == "false":
        return False
    if re.fullmatch(r"-?\d+", body):
        return int(body)
    if re.fullmatch(r"-?\d+\.\d*", body):
        return float(body)
    if body.startswith('"') and body.endswith('"'):
        return body[1:-1]
    raise ValueError(f"cannot read default function body {body!r}")
