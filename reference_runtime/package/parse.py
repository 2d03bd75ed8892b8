"""Finding and parsing the metadata file, safely.

- YAML is parsed with PyYAML's safe loader, but duplicate mapping keys (which PyYAML keeps
  silently, last one wins) are reported (A76), as are mapping keys that are not strings (A05).
- Aliases may be used, but a document whose expansion exceeds ``MAX_NODES`` or that refers to
  itself is refused (A77), so a hostile file cannot make validation hang.
- JSON goes through the standard parser with the same duplicate-key check.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from ..errors import Violation
from .rules.catalogue import hint_for

METADATA_NAMES = ("inference_metadata.yaml", "inference_metadata.yml", "inference_metadata.json")
MAX_NODES = 1_000_000
MAX_DEPTH = 200


def find_metadata(root: Path) -> Path | None:
    """The first of ``inference_metadata.yaml|.yml|.json`` in ``root`` (extension picks the parser)."""
    for name in METADATA_NAMES:
        candidate = root / name
        if candidate.is_file():
            return candidate
    return None


def _violation(code: str, path, message: str) -> Violation:
    return Violation(code=code, path=tuple(path), message=message, hint=hint_for(code))


class _Unparseable(Exception):
    pass


# ------------------------------------------------------------------ YAML


def _check_yaml_tree(root: yaml.Node) -> list[Violation]:
    """Walk the composed node graph: size/cycle limits and duplicate keys."""
    sizes: dict[int, int] = {}
    active: set[int] = set()
    found: list[Violation] = []

    def size(node: yaml.Node, depth: int) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in active:
            raise _Unparseable("the document refers to itself through an alias")
        if depth > MAX_DEPTH:
            raise _Unparseable(f"the document is nested deeper than {MAX_DEPTH} levels")
        active.add(key)
        total = 1
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                total += size(k, depth + 1) + size(v, depth + 1)
        elif isinstance(node, yaml.SequenceNode):
            for item in node.value:
                total += size(item, depth + 1)
        active.discard(key)
        sizes[key] = total
        if total > MAX_NODES:
            raise _Unparseable(f"the document expands to more than {MAX_NODES} nodes")
        return total

    size(root, 0)

    seen_nodes: set[int] = set()

    def dups(node: yaml.Node, path: tuple) -> None:
        if id(node) in seen_nodes:
            return
        seen_nodes.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first_line: dict[tuple, int] = {}
            for k, v in node.value:
                ident = (k.tag, k.value) if isinstance(k, yaml.ScalarNode) else None
                label = k.value if isinstance(k, yaml.ScalarNode) else "?"
                if ident is not None and ident in first_line:
                    found.append(
                        _violation(
                            "A76",
                            (*path, label),
                            f"key {label!r} appears twice in this mapping (lines "
                            f"{first_line[ident]} and {k.start_mark.line + 1}); YAML parsers "
                            "keep only the last one",
                        )
                    )
                elif ident is not None:
                    first_line[ident] = k.start_mark.line + 1
                dups(v, (*path, label))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                dups(item, (*path, i))

    dups(root, ())
    return found


def _parse_yaml(text: str) -> tuple[object, list[Violation]]:
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise _Unparseable("the file is empty")
        problems = _check_yaml_tree(node)
        data = loader.construct_document(node)
    finally:
        loader.dispose()
    return data, problems


# ------------------------------------------------------------------ JSON


class _JsonObject(dict):
    duplicates: list


def _json_object(pairs):
    obj = _JsonObject()
    obj.duplicates = []
    for key, value in pairs:
        if key in obj:
            obj.duplicates.append(key)
        obj[key] = value
    return obj


def _json_duplicates(data, path=()) -> list[Violation]:
    found: list[Violation] = []
    stack = [(data, path, 0)]
    while stack:
        node, here, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _Unparseable(f"the document is nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, dict):
            for key in getattr(node, "duplicates", []):
                found.append(
                    _violation("A76", (*here, key), f"key {key!r} appears twice in this object")
                )
            stack.extend((v, (*here, k), depth + 1) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, (*here, i), depth + 1) for i, v in enumerate(node))
    return found


# ------------------------------------------------------------------ common


def _non_string_keys(data) -> list[Violation]:
    found: list[Violation] = []
    stack = [(data, ())]
    seen: set[int] = set()
    while stack:
        node, here = stack.pop()
        if isinstance(node, dict | list):
            if id(node) in seen:
                continue
            seen.add(id(node))
        if isinstance(node, dict):
            for key, value in node.items():
                if not isinstance(key, str):
                    found.append(
                        _violation(
                            "A05",
                            (*here, str(key).lower() if isinstance(key, bool) else str(key)),
                            f"mapping key {key!r} is a {type(key).__name__}, not a string "
                            f"(quote it: '{str(key).lower() if isinstance(key, bool) else key}')",
                        )
                    )
                else:
                    stack.append((value, (*here, key)))
        elif isinstance(node, list):
            stack.extend((v, (*here, i)) for i, v in enumerate(node))
    return found


def parse_metadata(path: Path) -> tuple[object | None, list[Violation]]:
    """Parse a metadata file. Returns ``(document, violations)``; the document is ``None``
    when it could not be parsed at all."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, [_violation("A77", (), f"{path.name} is not UTF-8 text ({exc.reason})")]
    try:
        if path.suffix == ".json":
            data = json.loads(text, object_pairs_hook=_json_object)
            problems = _json_duplicates(data)
        else:
            data, problems = _parse_yaml(text)
    except _Unparseable as exc:
        return None, [_violation("A77", (), f"{path.name}: {exc}")]
    except yaml.YAMLError as exc:
        where = ""
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            where = f" at line {mark.line + 1}, column {mark.column + 1}"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        return None, [_violation("A77", (), f"{path.name} is not valid YAML{where}: {problem}")]
    except json.JSONDecodeError as exc:
        return None, [
            _violation(
                "A77",
                (),
                f"{path.name} is not valid JSON at line {exc.lineno}, column {exc.colno}: "
                f"{exc.msg}",
            )
        ]
    except RecursionError:
        return None, [_violation("A77", (), f"{path.name} is nested too deeply to parse")]
    if not isinstance(data, dict):
        kind = type(data).__name__ if data is not None else "empty"
        return None, [
            _violation("A77", (), f"{path.name} must hold a mapping at the top, not {kind}")
        ]
    problems += _non_string_keys(data)
    return data, problems
