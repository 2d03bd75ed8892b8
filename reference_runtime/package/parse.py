"""Finding and parsing the metadata file, safely.

- YAML is parsed with PyYAML's safe loader, but duplicate mapping keys (which PyYAML keeps
  silently, last one wins) are reported (A76), as are mapping keys that are not strings (A05).
- Aliases may be used, but a document whose expansion exceeds ``MAX_NODES`` or that refers to
  itself is refused (A77), so a hostile file cannot make validation hang. So is a document
  nested deeper than ``MAX_DEPTH`` (later stages walk it recursively) and an integer longer
  than ``MAX_INT_DIGITS`` digits (Python cannot even print it).
- Values PyYAML cannot construct (``2001-13-45`` read as a date) are A77 at their line.
- JSON goes through the standard parser with the same duplicate-key check.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from ..errors import Violation
from .rules.catalogue import hint_for

METADATA_NAMES = ("inference_metadata.yaml", "inference_metadata.yml", "inference_metadata.json")
# Structural validation costs ~50 microseconds per expanded node, so this bounds a 300-byte
# alias bomb to a few seconds; real documents have a few thousand nodes.
MAX_NODES = 100_000
# Leaves headroom under Python's recursion limit for the schema validator (several frames per
# level); real documents are nested about a dozen levels deep.
MAX_DEPTH = 64
MAX_INT_DIGITS = 1000
_INT_LIMIT = 10**MAX_INT_DIGITS


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
    sizes: dict[int, tuple[int, int]] = {}  # node -> (expanded size, levels below it)
    active: set[int] = set()
    found: list[Violation] = []

    def size(node: yaml.Node, depth: int) -> tuple[int, int]:
        key = id(node)
        if key in active:
            raise _Unparseable("the document refers to itself through an alias")
        if key in sizes:
            total, height = sizes[key]
        else:
            active.add(key)
            children: list[yaml.Node] = []
            if isinstance(node, yaml.MappingNode):
                children = [n for pair in node.value for n in pair]
            elif isinstance(node, yaml.SequenceNode):
                children = list(node.value)
            total, height = 1, 0
            for child in children:
                child_total, child_height = size(child, depth + 1)
                total += child_total
                height = max(height, child_height + 1)
            active.discard(key)
            sizes[key] = total, height
        # An alias puts a whole subtree at a new depth, so check its deepest level every time.
        if depth + height > MAX_DEPTH:
            raise _Unparseable(f"the document is nested deeper than {MAX_DEPTH} levels")
        if total > MAX_NODES:
            raise _Unparseable(f"the document expands to more than {MAX_NODES} nodes")
        return total, height

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


try:  # libyaml's event parser, when PyYAML was built with it (about 3x faster)
    from yaml._yaml import CParser as _EventParser
except ImportError:  # pragma: no cover - pure-Python PyYAML
    _EventParser = None


class _Loader(yaml.SafeLoader):
    """The safe loader, with values it cannot construct reported at their line. Events come
    from libyaml where available; composing (with our depth check) and constructing stay in
    Python, so both parsers give the same nodes, marks and checks."""

    def check_event(self, *choices):
        if self._events is None:
            return super().check_event(*choices)
        return self._events.check_event(*choices)

    def peek_event(self):
        if self._events is None:
            return super().peek_event()
        return self._events.peek_event()

    def get_event(self):
        if self._events is None:
            return super().get_event()
        return self._events.get_event()

    def dispose(self):
        if self._events is not None:
            self._events.dispose()
        super().dispose()

    def construct_object(self, node, deep=False):
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, OverflowError) as exc:
            text = repr(node.value) if isinstance(node.value, str) else node.tag
            if len(text) > 40:
                text = text[:37] + "..."
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot read the value {text} ({exc})", node.start_mark
            ) from None

    def construct_yaml_int(self, node):
        try:
            value = super().construct_yaml_int(node)
        except ValueError:  # Python's own limit on decimal digits
            value = _INT_LIMIT
        if abs(value) >= _INT_LIMIT:
            raise ValueError(f"integers are limited to {MAX_INT_DIGITS} digits")
        return value

    def __init__(self, stream):
        super().__init__(stream)
        self._events = _EventParser(stream) if _EventParser is not None else None
        self.depth = 0

    def compose_node(self, parent, index):
        # Refuse deep nesting while composing, before PyYAML's recursion runs out of stack.
        if self.depth > MAX_DEPTH:
            line = self.peek_event().start_mark.line + 1
            raise _Unparseable(
                f"the document is nested deeper than {MAX_DEPTH} levels (line {line})"
            )
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)


def _parse_yaml(text: str) -> tuple[object, list[Violation]]:
    loader = _Loader(text)
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


def _json_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _Unparseable(f"an integer has more than {MAX_INT_DIGITS} digits")
    return int(text)


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


def _key_text(key) -> str:
    """How a non-string key is written in YAML (``true``, ``null``, ``1.5``)."""
    if isinstance(key, bool):
        return str(key).lower()
    return "null" if key is None else str(key)


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
                            (*here, _key_text(key)),
                            f"mapping key {key!r} is a {type(key).__name__}, not a string "
                            f"(quote it: '{_key_text(key)}')",
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
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        return None, [_violation("A77", (), f"{path.name} cannot be read ({reason})")]
    except UnicodeDecodeError as exc:
        return None, [_violation("A77", (), f"{path.name} is not UTF-8 text ({exc.reason})")]
    return parse_metadata_text(text, path)


def parse_metadata_text(text: str, path: Path) -> tuple[object | None, list[Violation]]:
    """Parse metadata text; ``path`` names it in messages and its suffix picks the parser."""
    try:
        if path.suffix == ".json":
            data = json.loads(text, object_pairs_hook=_json_object, parse_int=_json_int)
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
