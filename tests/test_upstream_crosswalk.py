"""The crosswalk: our published JSON Schema against the format's upstream schema types.

The upstream Rust types (``../shared/spec/upstream/schema/*.rs``, read by
``upstream_schema.py``) are walked from ``InferenceMetadata`` down; at every struct the
corresponding definition of our schema is found (each of our definitions names the upstream
type it models in ``x-upstream``) and compared field by field: the document keys, which are
required, the default serde fills in, whether unknown keys are refused, each enum's variants,
each tagged union's kinds, and the shape of every value (single, list, mapping, scalar type).

Every difference must be listed, with its reason, in the departures table of
``docs/format.md``; a documented departure that no longer exists fails too, so the table is
always exactly the set of differences.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from reference_runtime.package.schema import published_schema
from tests.conftest import SHARED
from tests.upstream_schema import (
    MISSING_REQUIRED,
    OBJECT_DEFAULT,
    RField,
    RItem,
    RType,
    UpstreamSchema,
    default_value,
    load_upstream_schema,
)

UPSTREAM_SCHEMA = SHARED / "spec" / "upstream" / "schema"
FORMAT_DOC = Path(__file__).resolve().parents[1] / "docs" / "format.md"

INTEGERS = {"usize", "u16", "u32", "u64", "i32", "i64"}
FLOATS = {"f32", "f64"}


@dataclass(frozen=True, order=True)
class Difference:
    where: str  # `Type.field` or `Type`
    kind: str  # what differs (see KINDS)
    detail: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.where, self.kind)


KINDS = {
    "unmapped": "the upstream type has no definition of ours (or maps to another one)",
    "closed": "upstream and we disagree on refusing unknown keys",
    "missing-field": "an upstream field we do not have",
    "extra-field": "a field of ours upstream does not have",
    "required": "required upstream and optional here, or the reverse",
    "default": "a different default value",
    "shape": "single value vs list vs mapping vs scalar type",
    "variants": "a different set of enum variants or tagged-union kinds",
    "vocabulary": "an open (extensible) string upstream that we restrict to a list",
    "range": "a different numeric range (upstream `schemars(range(..))`)",
}


class Crosswalk:
    def __init__(self, upstream: UpstreamSchema, ours: dict):
        self.up = upstream
        self.root = ours
        self.defs = ours["$defs"]
        self.diffs: list[Difference] = []
        self.compared_fields = 0
        self.compared_variants = 0
        self._seen: set[str] = set()

    # ------------------------------------------------------------ helpers

    def resolve(self, node: dict) -> dict:
        while isinstance(node, dict) and "$ref" in node:
            node = self.defs[node["$ref"].rsplit("/", 1)[-1]]
        return node

    def add(self, where: str, kind: str, detail: str = "") -> None:
        self.diffs.append(Difference(where, kind, detail))

    # ------------------------------------------------------------ structs

    def struct(self, item: RItem, node: dict, where: str) -> None:
        node = self.resolve(node)
        if node.get("x-upstream") != item.name:
            self.add(
                where,
                "unmapped",
                f"{item.name} maps to a definition marked {node.get('x-upstream')}",
            )
            return
        if item.name in self._seen:
            return
        self._seen.add(item.name)
        self.fields(item.name, item.fields, node)
        closed = node.get("additionalProperties") is False
        if closed != item.closed:
            self.add(item.name, "closed", f"upstream {'closed' if item.closed else 'open'}")

    def fields(self, owner: str, fields: list[RField], node: dict, skip=()) -> None:
        props = {k: v for k, v in node.get("properties", {}).items() if k not in skip}
        required = set(node.get("required", ())) - set(skip)
        for f in fields:
            where = f"{owner}.{f.name}"
            self.compared_fields += 1
            if f.name not in props:
                self.add(where, "missing-field", str(f.type))
                continue
            ours = props[f.name]
            up_required = f.required
            if up_required != (f.name in required):
                self.add(where, "required", f"upstream {'required' if up_required else 'optional'}")
            elif not up_required:
                self.default(where, f, ours)
            self.value(f.type, ours, where, f)
        for key in props:
            if key not in {f.name for f in fields}:
                self.add(f"{owner}.{key}", "extra-field")

    def default(self, where: str, f: RField, ours: dict) -> None:
        expected = default_value(self.up, f)
        if expected is MISSING_REQUIRED or expected is OBJECT_DEFAULT:
            return
        item = self.up.items.get(f.type.name)
        if item is not None and item.tag and isinstance(expected, str):
            expected = {item.tag: expected}  # a tagged union's default variant
        if expected in (None, [], {}):
            # serde's empty default: ours must not claim a non-empty one
            if "default" in ours and ours["default"] not in (None, [], {}):
                self.add(where, "default", f"upstream empty, ours {ours['default']!r}")
            return
        if ours.get("default") != expected or type(ours.get("default")) is not type(expected):
            self.add(where, "default", f"upstream {expected!r}, ours {ours.get('default')!r}")

    # ------------------------------------------------------------ values

    def value(self, tp: RType, node: dict, where: str, f: RField | None = None) -> None:
        if tp.name in ("Option", "Box"):
            return self.value(tp.args[0], node, where, f)
        node = self.resolve(node)
        if tp.name in ("Vec", "BTreeSet"):
            if node.get("type") != "array":
                return self.add(where, "shape", f"upstream list of {tp.args[0]}")
            return self.value(tp.args[0], node.get("items", {}), f"{where}[]")
        if tp.name == "BTreeMap":
            if node.get("type") != "object" or not isinstance(
                node.get("additionalProperties"), dict
            ):
                return self.add(where, "shape", f"upstream mapping of {tp.args[1]}")
            return self.value(tp.args[1], node["additionalProperties"], f"{where}{{}}")
        if tp.name == "String":
            vocab = self.vocabulary(f)
            is_enum = "enum" in node and all(isinstance(v, str) for v in node["enum"])
            if node.get("type") != "string" and not is_enum:
                return self.add(where, "shape", "upstream string")
            if "enum" in node:
                self.add(
                    where, "vocabulary", "upstream open string" + (" (extensible)" if vocab else "")
                )
            return None
        if tp.name == "bool":
            if node.get("type") != "boolean":
                self.add(where, "shape", "upstream bool")
            return None
        if tp.name in INTEGERS:
            if node.get("type") != "integer":
                self.add(where, "shape", f"upstream integer ({tp.name})")
            return self.bounds(f, node, where)
        if tp.name in FLOATS:
            if node.get("type") != "number":
                self.add(where, "shape", f"upstream number ({tp.name})")
            return self.bounds(f, node, where)
        item = self.up.items.get(tp.name)
        if item is None:
            raise AssertionError(f"{where}: upstream type {tp} is not known to the reader")
        if item.kind == "struct":
            return self.struct(item, node, where)
        if item.untagged or item.name == "TensorDimension":
            return self.untagged(item, node, where)
        if item.tag:
            return self.tagged(item, node, where)
        return self.unit_enum(item, node, where)

    def bounds(self, f: RField | None, node: dict, where: str) -> None:
        """An upstream ``#[schemars(range(min = .., max = ..))]`` against our minimum and
        maximum (only where upstream states a range)."""
        stated = f.schemars.get("range") if f is not None else None
        if not isinstance(stated, str):
            return None
        up = {k: float(v) for k, v in re.findall(r"(min|max)\s*=\s*(-?[0-9.]+)", stated)}
        ours = {
            k: float(node[key])
            for k, key in (("min", "minimum"), ("max", "maximum"))
            if isinstance(node.get(key), int | float)
        }
        if up != ours:
            self.add(where, "range", f"upstream {stated}, ours {ours or 'unbounded'}")
        return None

    def vocabulary(self, f: RField | None) -> bool:
        if f is None:
            return False
        with_ = f.schemars.get("with")
        return isinstance(with_, str) and "schema_vocabulary" in with_

    def unit_enum(self, item: RItem, node: dict, where: str) -> None:
        self.compared_variants += len(item.variants)
        values = node.get("enum")
        if values is None:
            return self.add(where, "shape", f"upstream enum {item.name}")
        up = {v.name for v in item.variants}
        if set(values) != up:
            missing = sorted(up - set(values))
            extra = sorted(set(values) - up)
            self.add(where, "variants", f"missing {missing}, extra {extra}")
        return None

    def tagged(self, item: RItem, node: dict, where: str) -> None:
        kinds = node.get("properties", {}).get("kind", {}).get("enum")
        if kinds is None:
            return self.add(where, "shape", f"upstream tagged union {item.name}")
        self.compared_variants += len(item.variants)
        up = {v.name for v in item.variants}
        if set(kinds) != up:
            missing = sorted(up - set(kinds))
            extra = sorted(set(kinds) - up)
            self.add(where, "variants", f"missing {missing}, extra {extra}")
        if item.name in self._seen:
            return None
        self._seen.add(item.name)
        branches = {}
        for branch in node.get("allOf", ()):
            kind = branch["if"]["properties"]["kind"]["const"]
            branches[kind] = self.resolve(branch["then"])
        for v in item.variants:
            if v.name not in branches:
                continue
            owner = f"{item.name}::{v.rust_name}"
            variant = branches[v.name]
            if variant.get("x-upstream") != owner:
                self.add(owner, "unmapped", f"maps to {variant.get('x-upstream')}")
                continue
            self.fields(owner, v.fields or [], variant, skip=("kind",))
            if (variant.get("additionalProperties") is False) != item.closed:
                self.add(owner, "closed", f"upstream {'closed' if item.closed else 'open'}")
        return None

    def untagged(self, item: RItem, node: dict, where: str) -> None:
        """Untagged unions compare by the JSON types they accept."""
        self.compared_variants += len(item.variants)
        if node.get("x-upstream") not in (None, item.name):
            self.add(where, "unmapped", f"maps to {node.get('x-upstream')}")
        expected = self.accepted_types(RType(item.name))
        actual = self.schema_types(node)
        if expected != actual:
            self.add(where, "shape", f"upstream accepts {sorted(expected)}, ours {sorted(actual)}")

    def accepted_types(self, tp: RType) -> set[str]:
        if tp.name in ("Option", "Box"):
            return self.accepted_types(tp.args[0])
        if tp.name in ("Vec", "BTreeSet"):
            return {"array"}
        if tp.name in ("BTreeMap",):
            return {"object"}
        if tp.name == "String":
            return {"string"}
        if tp.name == "bool":
            return {"boolean"}
        if tp.name in INTEGERS:
            return {"integer"}
        if tp.name in FLOATS:
            return {"number"}
        if tp.name == "TensorDimension":
            return {"integer", "string"}
        item = self.up.items[tp.name]
        if item.untagged:
            out: set[str] = set()
            for v in item.variants:
                if v.fields is not None:
                    out.add("object")
                for t in v.tuple_types or ():
                    out |= self.accepted_types(t)
            return out
        if item.kind == "enum" and not item.tag:
            return {"string"}
        return {"object"}

    def schema_types(self, node: dict) -> set[str]:
        node = self.resolve(node)
        out: set[str] = set()
        for key in ("anyOf", "oneOf"):
            for member in node.get(key, ()):
                out |= self.schema_types(member)
        t = node.get("type")
        if isinstance(t, str):
            out.add(t)
        elif isinstance(t, list):
            out |= set(t)
        if "enum" in node and not t:
            out.add("string")
        return out


def run_crosswalk() -> Crosswalk:
    upstream = load_upstream_schema(UPSTREAM_SCHEMA)
    walk = Crosswalk(upstream, published_schema())
    walk.struct(upstream["InferenceMetadata"], walk.root["$ref"] and walk.root, "InferenceMetadata")
    return walk


_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|\s*([a-z-]+)\s*\|(.*)\|\s*$")


def documented_departures() -> dict[tuple[str, str], str]:
    """The departures table of docs/format.md: (where, kind) -> reason."""
    text = FORMAT_DOC.read_text(encoding="utf-8")
    section = text.split("## Departures from the upstream schema", 1)
    assert len(section) == 2, "docs/format.md has no 'Departures from the upstream schema' section"
    body = section[1].split("\n## ", 1)[0]
    rows: dict[tuple[str, str], str] = {}
    for line in body.splitlines():
        m = _ROW.match(line.strip())
        if m:
            key = (m.group(1), m.group(2))
            assert key not in rows, f"departure {key} is listed twice"
            rows[key] = m.group(3).strip()
    return rows


@pytest.fixture(scope="module")
def crosswalk() -> Crosswalk:
    if not UPSTREAM_SCHEMA.is_dir():
        pytest.skip(
            f"the upstream schema sources ({UPSTREAM_SCHEMA}) are absent; set ONNX_GENAI_SHARED"
        )
    return run_crosswalk()


def test_every_difference_is_a_documented_departure(crosswalk):
    documented = documented_departures()
    found = {d.key: d for d in crosswalk.diffs}
    undocumented = sorted(d for k, d in found.items() if k not in documented)
    stale = sorted(k for k in documented if k not in found)
    lines = [f"  {d.where} [{d.kind}] {d.detail}" for d in undocumented]
    lines += [f"  documented but no longer different: {w} [{k}]" for w, k in stale]
    assert not lines, "schema crosswalk differences:\n" + "\n".join(lines)


def test_departures_give_reasons(crosswalk):
    for key, reason in documented_departures().items():
        assert len(reason) >= 10, f"departure {key} has no reason"


def test_the_crosswalk_reaches_every_section(crosswalk):
    # The walk starts at the root and must reach every section of the document.
    reached = crosswalk._seen
    for name in (
        "WorkflowSpec",
        "WorkflowStep",
        "GenerationContract",
        "PackageFacts",
        "AdapterServiceContract",
        "PreprocessingSpec",
        "TaskProfile",
        "SpeculativeContract",
        "ModelIoSpec",
        "HardwareRequirements",
        "QuantizationIntent",
    ):
        assert name in reached, f"the crosswalk never reached {name}"
    assert crosswalk.compared_fields > 300
    assert crosswalk.compared_variants > 100


def _def(schema: dict, upstream: str) -> dict:
    return next(v for v in schema["$defs"].values() if v.get("x-upstream") == upstream)


def _remove_field(schema):
    del _def(schema, "WorkflowInput")["properties"]["present_as"]


def _extra_variant(schema):
    _def(schema, "WorkflowOutput")["properties"]["role"]["enum"].append("logits")


def _open_a_closed_section(schema):
    del _def(schema, "WorkflowSpec")["additionalProperties"]


def _wrong_default(schema):
    _def(schema, "AdapterPlanningContract")["properties"]["stable_buffers"]["default"] = False


def _required_becomes_optional(schema):
    _def(schema, "WorkflowStateCell")["required"].remove("initializer")


def _list_instead_of_a_step(schema):
    branch = _def(schema, "WorkflowStep::Branch")
    branch["properties"]["cases"]["additionalProperties"] = {
        "type": "array",
        "items": {"$ref": "#/$defs/Step"},
    }


def _drop_a_tagged_kind(schema):
    step = schema["$defs"]["Step"]
    step["properties"]["kind"]["enum"].remove("sequence")


PLANTS = [
    (_remove_field, "WorkflowInput.present_as", "missing-field"),
    (_extra_variant, "WorkflowOutput.role", "variants"),
    (_open_a_closed_section, "WorkflowSpec", "closed"),
    (_wrong_default, "AdapterPlanningContract.stable_buffers", "default"),
    (_required_becomes_optional, "WorkflowStateCell.initializer", "required"),
    (_list_instead_of_a_step, "WorkflowStep::Branch.cases{}", "shape"),
    (_drop_a_tagged_kind, "WorkflowSpec.steps[]", "variants"),
]


@pytest.mark.parametrize("plant, where, kind", PLANTS, ids=[p[0].__name__ for p in PLANTS])
def test_the_reader_catches_a_planted_difference(plant, where, kind):
    """The crosswalk can fail: plant one difference in a copy of our schema and it is reported."""
    if not UPSTREAM_SCHEMA.is_dir():
        pytest.skip(
            f"the upstream schema sources ({UPSTREAM_SCHEMA}) are absent; set ONNX_GENAI_SHARED"
        )
    import copy

    schema = copy.deepcopy(published_schema())
    plant(schema)
    upstream = load_upstream_schema(UPSTREAM_SCHEMA)
    walk = Crosswalk(upstream, schema)
    walk.struct(upstream["InferenceMetadata"], schema, "InferenceMetadata")
    found = {d.key for d in walk.diffs}
    assert (where, kind) in found, sorted(found)
