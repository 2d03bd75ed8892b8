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
from .counters import Counters
from .errors import RunError, UsageError
from .executors.base import BindingCopy
from .executors.native import NativeExecutor
from .executors.ort import OrtExecutor
from .package import Package, load_package
from .package.model import (
    AdapterImplementation,
    BindingImplementation,
    BranchStep,
    EmitStep,
    LoopStep,
    OnnxImplementation,
    SequenceStep,
)
from .tokenizer import TextCodec, is_text, no_tokenizer_error, tokenizer_file
from .workflow.inputs import InputBinder, Request
from .workflow.interpreter import Interpreter, dynamic_symbols

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
        self._session_cells = {
            name: cell
            for name, cell in package.metadata.workflow.state.items()
            if cell.scope == "session"
        }
        self._stored: dict[str, dict[str, np.ndarray]] = {}
        self._lock = threading.Lock()
        self.provenance = "authored"
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
        package = load_package(Path(path))
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

    def reset_session(self, sid: str) -> None:
        with self._lock:
            self._session(sid).clear()

    def close_session(self, sid: str) -> None:
        with self._lock:
            self._session(sid)
            del self._stored[sid]

    # ------------------------------------------------------------------ running

    def run(
        self,
        prompt=None,
        inputs=None,
        *,
        max_new_tokens=None,
        seed=None,
        greedy=True,
        temperature=None,
        top_k=None,
        top_p=None,
        min_p=None,
        stop_on_eos=True,
        session_id=None,
    ) -> RunResult:
        if is_text(prompt):
            if self._codec is None:
                raise no_tokenizer_error()
            prompt = self._codec.encode(prompt)
        request = Request(
            prompt=prompt,
            inputs=dict(inputs or {}),
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
        events = {k: list(v) for k, v in frame.outputs.events.items()}
        text = (
            self._codec.decode(tokens) if self._codec is not None and tokens is not None else None
        )
        return RunResult(
            outputs=outputs, tokens=tokens, finish_reasons=reasons, events=events, text=text
        )

    # ------------------------------------------------------------------ tokens

    def _tokens(self, outputs: dict, frame) -> tuple:
        workflow = self.package.metadata.workflow
        name = next((n for n, o in workflow.outputs.items() if o.role == "tokens"), None)
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
        return tokens, self._finish_reasons(name, len(tokens), frame)

    def _finish_reasons(self, output: str, rows: int, frame) -> list[str]:
        """Per row: ``length`` if the row was active for every iteration the loop allowed,
        ``stop`` if the loop predicate ended it earlier (or no loop publishes the tokens)."""
        loop = _loop_emitting(self.package.metadata.workflow.steps, output)
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
        if isinstance(step, LoopStep):
            found = _loop_emitting(step.steps, output, step)
            if found is not None:
                return found
        elif isinstance(step, BranchStep):
            for case in (*step.cases.values(), step.default or ()):
                found = _loop_emitting(case, output, loop)
                if found is not None:
                    return found
        elif isinstance(step, SequenceStep):
            found = _loop_emitting(step.steps, output, loop)
            if found is not None:
                return found
    return None
