"""The suite's own reading of a package: the metadata document, and what the suite needs of it.

The suite judges any runtime, so it never reads a package through the runtime it judges. What it
needs is small: the metadata file and its parsed document (to derive a case's features and to
mutate valid packages), the request axis of each request-aligned input and output (to split a
batched request into its rows), and the rendering of a document path in its reports.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

# Looked up in this order; the extension picks the parser.
METADATA_NAMES = ("inference_metadata.yaml", "inference_metadata.yml", "inference_metadata.json")
GENAI_CONFIG = "genai_config.json"

_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")


def find_metadata(root: Path) -> Path | None:
    """The first of ``inference_metadata.yaml|.yml|.json`` in ``root``, or None."""
    for name in METADATA_NAMES:
        candidate = Path(root) / name
        if candidate.is_file():
            return candidate
    return None


def parse_metadata(path: Path):
    """The document in a metadata file: JSON for ``.json``, safe YAML otherwise."""
    text = Path(path).read_text()
    if Path(path).suffix == ".json":
        return json.loads(text)
    return yaml.load(text, Loader=_SAFE_LOADER)


def read_document(root: Path) -> dict:
    """The parsed metadata document of the package in ``root``. An onnxruntime-genai folder
    (no metadata file) gives ``{"genai_config": <its genai_config.json>}``."""
    metadata = find_metadata(root)
    if metadata is None:
        return {"genai_config": json.loads((Path(root) / GENAI_CONFIG).read_text())}
    return parse_metadata(metadata)


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
