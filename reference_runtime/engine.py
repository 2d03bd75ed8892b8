"""The public facade: ``Engine.from_dir(path).run(prompt=...)``.

```python
from reference_runtime import Engine
engine = Engine.from_dir("pkg", executor="ort", device="cpu")
result = engine.run(prompt=[[1, 2, 3]], max_new_tokens=8)
result.tokens, result.finish_reasons, result.outputs["tokens"], engine.counters
```

A run: the prompt is prepared (``requests.py``), bound to the workflow's inputs
(``workflow/inputs.py``), the interpreter walks the steps (``workflow/interpreter.py``, or its
fast path ``workflow/compiled.py``), session state is stored (``sessions.py``), and the tokens
and finish reasons are read from what the run published (``results.py``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

from .counters import Counters
from .errors import ReferenceRuntimeError, RunError, UsageError
from .executors import load_sessions
from .executors.adapters import select_adapters
from .executors.base import RunContext, running
from .package import Package, load_package
from .package.rules.batching import batched_loop
from .requests import API, PromptPreparer, Spelling, check_keywords, check_token_rows
from .results import RunResult, ServedResult, TokenReader
from .sessions import SessionStore
from .workflow.admission import KvEstimator, check_budget
from .workflow.batching import BatchServer, Pending
from .workflow.compiled import CompiledInterpreter
from .workflow.inputs import InputBinder, Request
from .workflow.interpreter import Interpreter, dynamic_symbols
from .workflow.overrides import resolve_overrides

EXECUTORS = ("ort", "native")
DEVICES = ("cpu", "cuda")

__all__ = ["Engine", "RunResult", "ServedResult"]

# the keys a served request may carry: the keywords of ``run`` (no session, no overrides) and
# its arrival step
SERVE_KEYWORDS = (
    "max_new_tokens", "seed", "greedy", "temperature", "top_k", "top_p", "min_p", "stop_on_eos",
)  # fmt: skip
SERVE_KEYS = ("prompt", "inputs", "arrival", *SERVE_KEYWORDS)


class Engine:
    """Loads a package once; runs requests through the one interpreter.

    Thread safety: one engine may serve runs from several threads at once. Sessions,
    the interpreter and its compiled steps are shared and keep nothing of a request: each run
    has its own frame and its own context (``executors/base.py: current_run``); the adapter
    cache, the session store and the counters are locked. A conversation session runs one
    turn at a time: a run, reset or close of a session while another run of it is in flight
    is refused (``E58``).
    """

    def __init__(
        self,
        package: Package,
        executor: str,
        device: str,
        sessions: dict,
        counters: Counters,
        compiled: bool = True,
        kv_budget_bytes: int | None = None,
    ):
        workflow = package.metadata.workflow
        self.package = package
        self.executor = executor
        self.device = device
        self.compiled = compiled
        self.kv_budget_bytes = check_budget(kv_budget_bytes)
        self._kv = KvEstimator(workflow, package.metadata.speculative)
        if self.kv_budget_bytes is not None:
            self._boundable(
                "a KV budget cannot be enforced", "Load the package without kv_budget_bytes"
            )
        self.provenance = package.provenance  # "authored" or "lowered"
        self._counters = counters
        self._sessions = sessions
        interpreter = CompiledInterpreter if compiled else Interpreter
        self._interpreter = interpreter(workflow, sessions, counters)
        self._store = SessionStore(workflow)
        self._prompts = PromptPreparer(package, self._store)
        vocabulary = self._prompts.vocabulary

        def check_tokens(name, array):
            check_token_rows(array, Spelling(prompt=f"input {name!r}"), vocabulary)

        self._binder = InputBinder(package.metadata, dynamic_symbols(workflow), check_tokens)
        self._tokens = TokenReader(workflow)
        self._batched = batched_loop(workflow)
        self._server = None  # made on the first serve

    @classmethod
    def from_dir(
        cls,
        path,
        executor: str = "ort",
        device: str = "cpu",
        *,
        compiled: bool = True,
        kv_budget_bytes: int | None = None,
        draft=None,
    ) -> Engine:
        """Load the package at ``path`` (a workflow package, or a bare decoder lowered to one)
        with every ONNX component on ``executor`` (``ort`` or ``native``) and ``device``
        (``cpu`` or ``cuda``). ``draft``, a bare decoder folder, is attached to the bare
        decoder at ``path``: it decodes speculatively with that draft (docs/lowering.md, "A
        draft"); a workflow package takes none. ``compiled=False`` runs the plain interpreter, the specification
        path, instead of its compiled fast path (same results). ``kv_budget_bytes`` (an
        integer >= 0) refuses, before any component runs, a request whose KV would not fit
        (``H113``; docs/runtime.md, "KV admission")."""
        kv_budget_bytes = check_budget(kv_budget_bytes)
        if executor not in EXECUTORS:
            raise UsageError(
                f"unknown executor {executor!r}", hint=f"Use one of: {', '.join(EXECUTORS)}."
            )
        if device not in DEVICES:
            raise UsageError(
                f"unknown device {device!r}", hint=f"Use one of: {', '.join(DEVICES)}."
            )
        # a bare decoder is lowered to a workflow here (with its draft, when one is given)
        package = load_package(Path(path), draft=draft)
        counters = Counters()
        sessions = load_sessions(package, executor, device, counters)
        return cls(package, executor, device, sessions, counters, compiled, kv_budget_bytes)

    @property
    def counters(self) -> dict:
        return self._counters.snapshot()

    # ------------------------------------------------------------------ sessions

    def create_session(self) -> str:
        return self._store.create()

    def session_token_count(self, sid: str) -> int:
        """Tokens a session's conversation holds (its prompts plus what its turns generated)."""
        return self._store.token_count(sid)

    def reset_session(self, sid: str) -> None:
        with self._store.turn(sid):
            self._store.reset(sid)
            for session in self._sessions.values():
                session.forget(sid)

    def close_session(self, sid: str) -> None:
        with self._store.turn(sid):
            self._store.close(sid)
            for session in self._sessions.values():
                session.forget(sid)

    # ------------------------------------------------------------------ running

    def check_request(
        self,
        prompt=None,
        inputs=None,
        *,
        spelling: Spelling = API,
        **keywords,
    ) -> None:
        """Refuse (``H75``) a request whose prompt or keywords ``run`` would refuse before
        binding them, or that leaves required inputs without a value or names undeclared ones
        (every one of them at once), without running anything; ``spelling`` names the request's parts in the
        caller's terms (``Spelling`` fields: the keywords of ``run``)."""
        self._checked(prompt, inputs, keywords, spelling)

    def _checked(self, prompt, inputs, keywords: dict, spelling: Spelling):
        unknown = sorted(set(keywords) - set(Spelling.__dataclass_fields__))
        if unknown:
            raise UsageError(f"unknown request keyword(s): {', '.join(unknown)}")
        keywords = check_keywords(keywords, spelling)
        if inputs is None:
            inputs = {}
        if not isinstance(inputs, dict):
            raise RunError(
                "H75",
                f"inputs must be a dict of input name -> value, not {type(inputs).__name__}",
                hint="Pass inputs={'name': value, ...}.",
            )
        bad = [name for name in inputs if not isinstance(name, str)]
        if bad:
            raise RunError(
                "H75",
                f"input names are strings; the request names an input {bad[0]!r}",
                hint="Name each input by its workflow input name (or its source name).",
            )
        checked = {k: v for k, v in keywords.items() if k != "stop_on_eos"}
        self._binder.check_keywords(Request(**checked), spelling)  # what the package allows
        prompt = self._prompts.check(prompt, spelling)
        # every required input without a value and every undeclared one, at once
        self._binder.check_names(Request(prompt=prompt, inputs=inputs, **checked), spelling)
        return prompt, dict(inputs), keywords

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
        keywords = dict(
            max_new_tokens=max_new_tokens,
            seed=seed,
            greedy=greedy,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            min_p=min_p,
            stop_on_eos=stop_on_eos,
        )
        prompt, inputs, keywords = self._checked(prompt, inputs, keywords, API)
        with self._store.turn(session_id):  # one run of a session at a time
            return self._run(prompt, inputs, session_id, overrides, keywords)

    def _run(self, prompt, inputs: dict, session_id, overrides, keywords: dict) -> RunResult:
        resolved = resolve_overrides(self.package, overrides)
        stop_on_eos = keywords.pop("stop_on_eos")
        prompt, inputs, conversation = self._prompts.prepare(prompt, inputs, session_id)
        request = Request(prompt=prompt, inputs=inputs, session_id=session_id, **keywords)
        stored = self._store.stored(session_id)
        bound = self._binder.bind(request)
        self._admit(bound, session_id)  # before any component runs
        context = RunContext(stop_on_eos, session_id, select_adapters(self.package, bound.values))
        with running(context):  # what the sessions see of this request, on this thread only
            frame = self._interpreter.run(
                bound.values,
                bound.symbols,
                stored_session=stored,
                stop_on_eos=stop_on_eos,
                batch=bound.batch,
                overrides=resolved,
            )
        outputs = frame.outputs.finish(frame.symbols)
        if self._store.cells:
            self._store.save(session_id, self._final_cells(frame))  # only after a success
        self._counters.run_completed()
        tokens, reasons = self._tokens.tokens(outputs, frame)
        if conversation is not None:
            self._store.extend_conversation(session_id, conversation, tokens)
        return RunResult(
            outputs=outputs,
            tokens=tokens,
            finish_reasons=reasons,
            events={k: list(v) for k, v in frame.outputs.events.items()},
            text=self._prompts.decode(tokens),
        )

    # ------------------------------------------------------------------ serving

    def serve(self, requests, *, slots=None, trace=None) -> Iterator[ServedResult]:
        """Serve several requests in one continuous batch (docs/runtime.md, "Serving requests
        in a continuous batch"); yields a :class:`ServedResult` per request as it finishes.

        Each request is a mapping: ``prompt`` (one row), ``inputs``, the keywords of ``run``
        (``max_new_tokens``, ``seed``, ``greedy``, ``temperature``, ``top_k``, ``top_p``,
        ``min_p``, ``stop_on_eos``) and ``arrival``, the batch step from which it may be
        admitted (default 0). ``slots`` (default: the contract's ``max_slots``) is how many
        requests the batch holds at once. Every request is checked, bound and (under a KV
        budget) admitted before anything runs: one refused request refuses them all, naming
        it. ``trace``, a list, receives one record per batch step (which request each slot
        held, each slot's ``accepted_len``, the liveness bit)."""
        found = self._batched
        if found is None:
            raise UsageError(
                "this package cannot be served in a continuous batch: its workflow has no "
                "onnx-genai.continuous-batch component",
                code="H124",
                hint="Run its requests one at a time with run(), or serve a package whose "
                "workflow declares the contract (a lowered bare decoder does, unless its "
                "model.runtime_configurable.continuous_batching is false).",
            )
        component = self.package.metadata.workflow.components[found.component]
        max_slots = int(dict(component.contract.parameters)["max_slots"])
        if slots is None:
            slots = max_slots
        integer = isinstance(slots, int) and not isinstance(slots, bool)
        if not integer or not 1 <= slots <= max_slots:
            raise UsageError(
                f"slots={slots!r}: this package's batch holds 1 to {max_slots} slots "
                f"(max_slots of component {found.component!r})",
                code="H124",
                hint=f"Pass slots as a whole number from 1 to {max_slots}, or leave it out.",
            )
        if isinstance(requests, Mapping | str | bytes) or not hasattr(requests, "__iter__"):
            raise RunError(
                "H75",
                f"requests must be a list of request mappings, not {type(requests).__name__}",
                hint="Pass serve([{'prompt': [1, 2, 3], 'arrival': 0}, ...]).",
            )
        pending = [self._pending(i, request) for i, request in enumerate(list(requests))]
        if self.kv_budget_bytes is not None:
            for p in pending:
                if p.kv_bytes > self.kv_budget_bytes:
                    self._counters.add("admission", "refused")
                    raise RunError(
                        "H113",
                        f"requests[{p.index}] needs {p.kv_bytes} bytes of KV but the budget "
                        f"has {self.kv_budget_bytes}; nothing was served",
                        hint="Shorten its prompt or lower its max_new_tokens, or load the "
                        "engine with a larger kv_budget_bytes.",
                    )
            self._counters.add("admission", "admitted", len(pending))
        return self._serve(found, pending, slots, trace)

    def _pending(self, i: int, request) -> Pending:
        """Request ``i`` checked and bound exactly as ``run`` checks and binds it."""
        where = f"requests[{i}]"
        if not isinstance(request, Mapping):
            raise RunError(
                "H75",
                f"{where} is a {type(request).__name__}, not a mapping",
                hint="Give each request as {'prompt': ..., 'max_new_tokens': ..., 'arrival': ...}.",
            )
        unknown = sorted(str(k) for k in request if k not in SERVE_KEYS)
        if unknown:
            why = (
                " (a served request has no session and no overrides)"
                if {"session_id", "overrides"} & set(unknown)
                else ""
            )
            raise RunError(
                "H75",
                f"{where} has unknown key(s) {', '.join(unknown)}{why}",
                hint=f"A served request may carry: {', '.join(SERVE_KEYS)}.",
            )
        arrival = request.get("arrival", 0)
        if not isinstance(arrival, int) or isinstance(arrival, bool) or arrival < 0:
            raise RunError(
                "H75",
                f"{where}.arrival is {arrival!r}, not a step number >= 0",
                hint="Give arrival as a whole number of batch steps (0: from the start).",
            )
        spelling = Spelling(**{name: f"{where}.{name}" for name in Spelling.__dataclass_fields__})
        keywords = {k: request.get(k) for k in SERVE_KEYWORDS}
        keywords["stop_on_eos"] = request.get("stop_on_eos", True)
        try:
            prompt, inputs, keywords = self._checked(
                request.get("prompt"), request.get("inputs"), keywords, spelling
            )
            stop_on_eos = keywords.pop("stop_on_eos")
            prompt, inputs, _ = self._prompts.prepare(prompt, inputs, None)
            bound = self._binder.bind(Request(prompt=prompt, inputs=inputs, **keywords))
        except ReferenceRuntimeError as exc:
            if not exc.message.startswith(where):
                exc.message = f"{where}: {exc.message}"
                exc.args = (exc.message,)
            raise
        if (bound.batch or 1) != 1:
            raise RunError(
                "H75",
                f"{where} carries {bound.batch} prompt rows; a served request carries one",
                hint="Submit each row as a request of its own.",
            )
        kv = self._kv.needed(bound)[0] if self.kv_budget_bytes is not None else 0
        adapters = select_adapters(self.package, bound.values)
        return Pending(i, arrival, bound.values, bound.symbols, stop_on_eos, adapters, kv)

    def _serve(self, found, pending, slots: int, trace) -> Iterator[ServedResult]:
        if self._server is None:
            workflow = self.package.metadata.workflow
            plain = Interpreter(workflow, self._sessions, self._counters)
            self._server = BatchServer(
                workflow, plain, found, self._counters, plain.per_row_outputs
            )

        def context(p: Pending) -> RunContext:
            return RunContext(p.stop_on_eos, None, p.adapters)

        served = self._server.serve(pending, slots, context, running, self.kv_budget_bytes, trace)
        for done in served:
            frame = done.frame
            outputs = frame.outputs.finish(frame.symbols)
            self._counters.run_completed()
            tokens, reasons = self._tokens.tokens(outputs, frame)
            result = RunResult(
                outputs=outputs,
                tokens=tokens,
                finish_reasons=reasons,
                events={k: list(v) for k, v in frame.outputs.events.items()},
                text=self._prompts.decode(tokens),
            )
            request = done.request
            yield ServedResult(
                request.index, request.arrival, done.admitted, done.finished, done.slot, result
            )

    def kv_bytes_needed(self, prompt=None, inputs=None, *, session_id=None, **keywords) -> int:
        """The KV bytes ``run`` with these arguments would need (docs/runtime.md, "KV
        admission"): the figure admission compares with the budget, computed without running
        anything (a session turn counts the session's stored conversation)."""
        self._boundable("no figure bounds it", "Run it without asking for its KV bytes")
        prompt, inputs, keywords = self._checked(prompt, inputs, keywords, API)
        keywords.pop("stop_on_eos", None)
        prompt, inputs, _ = self._prompts.prepare(prompt, inputs, session_id)
        request = Request(prompt=prompt, inputs=inputs, session_id=session_id, **keywords)
        return self._kv.needed(self._binder.bind(request))[0]

    def _boundable(self, consequence: str, fix: str) -> None:
        """Refuse (``H114``) what needs a bound of the KV of a package whose KV has none."""
        if self._kv.problems:
            raise UsageError(
                f"this package's KV cannot be bounded before a request runs, so {consequence}: "
                f"{'; '.join(self._kv.problems)}",
                code="H114",
                hint=f'{fix}, or declare what bounds its KV (docs/runtime.md, "KV admission").',
            )

    def _admit(self, bound, session_id) -> None:
        """Refuse (``H113``) a request whose KV does not fit the engine's budget; nothing has
        run yet, so nothing is half-run and a session stays as it was."""
        if self.kv_budget_bytes is None:
            return
        needed, per_cell = self._kv.needed(bound)
        if needed > self.kv_budget_bytes:
            self._counters.add("admission", "refused")
            turn = (
                " (this session turn's prompt is the whole conversation)"
                if (session_id is not None and self._store.continuation is not None)
                else ""
            )
            cells = ", ".join(f"{name} {n}" for name, n in per_cell.items())
            raise RunError(
                "H113",
                f"the request needs {needed} bytes of KV but the budget has "
                f"{self.kv_budget_bytes} available ({cells}; {bound.batch or 1} row(s), "
                f"{sum(self._kv.positions(bound))} token positions{turn})",
                hint="Shorten the prompt, lower max_new_tokens or send fewer rows (for a "
                "session: reset it or start a new one), or load the engine with a larger "
                "kv_budget_bytes.",
            )
        self._counters.add("admission", "admitted")

    def _final_cells(self, frame) -> dict:
        """The final value of each session cell the store keeps (its own name, or the phi that
        exported it from a branch)."""
        saved = {}
        for name, cell in self._store.cells.items():
            ref = frame.final_refs.get(name) or cell.initializer
            if ref not in frame.values:
                raise RunError("E58", f"session cell {name!r} has no final value to store")
            saved[name] = frame.values[ref]
        return saved
