"""Structural validation: the published JSON Schema, run through ``jsonschema``, with each
failure turned into a :class:`Violation` that carries a rule code, a location and a fix."""

from __future__ import annotations

import difflib
import functools
import json
from pathlib import Path

import jsonschema

from ..errors import Violation
from .rules.catalogue import hint_for
from .schema import SCHEMA_PATH

_VALUE_KEYWORDS_INHERITED = ("items", "additionalProperties", "propertyNames")


@functools.cache
def _validator(schema_path: Path = SCHEMA_PATH) -> jsonschema.Draft202012Validator:
    schema = json.loads(schema_path.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _resolve(root: dict, node):
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        assert ref.startswith("#/"), ref
        target = root
        for part in ref[2:].split("/"):
            target = target[part]
        node = target
    return node


def _schema_trail(root: dict, schema_path) -> list[tuple[object, dict]]:
    """The dict schemas visited along an error's schema path, with the key that led there."""
    trail: list[tuple[object, dict]] = [(None, root)]
    node = root
    for key in schema_path:
        if isinstance(node, dict) and key not in node and "$ref" in node:
            node = _resolve(root, node)
        if isinstance(node, dict | list):
            node = node[key]
        else:  # keyword value reached
            break
        if isinstance(node, dict):
            trail.append((key, node))
    return trail


def _rule_for(error: jsonschema.ValidationError, default: str, root: dict) -> str:
    trail = _schema_trail(root, error.absolute_schema_path)
    key, final = trail[-1]
    if "x-rule" in final:
        return final["x-rule"]
    if key in _VALUE_KEYWORDS_INHERITED and len(trail) >= 2 and "x-rule" in trail[-2][1]:
        return trail[-2][1]["x-rule"]
    return default


def _type_name(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "mapping"
    return type(value).__name__


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _violations_for(error: jsonschema.ValidationError, seen: set, root: dict) -> list[Violation]:
    path = tuple(error.absolute_path)
    kw = error.validator
    schema = error.schema if isinstance(error.schema, dict) else {}
    out: list[Violation] = []

    def add(code: str, where: tuple, message: str, hint: str | None = None) -> None:
        ident = (code, where, message)
        if ident in seen:
            return
        seen.add(ident)
        out.append(Violation(code, where, message, hint or hint_for(code)))

    if kw == "additionalProperties" and schema.get("additionalProperties") is False:
        allowed = list(schema.get("properties", {}))
        removed = schema.get("x-removed-keys", {})
        for key in error.instance:
            if key in allowed:
                continue
            if key in removed:
                add("A02", (*path, key), f"key {key!r} was removed from the format: {removed[key]}")
                continue
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = hint_for("A01")
            if close:
                hint = f"did you mean {close[0]!r}? " + hint
            add(
                "A01",
                (*path, key),
                f"unknown key {key!r}; allowed here: {', '.join(allowed) or '(none)'}",
                hint,
            )
        return out
    if kw == "required":
        code = schema.get("x-required-rule", "A03")
        for key in error.validator_value:
            if isinstance(error.instance, dict) and key not in error.instance:
                add(code, (*path, key), f"missing required key {key!r}")
        return out
    if "propertyNames" in error.absolute_schema_path:
        # jsonschema reports the object holding the key; point at the key itself.
        key = error.instance
        code = _rule_for(error, "A05", root)
        if kw == "enum":
            message = f"{key!r} is not one of: {', '.join(map(str, error.validator_value))}"
        elif kw == "pattern":
            why = schema.get("description", f"keys must match {error.validator_value}")
            message = f"key {key!r} is not allowed here: {why}"
        else:
            message = "empty key where a name is required"
        add(code, (*path, key), message)
        return out
    if kw in ("enum", "const"):
        removed = schema.get("x-removed-values", {})
        if not isinstance(error.instance, dict | list) and error.instance in removed:
            add(
                "A04",
                path,
                f"{error.instance!r} is not part of the format: {removed[error.instance]}",
            )
            return out
        allowed = schema.get("enum", [schema.get("const")])
        code = _rule_for(error, "A04", root)
        close = difflib.get_close_matches(str(error.instance), [str(a) for a in allowed], n=1)
        hint = hint_for(code)
        if close:
            hint = f"did you mean {close[0]!r}? " + hint
        add(
            code,
            path,
            f"{_short(error.instance)} is not one of: {', '.join(map(str, allowed))}",
            hint,
        )
        return out
    code = _rule_for(error, "A05", root)
    value = error.instance
    slot = _one_step(path) if kw == "type" and not isinstance(value, dict) else None
    if slot is not None:
        # upstream: a step (a branch's case and default too) is one step (a mapping), not a
        # list of steps or a scalar; one finding, not one per kind of step it is not
        ident = ("one-step", path)
        if ident not in seen:
            seen.add(ident)
            what = (
                f"a list of {len(value)}"
                if isinstance(value, list)
                else f"{_type_name(value)} {_short(value)}"
            )
            out.append(
                Violation(
                    "A05",
                    path,
                    f"{slot} is one step, not {what}",
                    "Write the step itself, a mapping with its `kind`; for several steps write "
                    "one `{kind: sequence, steps: [...]}`.",
                )
            )
        return out
    if kw == "type":
        expected = error.validator_value
        expected = " or ".join(expected) if isinstance(expected, list) else expected
        message = f"expected {expected}, got {_type_name(value)} {_short(value)}"
    elif kw in ("minimum", "exclusiveMinimum"):
        bound = "at least" if kw == "minimum" else "greater than"
        message = f"{_short(value)} is out of range: must be {bound} {error.validator_value}"
    elif kw == "maximum":
        message = f"{_short(value)} is out of range: must be at most {error.validator_value}"
    elif kw == "minLength":
        message = "empty string where a name or value is required"
    elif kw == "minItems":
        message = f"empty list: at least {error.validator_value} item(s) required"
    elif kw == "minProperties":
        message = f"empty mapping: at least {error.validator_value} entry required"
    elif kw == "anyOf":
        message = f"{_short(value)} is not a valid value here ({_type_name(value)})"
    else:
        message = error.message
    add(code, path, message)
    return out


def _one_step(path: tuple) -> str | None:
    """What holds one step at ``path``, in words: an entry of a workflow's, loop's or sequence's
    ``steps`` or of a loop's ``setup``, or a branch's case (``...cases.<key>``) or default
    (``...default``); None elsewhere (a phi's ``cases.<key>`` and ``default`` name values)."""
    if path[:3] != ("pipeline", "workflow", "steps"):
        return None
    slot, holder = None, "steps"  # holder: what the next key indexes
    for key in path[3:]:
        if holder in ("steps", "setup"):
            slot, holder = f"an entry of a {holder} list", "step"
        elif holder == "cases":
            slot, holder = "a branch case", "step"
        elif key in ("steps", "setup", "cases"):
            slot, holder = None, key
        elif key == "default":
            slot = "a branch default"
        else:
            return None  # a step's other fields
    return slot


def schema_violations(document: dict, schema_path: Path = SCHEMA_PATH) -> list[Violation]:
    """Every structural violation of ``document`` against the schema of its revision
    (unsorted; the caller orders them)."""
    seen: set = set()
    out: list[Violation] = []
    validator = _validator(schema_path)
    for error in validator.iter_errors(document):
        out += _violations_for(error, seen, validator.schema)
    return out
