"""The compiled interpreter (the default fast path) gives exactly what the plain interpreter
(the specification path) gives: the same outputs bit for bit, the same tokens, finish reasons
and events, and the same refusals, on every run case and on random requests."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conformance.cases.run_cases import execute
from conformance.runtimes.reference import ReferenceRuntime
from fixtures import package_path
from fixtures.generators import RUN_CASES
from reference_runtime import Engine, ReferenceRuntimeError
from reference_runtime.workflow.compiled import CompiledInterpreter


class _Runtime(ReferenceRuntime):
    """The reference adapter with the interpreter chosen explicitly."""

    def __init__(self, compiled: bool):
        super().__init__("ort")
        self.compiled = compiled

    def load(self, package_dir: str, executor: str | None = None):
        return Engine.from_dir(package_dir, compiled=self.compiled)


def _same(a, b, where="") -> None:
    """Deep, exact equality of run results (arrays bit for bit, dtypes included)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray), where
        assert a.dtype == b.dtype and a.shape == b.shape, where
        assert a.tobytes() == b.tobytes(), where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for key in a:
            _same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list | tuple):
        assert isinstance(b, list | tuple) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


def test_the_engine_runs_the_compiled_interpreter_by_default():
    engine = Engine.from_dir(package_path("counting_loop"))
    assert type(engine._interpreter) is CompiledInterpreter and engine.compiled
    plain = Engine.from_dir(package_path("counting_loop"), compiled=False)
    assert type(plain._interpreter) is not CompiledInterpreter and not plain.compiled


@pytest.mark.parametrize("case", RUN_CASES, ids=lambda c: c.id)
def test_every_run_case_gives_the_same_results(case):
    _same(execute(_Runtime(True), case), execute(_Runtime(False), case), case.id)


_ENGINES: dict = {}


def _engines(package: str) -> tuple[Engine, Engine]:
    if package not in _ENGINES:
        root = package_path(package)
        _ENGINES[package] = (Engine.from_dir(root), Engine.from_dir(root, compiled=False))
    return _ENGINES[package]


def _outcome(engine: Engine, **request):
    try:
        result = engine.run(**request)
    except ReferenceRuntimeError as exc:
        return {"error": exc.code, "message": exc.message}
    return {
        "outputs": result.outputs,
        "tokens": result.tokens,
        "finish_reasons": result.finish_reasons,
        "events": result.events,
    }


def _agree(package: str, **request) -> None:
    compiled, plain = _engines(package)
    _same(_outcome(compiled, **request), _outcome(plain, **request), package)


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ROW = st.lists(st.integers(0, 15), min_size=1, max_size=4)


@SETTINGS
@given(
    rows=st.lists(ROW, min_size=1, max_size=3),
    budget=st.integers(-1, 8),
    seed=st.integers(0, 3),
    ragged=st.booleans(),
)
def test_random_decoder_requests(rows, budget, seed, ragged):
    """Greedy and sampled arithmetic decoders: ragged prompts (lengths given), budgets (a
    negative one is refused), seeds."""
    width = max(map(len, rows))
    prompt = [r + [0] * (width - len(r)) for r in rows] if ragged else [rows[0]] * len(rows)
    inputs = {"prompt_lengths": np.array([len(r) for r in rows])} if ragged else {}
    for package in ("arithmetic_decoder", "arithmetic_decoder_sampled"):
        _agree(package, prompt=prompt, inputs=inputs, max_new_tokens=budget, seed=seed)


@SETTINGS
@given(x=st.lists(st.integers(-3, 7), min_size=1, max_size=4), budget=st.integers(0, 8))
def test_random_counting_loops(x, budget):
    """Rows that stop at different iterations (inactive rows, per-row emits, finish reasons)."""
    _agree("counting_loop", inputs={"start": np.array(x)}, max_new_tokens=budget)


@SETTINGS
@given(
    start=st.lists(st.integers(0, 6), min_size=1, max_size=3),
    budget=st.integers(0, 6),
    tokens=st.integers(0, 20),
)
def test_random_scatter_requests(start, budget, tokens):
    """Fixed-capacity writes at per-row cursors, bounds refusals included."""
    inputs = {"start": np.array(start), "budget": np.array([budget] * len(start))}
    _agree("scatter_cache", prompt=[[tokens]] * len(start), inputs=inputs)


@SETTINGS
@given(
    prompt=st.lists(st.integers(-5, 5), min_size=1, max_size=4),
    negate=st.booleans(),
    mode=st.integers(-1, 3),
)
def test_random_branches(prompt, negate, mode):
    inputs = {"negate": np.array(negate), "mode": np.array([mode])}
    _agree("branching", prompt=[prompt], inputs=inputs)


@SETTINGS
@given(
    start=st.lists(st.floats(-4, 4, width=32), min_size=2, max_size=2),
    steps=st.integers(0, 5),
)
def test_random_events_and_appends(start, steps):
    inputs = {"start": np.array([start], np.float32)}
    _agree("events_and_appends", inputs=inputs, max_new_tokens=steps)
