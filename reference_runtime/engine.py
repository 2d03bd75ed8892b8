"""The public facade: ``Engine.from_dir(path).run(prompt=...)``.

```python
from reference_runtime import Engine
engine = Engine.from_dir("pkg", executor="ort", device="cpu")
result = engine.run(prompt=[[1, 2, 3]], max_new_tokens=8)
result.tokens, result.finish_reasons, result.outputs["tokens"], engine.counters
```
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import faults
from .contracts.adapters import ParameterOverlay, build_adapter_session, select_adapters
from .contracts.decoding import FINISH_CODES, build_contract_session
from .counters import Counters
from .errors import RunError, UsageError
from .executors.base import BindingCopy
from .executors.native import NativeExecutor
from .executors.ort import OrtExecutor
from .package import Package, load_package
from .package.model import (
    AdapterImplementation,
    BindingImplementation,
    EmitStep,
    LoopStep,
    OnnxImplementation,
)
from .package.visit import child_steps
from .tokenizer import TextCodec, is_text, no_tokenizer_error, tokenizer_file
from .workflow.inputs import InputBinder, Request
from .workflow.interpreter import Interpreter, dynamic_symbols
from .workflow.overrides import resolve_overrides

EXECUTORS = ("ort", "native")
DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class RunResult:
    """What a run published.

    ``outputs[name]`` is an array for a dense output, or a list with one entry per row (``None``
    where the row published nothing) for a per-row output. ``tokens`` and ``finish_reasons``
    are per row, from the output whose role is ``tokens`` (``None`` when there is none).
    """

    outputs: dict
    tokens: list[list[int]] | None = None
    finish_reasons: list[str] | None = None
    events: dict = field(default_factory=dict)
    text: list[str] | None = None  # per row, decoded by the package's tokenizer when it has one


class Engine:
    """Loads a package once; runs requests through the one interpreter."""

    def __init__(self, package: Package, executor: str, device: str, sessions: dict, counters):
        self.package = package
        self.executor = executor
        self.device = device
        self._counters = counters
        self._sessions = sessions
        self._binder = InputBinder(package.metadata, dynamic_symbols(package.metadata.workflow))
        self._interpreter = Interpreter(package.metadata.workflow, sessions, counters)
        state = package.metadata.workflow.state
        # The cell carrying a session's conversation (SEED G), kept by the engine itself.
        self._continuation = next(
            (
                (name, cell.session.continuation)
                for name, cell in state.items()
                if cell.session is not None and cell.session.continuation is not None
            ),
            None,
        )
        self._session_cells = {
            name: cell
            for name, cell in state.items()
            if cell.scope == "session"
            and (self._continuation is None or name != self._continuation[0])
        }
        self._stored: dict[str, dict[str, np.ndarray]] = {}
        self._lock = threading.Lock()
        self.provenance = package.provenance  # "authored" or "lowered"
        self._lengths_input = next(
            (
                getattr(inp.source, "name", None) or name
                for name, inp in package.metadata.workflow.inputs.items()
                if getattr(inp.source, "kind", None) == "application"
                and (getattr(inp.source, "name", None) or name) == "prompt_lengths"
            ),
            None,
        )
        outputs = package.metadata.workflow.outputs
        self._tokens_output = next((n for n, o in outputs.items() if o.role == "tokens"), None)
        self._emitting_loops: dict = {}  # output -> the innermost loop emitting into it
        path = tokenizer_file(package)
        self._codec = TextCodec(path) if path is not None else None

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_dir(cls, path, executor: str = "ort", device: str = "cpu") -> Engine:
        if executor not in EXECUTORS:
            raise UsageError(
                f"unknown executor {executor!r}", hint=f"Use one of: {', '.join(EXECUTORS)}."
            )
        if device not in DEVICES:
            raise UsageError(
                f"unknown device {device!r}", hint=f"Use one of: {', '.join(DEVICES)}."
            )
        package = load_package(Path(path))  # a bare decoder is lowered to a workflow here
        counters = Counters()
        native = executor == "native" and not faults.active("native_falls_back_to_ort")
        onnx_executor = (
            NativeExecutor(device, counters) if native else OrtExecutor(device, counters)
        )
        sessions: dict = {}
        workflow = package.metadata.workflow
        for name, comp in workflow.components.items():
            impl = comp.implementation
            if isinstance(impl, OnnxImplementation):
                sessions[name] = onnx_executor.load(name, package.root / impl.artifact)
            elif isinstance(impl, BindingImplementation) and comp.contract is not None:
                sessions[name] = build_contract_session(package, name, comp, onnx_executor)
            elif isinstance(impl, BindingImplementation):
                sessions[name] = BindingCopy(name)
            elif isinstance(impl, AdapterImplementation):
                sessions[name] = build_adapter_session(package, name, comp, counters)
        return cls(package, executor, device, sessions, counters)

    # ------------------------------------------------------------------ sessions

    @property
    def counters(self) -> dict:
        return self._counters.snapshot()

    def create_session(self) -> str:
        workflow = self.package.metadata.workflow
        publishes_tokens = any(o.role == "tokens" for o in workflow.outputs.values())
        if publishes_tokens and not any(c.scope == "session" for c in workflow.state.values()):
            raise RunError(
                "E58",
                "this package publishes tokens but declares no session-scoped state, so a "
                "session would carry nothing from one turn to the next",
                hint="Declare a `scope: session` state cell with `session.continuation` "
                "(`kind: prompt_prefix`) to continue conversations, or run without a session.",
            )
        sid = uuid.uuid4().hex
        with self._lock:
            self._stored[sid] = {}
        return sid

    def _session(self, sid: str) -> dict:
        try:
            return self._stored[sid]
        except KeyError:
            raise RunError(
                "E58",
                f"unknown session {sid!r} (closed, or never created)",
                hint="Call engine.create_session() and pass the id it returns.",
            ) from None

    def session_token_count(self, sid: str) -> int:
        """Tokens a session's conversation holds (its prompts plus what its turns generated)."""
        with self._lock:
            stored = self._session(sid)
        if self._continuation is None:
            return 0
        conversation = stored.get(self._continuation[0])
        return 0 if conversation is None else int(conversation.shape[-1])

    def reset_session(self, sid: str) -> None:
        with self._lock:
            self._session(sid).clear()
            self._forget_kept(sid)

    def close_session(self, sid: str) -> None:
        with self._lock:
            self._session(sid)
            del self._stored[sid]
            self._forget_kept(sid)

    def _forget_kept(self, sid: str) -> None:
        for session in self._sessions.values():
            if hasattr(session, "forget"):
                session.forget(sid)

    # ------------------------------------------------------------------ running

    def run(
        self,
        prompt=None,
        inputs=None,
        *,
        max_new_tokens=None,
        seed=None,
        greedy=None,
        temperature=None,
        top_k=None,
        top_p=None,
        min_p=None,
        stop_on_eos=True,
        session_id=None,
        overrides=None,
    ) -> RunResult:
        """Run one request. ``overrides`` maps an ``application_overridable`` component to a
        declared replacement of the same contract, run in its place for this request."""
        resolved = resolve_overrides(self.package, overrides)
        if is_text(prompt):
            if self._codec is None:
                raise no_tokenizer_error()
            prompt = self._codec.encode(prompt)
        inputs = dict(inputs or {})
        conversation = None
        if self._continuation is not None and session_id is not None:
            conversation = self._conversation(session_id, prompt)
            prompt = [conversation]
        prompt = self._pad_ragged(prompt, inputs)
        request = Request(
            prompt=prompt,
            inputs=inputs,
            max_new_tokens=max_new_tokens,
            seed=seed,
            greedy=greedy,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            min_p=min_p,
            stop_on_eos=stop_on_eos,
            session_id=session_id,
        )
        stored: dict[str, np.ndarray] = {}
        if self._session_cells:
            if session_id is None:
                first = next(iter(self._session_cells))
                raise RunError(
                    "E58",
                    f"session-scoped workflow state {first!r} requires a session id",
                    hint="Create one with engine.create_session() and pass session_id=...",
                )
            with self._lock:
                stored = dict(self._session(session_id))
        elif session_id is not None:
            with self._lock:
                self._session(session_id)
        for session in self._sessions.values():
            if hasattr(session, "begin_run"):
                session.begin_run(stop_on_eos, session_id)
        bound = self._binder.bind(request)
        selection = select_adapters(self.package, bound.values)
        for session in self._sessions.values():
            if isinstance(session, ParameterOverlay):
                session.selection = selection
        frame = self._interpreter.run(
            bound.values,
            bound.symbols,
            stored_session=stored,
            stop_on_eos=stop_on_eos,
            batch=bound.batch,
            overrides=resolved,
        )
        outputs = frame.outputs.finish(frame.symbols)
        if self._session_cells:
            saved = {}
            for name, cell in self._session_cells.items():
                ref = frame.final_refs.get(name) or cell.initializer
                if ref is None or ref not in frame.values:
                    raise RunError("E58", f"session cell {name!r} has no final value to store")
                saved[name] = frame.values[ref]
            with self._lock:  # atomic: stored only after a fully successful run
                if not faults.active("session_not_saved"):
                    self._session(session_id).update(saved)
        self._counters.runs += 1
        tokens, reasons = self._tokens(outputs, frame)
        if conversation is not None:
            grown = np.asarray([conversation + (tokens[0] if tokens else [])], dtype=np.int64)
            with self._lock:  # stored only after a fully successful turn
                self._session(session_id)[self._continuation[0]] = grown
        events = {k: list(v) for k, v in frame.outputs.events.items()}
        text = (
            self._codec.decode(tokens) if self._codec is not None and tokens is not None else None
        )
        return RunResult(
            outputs=outputs, tokens=tokens, finish_reasons=reasons, events=events, text=text
        )

    def _conversation(self, sid: str, prompt) -> list[int]:
        """The whole prompt of a session turn: the stored conversation, then the new tokens."""
        with self._lock:
            stored = self._session(sid).get(self._continuation[0])
        rows = prompt.tolist() if isinstance(prompt, np.ndarray) else list(prompt or [])
        if rows and not isinstance(rows[0], list | tuple):
            rows = [rows]
        if len(rows) != 1:
            raise RunError(
                "H75",
                f"a session turn continues one conversation, but the prompt has {len(rows)} rows",
                hint="Pass one prompt row per turn (prompt=[[...]] or a string).",
            )
        previous = [] if stored is None else stored.reshape(-1).astype(int).tolist()
        return previous + [int(t) for t in rows[0]]

    def _pad_ragged(self, prompt, inputs: dict):
        """Rows of different lengths are right-padded (with 0) when the workflow takes their
        lengths through an application input named ``prompt_lengths``; otherwise they are left
        for the binder to refuse."""
        if prompt is None or isinstance(prompt, np.ndarray) or not prompt:
            return prompt
        rows = list(prompt)
        if not all(isinstance(r, list | tuple | np.ndarray) for r in rows):
            return prompt
        widths = [len(r) for r in rows]
        if len(set(widths)) == 1:
            return prompt
        name = self._lengths_input
        if name is None or name in inputs:
            return prompt
        width = max(widths)
        inputs[name] = np.asarray(widths, dtype=np.int64)
        return [list(r) + [0] * (width - len(r)) for r in rows]

    # ------------------------------------------------------------------ tokens

    def _tokens(self, outputs: dict, frame) -> tuple:
        workflow = self.package.metadata.workflow
        name = self._tokens_output
        if name is None:
            return None, None
        value = outputs.get(name)
        if value is None:
            rows = frame.outputs.batch or 1
            tokens = [[] for _ in range(rows)]
        elif isinstance(value, list):
            tokens = [[] if row is None else row.reshape(-1).astype(int).tolist() for row in value]
        else:
            array = np.asarray(value)
            axis = workflow.outputs[name].contract.request_axis or 0
            if array.ndim == 0:
                tokens = [[int(array)]]
            else:
                array = np.moveaxis(array, axis, 0)
                tokens = [row.reshape(-1).astype(int).tolist() for row in array]
        return tokens, self._finish_reasons(name, len(tokens), frame, outputs)

    def _finish_reasons(self, output: str, rows: int, frame, outputs=None) -> list[str]:
        """Per row: from the workflow's ``finish_reasons`` output where it declares one (codes
        1 stop, 2 length, 3 context_length), else ``length`` if the row was active for every
        iteration the loop allowed and ``stop`` if the loop predicate ended it earlier (or no
        loop publishes the tokens)."""
        declared = (outputs or {}).get("finish_reasons")
        if isinstance(declared, np.ndarray) and declared.dtype.kind in "iu":
            codes = declared.reshape(-1).tolist()
            if len(codes) == rows:
                return [FINISH_CODES.get(int(c), "length") for c in codes]
        if output not in self._emitting_loops:
            steps = self.package.metadata.workflow.steps
            self._emitting_loops[output] = _loop_emitting(steps, output)
        loop = self._emitting_loops[output]
        report = frame.loop_reports.get(id(loop)) if loop is not None else None
        if report is None:
            return ["stop"] * rows
        counts = report.active_iterations
        if counts.size == 1:
            counts = np.repeat(counts, rows)
        return [
            "length" if r < counts.size and counts[r] >= report.limit else "stop"
            for r in range(rows)
        ]


def _loop_emitting(steps, output: str, loop=None):
    """The innermost loop whose body emits into ``output`` (None when no loop does)."""
    for step in steps:
        if isinstance(step, EmitStep) and step.output == output and loop is not None:
            return loop
        inner = step if isinstance(step, LoopStep) else loop
        found = _loop_emitting(child_steps(step), output, inner)
        if found is not None:
            return found
    return None
