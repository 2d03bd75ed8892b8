"""Requests and results for onnxruntime-genai decoder folders, shared by the adapters of runtimes
that run such folders through an API of their own (``ort_genai``, ``onnx_genai``).

A decoder folder (``genai_config.json`` beside the decoder graph, no metadata document) has no
workflow of its own: the format lowers it to a workflow (docs/lowering.md), and these adapters
take that workflow's requests and give its results.

**Requests.** ``prompt`` is token rows. Without one, the rows come from the input
``request.prompt_tokens`` (``[batch, width]``) cut by ``request.prompt_lengths`` (alias
``prompt_lengths``; ``-1`` is the whole row). Each row's sampling settings are, in order: the
request-aligned inputs ``request.temperature``, ``request.top_k``, ``request.top_p``,
``request.min_p`` (one value per row, or one for every row); else the greedy values (temperature
0, top-k 1, top-p 1, min-p 0) when the request decodes greedily (``greedy``, true when absent);
else ``search.temperature``, ``search.top_k`` and ``search.top_p`` of ``genai_config.json``;
else temperature 1, no top-k (0), top-p 1 and min-p 0. A row decodes greedily when its
temperature is 0 or its top-k is 1. Its seed is the input ``request.seed``, else the request's
``seed``, else ``search.random_seed`` (``-1`` as 0), else 0. ``max_new_tokens`` is the request's,
else the input ``request.max_new_tokens``, else ``search.max_length`` minus the longest row (at
least 0), else the context length. Any other input is refused: the lowered workflow declares no
other request input.

**Results.** ``tokens`` and ``finish_reasons`` per row (``stop``, ``length``,
``context_length``), and the lowered workflow's outputs: ``tokens`` (per row, int64 ``[1, n]``,
or None for a row that generated nothing) and ``finish_reasons`` (int64 per row: 1 ``stop``, 2
``length``, 3 ``context_length``, 0 for a row that generated nothing). A row ending on an end
id publishes that id as its last token.

**Sessions.** A session is one conversation; each of its turns takes one prompt row, which
continues the conversation (its earlier prompts and generated tokens).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..package_reader import GENAI_CONFIG, find_metadata, is_bare_decoder, parse_metadata
from ..protocol import Refused, Unsupported

FINISH_CODES = {"stop": 1, "length": 2, "context_length": 3}
DEFAULT_CONTEXT = 256  # max_new_tokens of a request to a folder that names no bound
SAMPLING_INPUTS = {
    # input -> (keyword, greedy value, default without the search section)
    "request.temperature": ("temperature", 0.0, 1.0),
    "request.top_k": ("top_k", 1, 0),
    "request.top_p": ("top_p", 1.0, 1.0),
    "request.min_p": ("min_p", 0.0, 0.0),
}
REQUEST_INPUTS = {
    "request.prompt_tokens",
    "request.prompt_lengths",
    "prompt_lengths",
    "request.max_new_tokens",
    "request.seed",
    *SAMPLING_INPUTS,
}


@dataclass(frozen=True)
class DecoderFolder:
    """What the adapters read of ``genai_config.json``."""

    root: Path
    vocab_size: int
    context_length: int | None
    eos_ids: tuple[int, ...]
    search: dict

    @property
    def max_length(self) -> int | None:
        value = self.search.get("max_length")
        return int(value) if value else None


def read_folder(package_dir: str, runtime: str) -> DecoderFolder:
    """The decoder folder at ``package_dir``. A package that is not one (a document of the
    format, workflow or legacy ``model.io``) is answered :class:`Unsupported`, naming a feature
    the adapters do not declare."""
    root = Path(package_dir)
    metadata = find_metadata(root)
    if metadata is not None or not (root / GENAI_CONFIG).is_file():
        raise Unsupported("load", _document_feature(metadata), _not_a_folder(metadata, runtime))
    try:
        config = parse_metadata(root / GENAI_CONFIG)
        model = config["model"]
        eos = model.get("eos_token_id", [])
        eos_ids = tuple(int(t) for t in (eos if isinstance(eos, list) else [eos]))
        context = model.get("context_length")
        return DecoderFolder(
            root=root,
            vocab_size=int(model["vocab_size"]),
            context_length=int(context) if context else None,
            eos_ids=eos_ids,
            search=dict(config.get("search") or {}),
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise Refused("load", f"{GENAI_CONFIG}: {type(exc).__name__}: {exc}") from exc


def _document_feature(metadata: Path | None) -> str:
    if metadata is not None:
        try:
            document = parse_metadata(metadata)
        except Exception:  # an unreadable document is still not a decoder folder
            document = None
        if isinstance(document, dict) and is_bare_decoder(document):
            return "model_io"
        workflow = ((document or {}).get("pipeline") or {}).get("workflow") or {}
        contracts = {
            str((c.get("contract") or {}).get("id"))
            for c in (workflow.get("components") or {}).values()
            if isinstance(c, dict)
        }
        if any(c.startswith("onnx-genai.") for c in contracts):
            return "runtime_contracts"
    return "invoke"  # a workflow document: its steps invoke components


def _not_a_folder(metadata: Path | None, runtime: str) -> str:
    if metadata is None:
        return f"{runtime} runs onnxruntime-genai folders; this package has no {GENAI_CONFIG}"
    return (
        f"{runtime} runs onnxruntime-genai folders ({GENAI_CONFIG}); this package is a document "
        f"of the format ({metadata.name})"
    )


# ------------------------------------------------------------------ requests


@dataclass(frozen=True)
class Row:
    """One prompt row and how to decode it."""

    prompt: tuple[int, ...]
    temperature: float
    top_k: int
    top_p: float
    min_p: float
    seed: int

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0 or self.top_k == 1

    def options(self) -> tuple:
        """What rows decoded together must share (greedy rows share any settings)."""
        if self.greedy:
            return ("greedy",)
        return ("sample", self.temperature, self.top_k, self.top_p, self.min_p, self.seed)


@dataclass(frozen=True)
class Plan:
    rows: tuple[Row, ...]
    max_new_tokens: int
    stop_on_eos: bool
    session_id: str | None


def plan(folder: DecoderFolder, request: dict) -> Plan:
    """The rows of ``request`` and their settings (see the module docstring)."""
    inputs = dict(request.get("inputs") or {})
    unknown = sorted(set(inputs) - REQUEST_INPUTS)
    if unknown:
        raise Refused(
            "run",
            f"undeclared input(s) {', '.join(map(repr, unknown))}: a decoder folder's requests "
            f"take {', '.join(sorted(REQUEST_INPUTS))}",
        )
    if {"request.prompt_lengths", "prompt_lengths"} <= set(inputs):
        raise Refused("run", "the rows' lengths were given twice (request.prompt_lengths and "
                      "its source name prompt_lengths)")  # fmt: skip
    prompts = _prompts(request.get("prompt"), inputs)
    n = len(prompts)
    greedy = request.get("greedy", True)
    greedy = True if greedy is None else bool(greedy)
    settings = {}
    for name, (keyword, greedy_value, default) in SAMPLING_INPUTS.items():
        if name in inputs:
            settings[keyword] = _per_row(name, inputs[name], n)
        elif greedy:
            settings[keyword] = [greedy_value] * n
        else:
            value = folder.search.get(keyword) if keyword != "min_p" else None
            settings[keyword] = [default if value is None else value] * n
    if "request.seed" in inputs:
        seeds = [int(s) for s in _per_row("request.seed", inputs["request.seed"], n)]
    elif request.get("seed") is not None:
        seeds = [int(request["seed"])] * n
    else:
        seed = int(folder.search.get("random_seed", 0) or 0)
        seeds = [0 if seed == -1 else seed] * n
    rows = tuple(
        Row(
            prompt=tuple(prompts[r]),
            temperature=float(settings["temperature"][r]),
            top_k=int(settings["top_k"][r]),
            top_p=float(settings["top_p"][r]),
            min_p=float(settings["min_p"][r]),
            seed=seeds[r],
        )
        for r in range(n)
    )
    if any(row.min_p > 0.0 and not row.greedy for row in rows):
        raise Unsupported("run", "min_p", "min-p filtering (request.min_p above 0)")
    return Plan(
        rows=rows,
        max_new_tokens=_max_new_tokens(folder, request, inputs, prompts),
        stop_on_eos=bool(request.get("stop_on_eos", True)),
        session_id=request.get("session_id"),
    )


def _prompts(prompt, inputs: dict) -> list[list[int]]:
    if prompt is None:
        if "request.prompt_tokens" not in inputs:
            raise Refused("run", "no prompt: give prompt rows or request.prompt_tokens")
        tokens = np.asarray(inputs["request.prompt_tokens"])
        if tokens.ndim != 2 or tokens.dtype.kind not in "iu":
            raise Refused("run", "request.prompt_tokens must be int64 [batch, width]")
        lengths = inputs.get("request.prompt_lengths", inputs.get("prompt_lengths", -1))
        lengths = _per_row("request.prompt_lengths", lengths, tokens.shape[0])
        rows = [
            [int(t) for t in row[: (int(k) if k >= 0 else len(row))]]
            for row, k in zip(tokens, lengths, strict=True)
        ]
        if not rows or not all(rows):
            raise Refused("run", "request.prompt_tokens holds a row without tokens")
        return rows
    if "request.prompt_tokens" in inputs:
        raise Refused("run", "the prompt was given twice (prompt and request.prompt_tokens)")
    if isinstance(prompt, str) or not isinstance(prompt, list | tuple):
        raise Unsupported("run", "run", "prompts are token rows here, not text")
    rows = []
    for row in prompt:
        if isinstance(row, str) or not isinstance(row, list | tuple | np.ndarray):
            raise Refused("run", "the prompt must be rows of token ids")
        rows.append([int(t) for t in row])
    if not rows:
        raise Refused("run", "the prompt has no row")
    return rows


def _per_row(name: str, value, n: int) -> list:
    array = np.asarray(value).reshape(-1)
    if array.size == 1:
        return [array[0].item()] * n
    if array.size != n:
        raise Refused("run", f"input {name!r} has {array.size} values for {n} rows")
    return [v.item() for v in array]


def _max_new_tokens(folder: DecoderFolder, request: dict, inputs: dict, prompts) -> int:
    if request.get("max_new_tokens") is not None:
        return int(request["max_new_tokens"])
    if "request.max_new_tokens" in inputs:
        return int(np.asarray(inputs["request.max_new_tokens"]).reshape(-1)[0])
    if folder.max_length:
        return max(0, folder.max_length - max(len(p) for p in prompts))
    return folder.context_length or DEFAULT_CONTEXT


# ------------------------------------------------------------------ results


def finish_reason(folder: DecoderFolder, prompt_length: int, tokens: list[int],
                  max_new_tokens: int, ended_on_eos: bool) -> str:  # fmt: skip
    """A finished row's reason, in the format's order: an end id, then the token bound, then the
    context."""
    if ended_on_eos:
        return "stop"
    if len(tokens) >= max_new_tokens:
        return "length"
    if folder.context_length and prompt_length + len(tokens) >= folder.context_length:
        return "context_length"
    return "length"


def result(tokens: list[list[int]], reasons: list[str]) -> dict:
    """A run result in the protocol's form, with the lowered workflow's outputs: a row without
    a token has finish code 0 (the decode loop never ran), unless its prompt filled the context
    (the policy ran and stopped it)."""
    return {
        "outputs": {
            "tokens": [np.asarray([row], dtype=np.int64) if row else None for row in tokens],
            "finish_reasons": np.asarray(
                [
                    FINISH_CODES[r] if row or r == "context_length" else 0
                    for row, r in zip(tokens, reasons, strict=True)
                ],
                dtype=np.int64,
            ),
        },
        "tokens": [list(row) for row in tokens],
        "finish_reasons": list(reasons),
        "events": {},
    }


# ------------------------------------------------------------------ sessions

_SESSION_IDS = itertools.count(1)


def new_session_id() -> str:
    return f"session-{next(_SESSION_IDS)}"


def session_row(plan_: Plan) -> Row:
    """The one row of a session turn."""
    if len(plan_.rows) != 1:
        raise Refused("run", f"a session turn takes one prompt row, not {len(plan_.rows)}")
    return plan_.rows[0]
