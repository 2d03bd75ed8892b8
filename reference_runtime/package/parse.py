"""Finding and parsing the metadata file, safely and within bounds.

Every limit (``limits.py``) is checked before the work it bounds is done, and each is a rule:

- A98: the file is larger than ``MAX_METADATA_BYTES`` (checked on its size, before reading).
- A99: the document has more than ``MAX_NODES`` nodes: counted on YAML's events (libyaml's,
  before any node is composed; the composer counts again) and on JSON's tokens (before
  ``json.loads`` builds anything); YAML aliases are then expanded virtually, so a 300-byte
  alias bomb is refused too.
- A100: the document is nested deeper than ``MAX_DEPTH`` levels (later stages walk it
  recursively).
- A101: a string (key or value) longer than ``MAX_SCALAR_CHARS`` characters.
- A102: an integer longer than ``MAX_INT_DIGITS`` digits, counted on its text before any
  conversion (YAML's base-60 ``1:59:59`` and hex forms included).

Beyond the limits:

- YAML is parsed with PyYAML's safe loader, but duplicate mapping keys (which PyYAML keeps
  silently, last one wins) are reported (A76), as are mapping keys that are not strings (A05).
- A document that refers to itself through an alias, and values PyYAML cannot construct
  (``2001-13-45`` read as a date), are A77 at their line.
- JSON goes through the standard parser with the same duplicate-key check.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import yaml

from ..errors import Violation
from .limits import MAX_DEPTH, MAX_INT_DIGITS, MAX_NODES, MAX_SCALAR_CHARS, limit
from .rules.catalogue import hint_for

METADATA_NAMES = ("inference_metadata.yaml", "inference_metadata.yml", "inference_metadata.json")
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
    """The document cannot be read (A77, or the limit rule ``code``)."""

    def __init__(self, message: str, code: str = "A77"):
        super().__init__(message)
        self.code = code


def _too_many_nodes(where: str = "") -> _Unparseable:
    return _Unparseable(f"the document has more than {MAX_NODES} nodes{where}", "A99")


def _too_deep(where: str = "") -> _Unparseable:
    return _Unparseable(f"the document is nested deeper than {MAX_DEPTH} levels{where}", "A100")


def _too_long_scalar(length: int, where: str) -> _Unparseable:
    return _Unparseable(
        f"a string{where} has {length} characters; strings are limited to {MAX_SCALAR_CHARS}",
        "A101",
    )


def _too_long_int(length: int, where: str, what: str = "an integer") -> _Unparseable:
    return _Unparseable(
        f"{what}{where} is written with {length} characters; integers are limited to "
        f"{MAX_INT_DIGITS} digits",
        "A102",
    )


# What YAML's int and float patterns are made of (base-60 and hexadecimal included).
_NUMBER_CHARS = "0123456789_:.+-eExXoObBabcdfABCDF"


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
            raise _too_deep(" (through an alias)")
        if total > MAX_NODES:
            raise _Unparseable(
                f"the document expands (through its aliases) to more than {MAX_NODES} nodes", "A99"
            )
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
        # Counted on the text, before PyYAML converts it (base 60 conversion is quadratic).
        digits = node.value.replace("_", "").lstrip("+-")
        if len(digits) > MAX_INT_DIGITS:
            raise _too_long_int(len(digits), f" at line {node.start_mark.line + 1}")
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
        self.nodes = 0
        self._scalar_line = 0

    def compose_node(self, parent, index):
        # Refuse deep nesting while composing, before PyYAML's recursion runs out of stack, and
        # a document of too many nodes before its tree is built.
        if self.depth > MAX_DEPTH:
            raise _too_deep(f" (line {self.peek_event().start_mark.line + 1})")
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _too_many_nodes(f" (the limit is reached at line {self._line()})")
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def compose_scalar_node(self, anchor):
        length = len(self.peek_event().value)
        self._scalar_line = self._line()
        if length > MAX_SCALAR_CHARS:
            raise _too_long_scalar(length, f" at line {self._scalar_line}")
        return super().compose_scalar_node(anchor)

    def resolve(self, kind, value, implicit):
        # PyYAML's number patterns backtrack over a long plain scalar (0.5 s for 900 KB): a
        # number-shaped one beyond the digit limit is refused before they run.
        if (
            kind is yaml.ScalarNode
            and implicit[0]
            and len(value) > MAX_INT_DIGITS
            and value.lstrip("+-")[:1].isdigit()
            and not value.strip(_NUMBER_CHARS)
        ):
            raise _too_long_int(len(value), f" at line {self._scalar_line}", "a number")
        return super().resolve(kind, value, implicit)

    def _line(self) -> int:
        return self.peek_event().start_mark.line + 1


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)


_NODE_EVENTS = (yaml.ScalarEvent, yaml.SequenceStartEvent, yaml.MappingStartEvent, yaml.AliasEvent)
_OPENING = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_CLOSING = (yaml.SequenceEndEvent, yaml.MappingEndEvent)


def _count_events(text: str) -> None:
    """Refuse a document of too many nodes on libyaml's events alone (several times cheaper
    than composing them), before any node is built. Syntax errors and nesting are left to
    the loader, which says where."""
    if _EventParser is None:
        return
    events = _EventParser(text)
    nodes = depth = 0
    try:
        while events.check_event():
            event = events.get_event()
            if isinstance(event, _CLOSING):
                depth -= 1
            elif isinstance(event, _NODE_EVENTS):
                if depth > MAX_DEPTH:  # too deep: the loader says where (A100)
                    return
                if isinstance(event, _OPENING):
                    depth += 1
                nodes += 1
                if nodes > MAX_NODES:
                    raise _too_many_nodes(
                        f" (the limit is reached at line {event.start_mark.line + 1})"
                    )
    except yaml.YAMLError:
        return
    finally:
        events.dispose()


def _parse_yaml(text: str) -> tuple[object, list[Violation]]:
    _count_events(text)
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


# A token of a JSON text: a string (possibly unterminated), a bracket, a number or a literal.
_JSON_TOKEN = re.compile(
    r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[{]|[\]}]|-?[0-9][0-9.eE+-]*|true|false|null|NaN|-?Infinity'
)


def _scan_json(text: str) -> None:
    """Refuse a JSON text beyond the limits before anything is built: nodes (every value and
    key), depth, string length and integer length are counted on its tokens. Text that is
    not JSON passes through, for the parser to report where."""
    nodes = depth = 0

    def where(match) -> str:
        return f" at line {text.count(chr(10), 0, match.start()) + 1}"

    for match in _JSON_TOKEN.finditer(text):
        token = match.group()
        first = token[0]
        if first in "]}":
            depth -= 1
            continue
        nodes += 1
        if nodes > MAX_NODES:
            raise _too_many_nodes(f" (the limit is reached{where(match)})")
        # The top-level value is at depth 0, a key at the depth of its value (as YAML counts).
        if depth > MAX_DEPTH:
            raise _too_deep(f" ({where(match)[1:]})")
        if first in "[{":
            depth += 1
        elif first == '"':
            if len(token) - 2 > MAX_SCALAR_CHARS:
                raise _too_long_scalar(len(token) - 2, where(match))
        elif (first == "-" or first.isdigit()) and not any(c in token for c in ".eE"):
            digits = len(token.lstrip("-"))
            if digits > MAX_INT_DIGITS:
                raise _too_long_int(digits, where(match))


def _parse_json(text: str) -> tuple[object, list[Violation]]:
    _scan_json(text)
    duplicated: list[tuple[dict, str]] = []

    def pairs_hook(pairs) -> dict:
        obj: dict = {}
        for key, value in pairs:
            if key in obj:
                duplicated.append((obj, key))
            obj[key] = value
        return obj

    data = json.loads(text, object_pairs_hook=pairs_hook)  # integers: _scan_json bounds them
    return data, _json_duplicates(data, duplicated)


def _json_duplicates(data, duplicated: list[tuple[dict, str]]) -> list[Violation]:
    if not duplicated:
        return []
    keys: dict[int, list[str]] = {}
    for obj, key in duplicated:
        keys.setdefault(id(obj), []).append(key)
    found: list[Violation] = []
    stack = [(data, ())]
    while stack:
        node, here = stack.pop()
        if isinstance(node, dict):
            for key in keys.get(id(node), ()):
                found.append(
                    _violation("A76", (*here, key), f"key {key!r} appears twice in this object")
                )
            stack.extend((v, (*here, k)) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, (*here, i)) for i, v in enumerate(node))
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


def parse_metadata(path: Path, prefix: tuple = ()) -> tuple[object | None, list[Violation]]:
    """Parse a metadata file. Returns ``(document, violations)``; the document is ``None``
    when it could not be parsed at all. ``prefix`` starts every violation's location (the
    file's name, for a file other than the package's metadata file)."""
    most = limit("metadata_bytes")
    try:
        size = path.stat().st_size
        if size <= most:
            with path.open("rb") as stream:  # never more than the limit, whatever stat said
                data = stream.read(most + 1)
            size = len(data)
        if size > most:
            return None, [_too_large(path, size, most, prefix)]
        text = data.decode("utf-8")
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        return None, [_violation("A77", prefix, f"{path.name} cannot be read ({reason})")]
    except UnicodeDecodeError as exc:
        return None, [_violation("A77", prefix, f"{path.name} is not UTF-8 text ({exc.reason})")]
    return parse_metadata_text(text, path, prefix)


def _too_large(path: Path, size: int, most: int, prefix: tuple) -> Violation:
    return _violation(
        "A98",
        prefix,
        f"{path.name} holds {size} bytes, more than the {most} a metadata file may hold "
        "(REFERENCE_RUNTIME_MAX_METADATA_BYTES raises the limit)",
    )


def parse_metadata_text(
    text: str, path: Path, prefix: tuple = ()
) -> tuple[object | None, list[Violation]]:
    """Parse metadata text; ``path`` names it in messages and its suffix picks the parser."""
    most = limit("metadata_bytes")
    if len(text) > most:  # characters: at least as many bytes
        return None, [_too_large(path, len(text.encode("utf-8")), most, prefix)]
    data, problems = _parse_text(text, path, prefix)
    if data is None:
        return None, problems
    if prefix:
        problems = [dataclasses.replace(v, path=(*prefix, *v.path)) for v in problems]
    return data, problems + [
        dataclasses.replace(v, path=(*prefix, *v.path)) for v in _non_string_keys(data)
    ]


def _tab_at(text: str, mark) -> bool:
    """Whether the YAML error at ``mark`` sits on a tab (YAML forbids tabs in indentation)."""
    lines = text.splitlines()
    if not 0 <= mark.line < len(lines):
        return False
    line = lines[mark.line]
    return "\t" in line[: mark.column + 1]


def _parse_text(text: str, path: Path, prefix: tuple) -> tuple[object | None, list[Violation]]:
    def refused(message: str, code: str = "A77"):
        return None, [_violation(code, prefix, message)]

    try:
        if path.suffix == ".json":
            data, problems = _parse_json(text)
        else:
            data, problems = _parse_yaml(text)
    except _Unparseable as exc:
        return refused(f"{path.name}: {exc}", exc.code)
    except yaml.YAMLError as exc:
        where = ""
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            where = f" at line {mark.line + 1}, column {mark.column + 1}"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        if mark is not None and _tab_at(text, mark):
            problem = "a tab character; YAML indents with spaces only, so replace the tab"
        return refused(f"{path.name} is not valid YAML{where}: {problem}")
    except json.JSONDecodeError as exc:
        return refused(
            f"{path.name} is not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        )
    except RecursionError:
        return refused(f"{path.name} is nested too deeply to parse", "A100")
    if not isinstance(data, dict):
        kind = type(data).__name__ if data is not None else "empty"
        return refused(f"{path.name} must hold a mapping at the top, not {kind}")
    return data, problems
