"""onnx-genai (``onnx_genai``, on ONNX Runtime) and nxrt (``nxrt.genai``, its native runtime)
behind the runner protocol. Both publish the same text API, so one adapter serves both:

- ``--runtime python:conformance.runtimes.onnx_genai:onnx_genai``
- ``--runtime python:conformance.runtimes.onnx_genai:nxrt``

**Their API.** ``Engine.from_dir(model_dir, *, page_size=None)`` loads a folder holding the ONNX
graph, a ``tokenizer.json`` and ``genai_config.json`` (or a metadata document of the engine's own
format revision); ``engine.generate(prompt, *, max_tokens=128, temperature, top_p, top_k,
seed=None, stop=None)`` takes one prompt *text* and returns a ``GenerateResult`` with
``token_ids`` (the new tokens), ``text``, ``finish_reason`` (``eos_token``, ``max_tokens``,
``length`` when the context is full, ``stop_sequence:<i>``) and ``prefix_cache_hit_len``;
``engine.tokenize(text)`` gives a text's ids. ``onnx_genai`` defaults ``temperature``/``top_p``/
``top_k`` to None (the folder's search settings), ``nxrt.genai`` to 1.0 / 1.0 / 0, so this
adapter always passes them. nxrt loads ONNX Runtime's shared library from the environment
variable ``ONNX_GENAI_ORT_LIB``; when it is unset, :func:`nxrt` points it at the library inside
the installed ``onnxruntime`` wheel.

**What they run.** onnxruntime-genai folders with a ``tokenizer.json`` whose word ``t<N>`` is
token id ``N`` (the generated decoders of ``fixtures/generators/genai_decoders.py``): the
adapter writes each prompt row as that text and reads the generated ``token_ids`` back. They
refuse every document of the format's ``v1`` revision (workflow packages: "retired field
``rank``", "``manifest.capabilities`` is retired"; legacy ``model.io``: "retired ``model.io``
block"), so such a package is answered unsupported. Declared features: ``load``, ``run``,
``genai_config`` and ``sampling`` (their own seeded draws; not ``min_p``, not
``reference_draws``); they name none of the format's rule codes, so ``rule_codes`` is left
out.

**How a request maps onto the API** (requests and results as in :mod:`.decoder_folders`):

- A batch runs row by row, one ``generate`` per row (the API takes one prompt).
- ``max_tokens`` is ``max_new_tokens``. The engines refuse 0 (answered unsupported: the format
  allows it) and a negative count (refused). The folder's ``search.max_length`` is not passed:
  the engines bound a row by ``max_tokens`` and the context only.
- Greedy rows: ``temperature=0``. Sampled rows: ``temperature``, ``top_k`` (0: no filter),
  ``top_p`` and the row's ``seed``: the engines' own draws. min-p is not supported.
- End ids: the engines stop a row on an end id of the folder and publish it (finish reason
  ``eos_token``, here ``stop``); ``max_tokens`` is ``length`` and ``length`` (the context is
  full) is ``context_length``. They cannot decode past an end id, so a request with
  ``stop_on_eos`` false is answered unsupported when a row ends on one (otherwise its results
  are the same).
- Sessions are kept here: a session holds its conversation's tokens (prompts and generated
  tokens, end ids included), and a turn sends the whole conversation followed by the turn's row;
  the engine's prefix cache reuses the KV of the conversation so far (``prefix_cache_hit_len``).
  A failed turn leaves the conversation as it was.
"""

from __future__ import annotations

import glob
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from ..protocol import PROTOCOL_VERSION, Refused, Unsupported
from .decoder_folders import (
    DecoderFolder,
    Row,
    finish_reason,
    new_session_id,
    plan,
    read_folder,
    result,
    session_row,
)

FEATURES = ("load", "run", "genai_config", "sampling")
TOKENIZER = "tokenizer.json"
ORT_LIBRARY_VARIABLE = "ONNX_GENAI_ORT_LIB"


def token_text(ids) -> str:
    """The text of a row of token ids under the fixtures' tokenizer (word ``t<N>`` is id N)."""
    return " ".join(f"t{int(i)}" for i in ids)


@dataclass
class Handle:
    folder: DecoderFolder
    engine: object
    sessions: dict = field(default_factory=dict)  # session id -> the conversation's tokens
    lock: threading.Lock = field(default_factory=threading.Lock)


class TextEngineRuntime:
    """A runtime whose ``Engine`` has the text API above (``onnx_genai``, ``nxrt.genai``)."""

    def __init__(self, name: str, module, version: str):
        self.name = name
        self.module = module  # the module holding Engine
        self.version = version

    def describe(self) -> dict:
        import onnxruntime

        return {
            "name": self.name,
            "protocol": PROTOCOL_VERSION,
            "version": self.version,
            "features": list(FEATURES),
            "versions": {self.name: self.version, "onnxruntime": onnxruntime.__version__},
        }

    def load(self, package_dir: str, executor: str | None = None) -> Handle:
        folder = read_folder(package_dir, self.name)
        if not (folder.root / TOKENIZER).is_file():
            raise Unsupported(
                "load",
                "genai_config",
                f"{self.name} takes text only and needs a {TOKENIZER} in the folder",
            )
        try:
            engine = self.module.Engine.from_dir(str(folder.root))
        except (RuntimeError, ValueError, OSError) as exc:
            raise Refused("load", f"{self.name}: {exc}") from exc
        vocabulary = list(range(folder.vocab_size))
        if list(engine.tokenize(token_text(vocabulary))) != vocabulary:
            raise Unsupported(
                "load",
                "genai_config",
                f"{self.name} takes text only, and this folder's {TOKENIZER} does not make the "
                "word t<N> token id N, so token rows cannot be written as text",
            )
        return Handle(folder, engine)

    # ------------------------------------------------------------------ runs

    def run(self, handle: Handle, request: dict) -> dict:
        p = plan(handle.folder, request)
        if p.session_id is not None:
            with handle.lock:
                if p.session_id not in handle.sessions:
                    raise Refused("run", f"no session {p.session_id!r} was created")
                conversation = handle.sessions[p.session_id]
            row = session_row(p)
            prompt = (*conversation, *row.prompt)
            tokens, reason = self._generate(handle, row, prompt, p.max_new_tokens, p.stop_on_eos)
            with handle.lock:
                handle.sessions[p.session_id] = [*prompt, *tokens]
            return result([tokens], [reason])
        outcomes = [
            self._generate(handle, row, row.prompt, p.max_new_tokens, p.stop_on_eos)
            for row in p.rows
        ]
        return result([t for t, _ in outcomes], [r for _, r in outcomes])

    def _generate(self, handle: Handle, row: Row, prompt, max_new_tokens: int,
                  stop_on_eos: bool) -> tuple[list[int], str]:  # fmt: skip
        folder = handle.folder
        outside = [t for t in prompt if not 0 <= t < folder.vocab_size]
        if outside:
            raise Refused(
                "run", f"token id {outside[0]} is outside the vocabulary [0, {folder.vocab_size})"
            )
        if row.greedy:
            sampling = {"temperature": 0.0, "top_k": 0, "top_p": 1.0}
        else:
            sampling = {"temperature": row.temperature, "top_k": row.top_k, "top_p": row.top_p}
        try:
            generated = handle.engine.generate(
                token_text(prompt), max_tokens=max_new_tokens, seed=row.seed, **sampling
            )
        except (ValueError, OverflowError, TypeError) as exc:
            if max_new_tokens == 0:
                raise Unsupported("run", "run", f"max_new_tokens 0: {self.name}: {exc}") from exc
            raise Refused("run", f"{self.name}: {exc}") from exc
        tokens = [int(t) for t in generated.token_ids]
        said = str(generated.finish_reason)
        if said == "eos_token":
            if not stop_on_eos:
                raise Unsupported(
                    "run",
                    "run",
                    f"{self.name} always stops a row on an end id; this request asks to decode "
                    "past one (stop_on_eos false) and a row ended on "
                    f"{tokens[-1] if tokens else 'one'}",
                )
            reason = "stop"
        elif said == "max_tokens":
            reason = "length"
        elif said == "length":
            reason = finish_reason(folder, len(prompt), tokens, max_new_tokens, False)
        else:
            raise RuntimeError(f"{self.name}: unexpected finish reason {said!r}")
        return tokens, reason

    # ------------------------------------------------------------------ sessions

    def create_session(self, handle: Handle) -> str:
        sid = new_session_id()
        with handle.lock:
            handle.sessions[sid] = []
        return sid

    def reset_session(self, handle: Handle, sid: str) -> None:
        with handle.lock:
            if sid not in handle.sessions:
                raise Refused("run", f"no session {sid!r} was created")
            handle.sessions[sid] = []

    def close_session(self, handle: Handle, sid: str) -> None:
        with handle.lock:
            if handle.sessions.pop(sid, None) is None:
                raise Refused("run", f"no session {sid!r} is open")

    def close(self, handle: Handle) -> None:
        with handle.lock:
            handle.sessions.clear()
        handle.engine = None


# ------------------------------------------------------------------ the two runtimes


def onnx_genai() -> TextEngineRuntime:
    """``--runtime python:conformance.runtimes.onnx_genai:onnx_genai``."""
    import onnx_genai as module

    return TextEngineRuntime("onnx-genai", module, module.__version__)


def ort_library() -> str | None:
    """ONNX Runtime's shared library inside the installed ``onnxruntime`` wheel, if any."""
    try:
        import onnxruntime
    except ImportError:
        return None
    capi = Path(onnxruntime.__file__).resolve().parent / "capi"
    for pattern in ("libonnxruntime.so*", "libonnxruntime*.dylib", "onnxruntime.dll"):
        found = sorted(glob.glob(str(capi / pattern)))
        if found:
            return found[-1]
    return None


def nxrt() -> TextEngineRuntime:
    """``--runtime python:conformance.runtimes.onnx_genai:nxrt``. Points
    ``ONNX_GENAI_ORT_LIB`` at the ``onnxruntime`` wheel's library when it is unset."""
    import nxrt as module

    if not os.environ.get(ORT_LIBRARY_VARIABLE):
        library = ort_library()
        if library:
            os.environ[ORT_LIBRARY_VARIABLE] = library
    return TextEngineRuntime("nxrt", module.genai, module.__version__)
