"""onnxruntime-genai (``onnxruntime_genai``, 0.18) behind the runner protocol.

``--runtime python:conformance.runtimes.ort_genai:factory``

**What it runs.** onnxruntime-genai folders (``genai_config.json`` beside the decoder graph), on
the CPU. It reads no document of the format (workflow or legacy ``model.io``): such a package is
answered unsupported. Declared features: ``load``, ``run``, ``genai_config`` and ``sampling``
(its own seeded draws; not ``min_p``, not ``reference_draws``). It names none of the format's
rule codes, so it leaves ``rule_codes`` out.

**How a request maps onto its API** (requests and results as in :mod:`.decoder_folders`):

- Without a session, ``og.Generator``: rows of one prompt length and the same decoding settings
  share one generator (``og.GeneratorParams.set_search_options(batch_size=...)``,
  ``append_tokens`` of the ``[rows, length]`` batch); rows of other lengths or settings get
  generators of their own (a generator takes no padding: every entry of its batch is a token).
  ``generate_next_token`` runs at most ``max_new_tokens`` times and reads ``get_next_tokens``
  (which, unlike ``get_sequence``, reports the end token). ``max_length`` is the prompt length
  plus ``max_new_tokens``, capped at the model's ``context_length`` (onnxruntime-genai refuses a
  larger one); the folder's ``search.max_length`` is only its default, so a request overrides it.
- Greedy rows: ``do_sample=False``. Sampled rows: ``do_sample=True`` with ``temperature``,
  ``top_k`` (no filter, the format's 0, is the vocabulary size: with ``top_k=0``
  onnxruntime-genai 0.18 draws outside the top-p set, e.g. 35 of 200 draws at top-p 0.7 on
  ``genai_decoder``), ``top_p`` and ``random_seed``; the random stream is the
  generator's, so it is onnxruntime-genai's own draws (and rows sharing a generator share it).
  min-p is not supported.
- End ids: onnxruntime-genai stops a row on any ``eos_token_id``; the row publishes it and
  finishes with ``stop``. It has no way to keep decoding past one, so a request with
  ``stop_on_eos`` false is answered unsupported when a row ends on an end id (otherwise its
  results are the same). Finish reasons are derived from the tokens: an end id, then
  ``max_new_tokens`` (``length``), then the context (``context_length``).
- Sessions are ``og.Engine`` requests (one ``og.Request`` per session, one ``begin_turn`` per
  turn, ``TurnOptions`` with ``set_do_sample(False)`` and ``set_max_generated_tokens``): the
  engine keeps the conversation and its KV cache between turns. A turn takes one row and decodes
  greedily: a per-turn seed needs an engine configured for dynamic batching, which needs a paged
  KV decoder, so a sampled turn is answered unsupported. The engine reports an ``EOS`` finish
  without its token; the folder's one end id is published then (with several, which one ended
  the turn is unknown, and the turn is answered unsupported). ``MAX_SESSION_TOKENS`` is
  ``context_length``. ``reset_session`` closes the request and opens a new one.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

from ..protocol import PROTOCOL_VERSION, Refused, Unsupported
from .decoder_folders import (
    DecoderFolder,
    Plan,
    Row,
    finish_reason,
    new_session_id,
    plan,
    read_folder,
    result,
    session_row,
)

NAME = "onnxruntime-genai"
FEATURES = ("load", "run", "genai_config", "sampling")


@dataclass
class Handle:
    folder: DecoderFolder
    model: object  # og.Model
    engine: object | None = None  # og.Engine, created with the first session
    sessions: dict = field(default_factory=dict)  # session id -> og.Request
    lock: threading.Lock = field(default_factory=threading.Lock)


class OrtGenaiRuntime:
    def __init__(self):
        import onnxruntime_genai

        self.og = onnxruntime_genai

    def describe(self) -> dict:
        import onnxruntime

        return {
            "name": NAME,
            "protocol": PROTOCOL_VERSION,
            "version": getattr(self.og, "__version__", "unknown"),
            "features": list(FEATURES),
            "versions": {
                "onnxruntime-genai": getattr(self.og, "__version__", "unknown"),
                "onnxruntime": onnxruntime.__version__,
            },
        }

    def load(self, package_dir: str, executor: str | None = None) -> Handle:
        folder = read_folder(package_dir, NAME)
        try:
            model = self.og.Model(str(folder.root))
        except RuntimeError as exc:
            raise Refused("load", f"onnxruntime-genai: {exc}") from exc
        return Handle(folder, model)

    # ------------------------------------------------------------------ runs

    def run(self, handle: Handle, request: dict) -> dict:
        p = plan(handle.folder, request)
        if p.session_id is not None:
            return self._turn(handle, p)
        tokens: list[list[int]] = [[] for _ in p.rows]
        reasons: list[str] = [""] * len(p.rows)
        groups: dict[tuple, list[int]] = {}
        for i, row in enumerate(p.rows):
            groups.setdefault((len(row.prompt), row.options()), []).append(i)
        for members in groups.values():
            for i, (new, reason) in zip(members, self._generate(handle, p, members), strict=True):
                tokens[i], reasons[i] = new, reason
        return result(tokens, reasons)

    def _generate(self, handle: Handle, p: Plan, members: list[int]) -> list[tuple]:
        """One generator over rows of one length and settings: (new tokens, reason) per row."""
        og, folder = self.og, handle.folder
        first: Row = p.rows[members[0]]
        length = len(first.prompt)
        max_length = length + p.max_new_tokens
        if folder.context_length:
            max_length = min(max_length, folder.context_length)
        options: dict = {"batch_size": len(members), "max_length": max_length}
        if first.greedy:
            options["do_sample"] = False
        else:
            # no top-k filter is top-k = the vocabulary: onnxruntime-genai's top-k 0 does not
            # apply top-p as the format does (it draws outside the top-p set)
            top_k = first.top_k if first.top_k > 0 else folder.vocab_size
            options.update(do_sample=True, temperature=first.temperature, top_k=top_k,
                           top_p=first.top_p, random_seed=first.seed)  # fmt: skip
        try:
            params = og.GeneratorParams(handle.model)
            params.set_search_options(**options)
            generator = og.Generator(handle.model, params)
            generator.append_tokens(np.asarray([p.rows[i].prompt for i in members], dtype=np.int32))
        except RuntimeError as exc:
            raise Refused("run", f"onnxruntime-genai: {exc}") from exc
        stops = set(folder.eos_ids)
        new: list[list[int]] = [[] for _ in members]
        ended = [False] * len(members)
        steps = 0
        while not all(ended) and not generator.is_done() and length + steps < max_length:
            generator.generate_next_token()
            steps += 1
            for j, token in enumerate(generator.get_next_tokens().tolist()):
                if ended[j]:
                    continue
                new[j].append(int(token))
                ended[j] = int(token) in stops or len(new[j]) >= p.max_new_tokens
        out = []
        for row in new:
            on_eos = bool(row) and row[-1] in stops
            if on_eos and not p.stop_on_eos:
                raise Unsupported(
                    "run",
                    "run",
                    "onnxruntime-genai always stops a row on an end id; this request asks to "
                    f"decode past one (stop_on_eos false) and a row ended on {row[-1]}",
                )
            out.append((row, finish_reason(folder, length, row, p.max_new_tokens, on_eos)))
        return out

    # ------------------------------------------------------------------ sessions

    def _turn(self, handle: Handle, p: Plan) -> dict:
        og, folder = self.og, handle.folder
        row = session_row(p)
        request = handle.sessions.get(p.session_id)
        if request is None:
            raise Refused("run", f"no session {p.session_id!r} was created")
        if not row.greedy:
            raise Unsupported(
                "run",
                "run",
                "a sampled session turn: og.Engine takes a per-turn seed only when configured "
                "for dynamic batching, which needs a paged KV decoder",
            )
        turn = og.TurnOptions(request)
        turn.set_do_sample(False)
        turn.set_max_generated_tokens(p.max_new_tokens)
        try:
            request.begin_turn(np.asarray(row.prompt, dtype=np.int32), turn)
        except RuntimeError as exc:
            raise Refused("run", f"onnxruntime-genai: {exc}") from exc
        tokens: list[int] = []
        finish = None
        events = handle.engine.create_event_buffer(64)
        while handle.engine.has_pending_requests():
            for event in handle.engine.run(events):
                if event.error_code != og.EngineErrorCode.NONE:
                    raise RuntimeError(
                        f"onnxruntime-genai engine: turn failed ({event.error_code})"
                    )
                if event.token is not None:
                    tokens.append(int(event.token))
                if event.finish_reason != og.FinishReason.NONE:
                    finish = event.finish_reason
        if finish == og.FinishReason.EOS:
            if not p.stop_on_eos:
                raise Unsupported(
                    "run", "run", "onnxruntime-genai always stops a turn on an end id"
                )
            if len(folder.eos_ids) != 1:
                raise Unsupported(
                    "run",
                    "genai_config",
                    "the turn ended on one of the end ids "
                    f"{list(folder.eos_ids)}; onnxruntime-genai's engine does not say which",
                )
            tokens.append(folder.eos_ids[0])
            reason = "stop"
        elif finish == og.FinishReason.MAX_GENERATED_TOKENS:
            reason = "length"
        elif finish == og.FinishReason.MAX_SESSION_TOKENS:
            reason = "context_length"
        else:
            raise RuntimeError(f"onnxruntime-genai engine: the turn finished with {finish}")
        return result([tokens], [reason])

    def create_session(self, handle: Handle) -> str:
        with handle.lock:
            if handle.engine is None:
                handle.engine = self.og.Engine(handle.model)
            sid = new_session_id()
            handle.sessions[sid] = handle.engine.create_request()
        return sid

    def reset_session(self, handle: Handle, sid: str) -> None:
        with handle.lock:
            request = handle.sessions.get(sid)
            if request is None:
                raise Refused("run", f"no session {sid!r} was created")
            request.close()
            handle.sessions[sid] = handle.engine.create_request()

    def close_session(self, handle: Handle, sid: str) -> None:
        with handle.lock:
            request = handle.sessions.pop(sid, None)
        if request is None:
            raise Refused("run", f"no session {sid!r} is open")
        request.close()

    def close(self, handle: Handle) -> None:
        with handle.lock:
            requests = list(handle.sessions.values())
            handle.sessions.clear()
        for request in requests:
            request.close()
        handle.engine = None


def factory() -> OrtGenaiRuntime:
    """``--runtime python:conformance.runtimes.ort_genai:factory``."""
    return OrtGenaiRuntime()
