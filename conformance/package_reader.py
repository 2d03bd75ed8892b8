"""The suite's own reading of a package: the metadata document, and what the suite needs of it.

The suite judges any runtime, so it never reads a package through the runtime it judges. What it
needs is small: the metadata file and its parsed document (to derive a case's features and to
mutate valid packages), the request axis of each request-aligned input and output (to split a
batched request into its rows), and the rendering of a document path in its reports.

Every document it reads (a metadata file, a ``genai_config.json``, an expectations file) is read
within bounds, whoever wrote it: a regular file of at most ``MAX_DOCUMENT_BYTES`` (checked on its
size, before it is read, and never more read), then, before anything is built, at most
``MAX_NODES`` nodes (YAML aliases counted where they expand), ``MAX_DEPTH`` levels of nesting,
strings of ``MAX_SCALAR_CHARS`` characters and integers (and YAML numbers) of ``MAX_INT_DIGITS``
digits, counted on libyaml's events or on JSON's tokens. Anything else is a
:class:`DocumentError` saying what, where and which bound.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

# Looked up in this order; the extension picks the parser.
METADATA_NAMES = ("inference_metadata.yaml", "inference_metadata.yml", "inference_metadata.json")
GENAI_CONFIG = "genai_config.json"

_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
try:  # libyaml's event parser, when PyYAML was built with it
    from yaml._yaml import CParser as _EventParser
except ImportError:  # pragma: no cover - pure-Python PyYAML
    _EventParser = None
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")


def find_metadata(root: Path) -> Path | None:
    """The first of ``inference_metadata.yaml|.yml|.json`` in ``root``, or None."""
    for name in METADATA_NAMES:
        candidate = Path(root) / name
        if candidate.is_file():
            return candidate
    return None


MAX_DOCUMENT_BYTES = 16 * 2**20
MAX_NODES = 100_000
MAX_DEPTH = 64
MAX_SCALAR_CHARS = 2**20
MAX_INT_DIGITS = 1000


class DocumentError(ValueError):
    """A document the suite does not read: not a readable regular file, beyond one of the
    bounds, not UTF-8, or not valid YAML or JSON."""


def read_text(path: Path) -> str:
    """The text of the document at ``path``: a regular file of at most ``MAX_DOCUMENT_BYTES``,
    checked before it is read (a FIFO or a device is never opened for reading)."""
    path = Path(path)
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise DocumentError(f"{path.name} is not a regular file; give a YAML or JSON file")
        if info.st_size > MAX_DOCUMENT_BYTES:
            raise _too_large(path.name, info.st_size)
        with open(path, "rb") as stream:  # never more than the bound, whatever stat said
            data = stream.read(MAX_DOCUMENT_BYTES + 1)
    except OSError as exc:
        raise DocumentError(f"{path.name}: cannot read it ({exc.strerror or exc})") from None
    if len(data) > MAX_DOCUMENT_BYTES:
        raise _too_large(path.name, len(data))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DocumentError(f"{path.name} is not UTF-8 text ({exc.reason})") from None


def _too_large(name: str, size: int) -> DocumentError:
    return DocumentError(
        f"{name} holds {size} bytes, more than the {MAX_DOCUMENT_BYTES} the suite reads in a "
        "document"
    )


def parse_text(text: str, name: str):
    """The document in ``text``: JSON when ``name`` ends in ``.json``, safe YAML otherwise,
    checked against the bounds before anything is built."""
    try:
        if name.endswith(".json"):
            _scan_json(text, name)
            return json.loads(text)
        _scan_yaml(text, name)
        return yaml.load(text, Loader=_SAFE_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).strip().splitlines()[0]
        raise DocumentError(f"{name} is not valid YAML{at}: {problem}") from None
    except json.JSONDecodeError as exc:
        raise DocumentError(
            f"{name} is not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    except (ValueError, RecursionError) as exc:  # a value YAML cannot construct, and the like
        if isinstance(exc, DocumentError):
            raise
        raise DocumentError(f"{name}: a value that cannot be read ({exc})") from None


def parse_metadata(path: Path):
    """The document in a metadata file: JSON for ``.json``, safe YAML otherwise (bounded)."""
    return parse_text(read_text(path), Path(path).name)


def read_document(root: Path) -> dict:
    """The parsed metadata document of the package in ``root``. An onnxruntime-genai folder
    (no metadata file) gives ``{"genai_config": <its genai_config.json>}``."""
    metadata = find_metadata(root)
    if metadata is None:
        return {"genai_config": parse_metadata(Path(root) / GENAI_CONFIG)}
    return parse_metadata(metadata)


def _beyond(name: str, what: str, line: int) -> DocumentError:
    return DocumentError(f"{name}: {what} (line {line}); the suite reads no such document")


# What YAML's int and float patterns are made of (base-60 and hexadecimal included).
_NUMBER_CHARS = "0123456789_:.+-eExXoObBabcdfABCDF"


def _scan_yaml(text: str, name: str) -> None:
    """Refuse a YAML text beyond the bounds on libyaml's events, before any node is built:
    nodes (an alias counts the nodes it expands to), depth (an alias's subtree counted at the
    alias), string length, and the length of a plain scalar shaped like a number (PyYAML's
    base-60 conversion is quadratic in it)."""
    events = _EventParser(text) if _EventParser is not None else yaml.SafeLoader(text)
    nodes = 0
    open_: list[list] = []  # per open collection: [anchor, nodes when it opened, its levels]
    anchors: dict[str, tuple[int, int]] = {}  # anchor -> (nodes, levels)
    try:
        while events.check_event():
            event = events.get_event()
            line = event.start_mark.line + 1
            if isinstance(event, yaml.CollectionStartEvent):
                nodes += 1
                open_.append([event.anchor, nodes, 1])
                if len(open_) > MAX_DEPTH:
                    raise _beyond(name, f"nesting deeper than {MAX_DEPTH} levels", line)
                continue
            if isinstance(event, yaml.ScalarEvent):
                _check_scalar(event, name, line)
                size, levels = 1, 0
                if event.anchor is not None:
                    anchors[event.anchor] = (size, levels)
            elif isinstance(event, yaml.AliasEvent):
                if event.anchor not in anchors:  # undefined, or inside its own anchor
                    raise _beyond(name, f"the alias *{event.anchor} refers to itself or to "
                                  "nothing", line)  # fmt: skip
                size, levels = anchors[event.anchor]
            elif isinstance(event, yaml.CollectionEndEvent):
                anchor, opened, levels = open_.pop()
                if anchor is not None:
                    anchors[anchor] = (nodes - opened + 1, levels)
                size = 0  # counted when it opened
            else:
                continue
            nodes += size
            if nodes > MAX_NODES:
                raise _beyond(name, f"more than {MAX_NODES} nodes (aliases expanded)", line)
            if len(open_) + levels > MAX_DEPTH:
                raise _beyond(name, f"nesting deeper than {MAX_DEPTH} levels", line)
            if open_:
                open_[-1][2] = max(open_[-1][2], levels + 1)
    finally:
        events.dispose()


def _check_scalar(event, name: str, line: int) -> None:
    value = event.value
    if len(value) > MAX_SCALAR_CHARS:
        raise _beyond(name, f"a string of {len(value)} characters, more than {MAX_SCALAR_CHARS}",
                      line)  # fmt: skip
    if (
        not event.style  # plain: YAML may read it as a number
        and len(value) > MAX_INT_DIGITS
        and value.lstrip("+-")[:1].isdigit()
        and not value.strip(_NUMBER_CHARS)
    ):
        raise _beyond(name, f"a number written with {len(value)} characters, more than "
                      f"{MAX_INT_DIGITS}", line)  # fmt: skip


# A token of a JSON text: a string (possibly unterminated), a bracket, a number or a literal.
_JSON_TOKEN = re.compile(
    r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[{]|[\]}]|-?[0-9][0-9.eE+-]*|true|false|null|NaN|-?Infinity'
)


def _scan_json(text: str, name: str) -> None:
    """Refuse a JSON text beyond the bounds on its tokens, before ``json.loads`` builds
    anything: nodes (every value and key), depth, string length, integer length. Text that
    is not JSON passes through, for the parser to say where."""
    nodes = depth = 0
    for match in _JSON_TOKEN.finditer(text):
        token = match.group()
        first = token[0]
        if first in "]}":
            depth -= 1
            continue
        nodes += 1
        problem = None
        if nodes > MAX_NODES:
            problem = f"more than {MAX_NODES} nodes"
        elif first in "[{":
            depth += 1
            if depth - 1 > MAX_DEPTH:
                problem = f"nesting deeper than {MAX_DEPTH} levels"
        elif first == '"':
            if len(token) - 2 > MAX_SCALAR_CHARS:
                problem = f"a string of {len(token) - 2} characters, more than {MAX_SCALAR_CHARS}"
        elif (first == "-" or first.isdigit()) and len(token.lstrip("-")) > MAX_INT_DIGITS:
            problem = f"a number of {len(token.lstrip('-'))} characters, more than {MAX_INT_DIGITS}"
        if problem:
            raise _beyond(name, problem, text.count("\n", 0, match.start()) + 1)


def is_bare_decoder(document: dict) -> bool:
    """A bare decoder: an onnxruntime-genai folder, or a legacy ``model.io`` document without a
    ``pipeline``. A runtime lowers it to a workflow at load (docs/lowering.md)."""
    return "genai_config" in document or (
        "pipeline" not in document and isinstance((document.get("model") or {}).get("io"), dict)
    )


def format_location(path: Sequence[str | int]) -> str:
    """Render a document path: ``a.b[0].c``, a key that is not a plain name quoted, as in
    ``pipeline.workflow.inputs["request.input_ids"]``; the empty path is ``<document>``."""
    out: list[str] = []
    for part in path:
        if isinstance(part, int) and not isinstance(part, bool):
            out.append(f"[{part}]")
        elif _PLAIN_KEY.match(str(part)):
            out.append(("." if out else "") + str(part))
        else:
            escaped = str(part).replace("\\", "\\\\").replace('"', '\\"')
            out.append(f'["{escaped}"]')
    return "".join(out) or "<document>"


@dataclass(frozen=True)
class RequestAxes:
    """Where the request's rows lie: the request axis of every request-aligned (or
    request-expanded) workflow input and output. An application input is also listed under its
    application name (``source.name``), the name a request may use for it."""

    inputs: dict[str, int]
    outputs: dict[str, int]


# The request interface docs/lowering.md gives a lowered bare decoder: its request inputs (the
# prompt, its lengths under their application name too, and the sampling inputs) and both of
# its outputs carry one row per request row, on axis 0.
LOWERED_REQUEST_AXES = RequestAxes(
    inputs={
        name: 0
        for name in (
            "request.prompt_tokens",
            "request.prompt_lengths",
            "prompt_lengths",
            "request.temperature",
            "request.top_k",
            "request.top_p",
            "request.min_p",
            "request.seed",
        )
    },
    outputs={"tokens": 0, "finish_reasons": 0},
)


def _request_axis(declared) -> int | None:
    """The request axis of a declared input or output (its contract's ``batch_layout``)."""
    layout = ((declared or {}).get("contract") or {}).get("batch_layout") or {}
    if layout.get("kind") in ("request_aligned", "request_expanded"):
        return layout.get("axis")
    return None


def request_axes(document: dict) -> RequestAxes:
    """The request axes of a valid package's document (a bare decoder: those of its lowering)."""
    if is_bare_decoder(document):
        return LOWERED_REQUEST_AXES
    workflow = (document.get("pipeline") or {}).get("workflow") or {}
    inputs: dict[str, int] = {}
    for name, declared in (workflow.get("inputs") or {}).items():
        axis = _request_axis(declared)
        if axis is not None:
            inputs[name] = axis
            source = declared.get("source") or {}
            if source.get("kind") == "application" and source.get("name"):
                inputs[source["name"]] = axis
    outputs = {}
    for name, declared in (workflow.get("outputs") or {}).items():
        axis = _request_axis(declared)
        if axis is not None:
            outputs[name] = axis
    return RequestAxes(inputs, outputs)
