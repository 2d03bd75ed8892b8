"""KV admission: ``Engine.from_dir(kv_budget_bytes=N)`` refuses a request whose KV does not fit
(H113) before any component runs, on cold requests and session turns alike; a budget the
package cannot take is refused at load (H114). Figures follow the fixtures' construction:

- ``arithmetic_decoder``: one cell ``cache`` float32 ``[batch, 1, S, 2]`` (growing, max the
  literal 512): ``8 * rows * min(prompt width + max_new_tokens, 512)`` bytes;
- ``arithmetic_decoder_sampled``: the same cell, ``bounded`` by the literal 512:
  ``8 * rows * 512`` whatever the request;
- ``genai_decoder_gqa``: four float32 cells ``[batch, 2, S, 8]``: ``256 * rows * S``.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from pathlib import Path

import numpy as np
import pytest

from conformance import goldens
from conformance.cases import kv_admission
from conformance.cases.catalogue import catalogue
from conformance.cases.kv_admission import UNBOUNDED_KV
from conformance.cases.run_cases import run_requests
from conformance.certify import certify
from conformance.protocol import Refused
from conformance.runtimes.reference import ReferenceRuntime
from fixtures import package_path
from fixtures.generators.cases import RunCase
from reference_runtime import Engine, RunError, UsageError
from reference_runtime.cli import main

ARITH = package_path("arithmetic_decoder")
GQA = package_path("genai_decoder_gqa")


def arith_bytes(rows: int, width: int, new: int) -> int:
    return 8 * rows * min(width + new, 512)


def gqa_bytes(positions: int) -> int:
    return 256 * positions


def nothing_ran(engine: Engine) -> bool:
    counters = engine.counters
    return not counters["invocations"] and counters["runs"] == 0


# ------------------------------------------------------------------ the budget itself


@pytest.mark.parametrize("budget", [-1, 1.5, True, "64", np.float32(8)])
def test_budget_that_is_not_bytes_is_refused_at_load(budget):
    with pytest.raises(UsageError) as refused:
        Engine.from_dir(ARITH, kv_budget_bytes=budget)
    assert refused.value.code == "H114"
    assert "kv_budget_bytes" in refused.value.message and refused.value.hint


def test_unboundable_kv_refuses_a_budget_but_runs_without_one(tmp_path):
    root = UNBOUNDED_KV.materialise(tmp_path)
    assert Engine.from_dir(root).run([[3, 1, 4]], max_new_tokens=2).tokens
    with pytest.raises(UsageError) as refused:
        Engine.from_dir(root, kv_budget_bytes=10**9)
    assert refused.value.code == "H114"
    assert "'cache'" in refused.value.message and "'heads'" in refused.value.message
    # nor is a figure given for it (one without the unbounded cells would undercount)
    with pytest.raises(UsageError) as asked:
        Engine.from_dir(root).kv_bytes_needed([[3, 1, 4]], max_new_tokens=2)
    assert asked.value.code == "H114" and "'cache'" in asked.value.message


def test_no_budget_admits_without_counting():
    engine = Engine.from_dir(ARITH)
    engine.run([[3, 1, 4]], max_new_tokens=40)
    assert engine.counters["admission"] == {"admitted": 0, "refused": 0}


# ------------------------------------------------------------------ the figure


@pytest.mark.parametrize(
    "prompt, new, expected",
    [
        ([[3, 1, 4]], 5, arith_bytes(1, 3, 5)),
        ([[3, 1, 4], [1, 1, 1]], 9, arith_bytes(2, 3, 9)),
        ([[3, 1, 4]], None, arith_bytes(1, 3, 8)),  # the input's default: 8
        ([[1] * 300], 256, 8 * 512),  # capped by the literal max, 512
        ([[3, 1, 4]], 0, arith_bytes(1, 3, 0)),
    ],
)
def test_needed_bytes_follow_the_cells(prompt, new, expected):
    engine = Engine.from_dir(ARITH, kv_budget_bytes=0)
    assert engine.kv_bytes_needed(prompt, max_new_tokens=new) == expected


def test_a_bounded_cell_counts_its_max():
    engine = Engine.from_dir(package_path("arithmetic_decoder_sampled"), kv_budget_bytes=0)
    assert engine.kv_bytes_needed([[3, 1, 4]], max_new_tokens=2) == 8 * 512
    assert engine.kv_bytes_needed([[3, 1, 4], [1, 1, 1]], max_new_tokens=2) == 2 * 8 * 512


@pytest.mark.parametrize(
    "package, prompt",
    [(ARITH, [[3, 1, 4], [2, 7, 1]]), (GQA, [[4, 8, 15, 16]])],
)
def test_needed_bytes_bound_what_the_run_holds(package, prompt, monkeypatch):
    """The estimate is an upper bound: the KV cells' final values (their largest extent)
    never hold more bytes."""
    engine = Engine.from_dir(package, kv_budget_bytes=10**9)
    frames = []
    original = engine._interpreter.run

    def recording(*args, **kwargs):
        frames.append(original(*args, **kwargs))
        return frames[-1]

    monkeypatch.setattr(engine._interpreter, "run", recording)
    needed = engine.kv_bytes_needed(prompt, max_new_tokens=6)
    engine.run(prompt, max_new_tokens=6, stop_on_eos=False)
    cells = [c.name for c in engine._kv.cells]
    held = sum(np.asarray(frames[0].values[name]).nbytes for name in cells)
    assert 0 < held <= needed


# ------------------------------------------------------------------ cold requests


@pytest.mark.parametrize("executor", ["ort", "native"])
def test_fitting_request_equals_its_unbudgeted_run(executor, interpreter_mode):
    prompt, new = [[3, 1, 4], [2, 7, 1]], 6
    budget = arith_bytes(2, 3, new)  # exactly enough
    free = Engine.from_dir(ARITH, executor).run(prompt, max_new_tokens=new)
    engine = Engine.from_dir(ARITH, executor, kv_budget_bytes=budget)
    assert engine.compiled is (interpreter_mode == "compiled")
    result = engine.run(prompt, max_new_tokens=new)
    assert result.tokens == free.tokens and result.finish_reasons == free.finish_reasons
    for name, value in free.outputs.items():
        np.testing.assert_array_equal(result.outputs[name], value)
    assert engine.counters["admission"] == {"admitted": 1, "refused": 0}


@pytest.mark.parametrize("executor", ["ort", "native"])
def test_request_over_budget_is_refused_before_anything_runs(executor, interpreter_mode):
    prompt, new = [[3, 1, 4], [2, 7, 1]], 6
    needed = arith_bytes(2, 3, new)
    engine = Engine.from_dir(ARITH, executor, kv_budget_bytes=needed - 1)
    with pytest.raises(RunError) as refused:
        engine.run(prompt, max_new_tokens=new)
    error = refused.value
    assert error.code == "H113"
    assert f"needs {needed} bytes" in error.message
    assert f"{needed - 1} available" in error.message
    assert "max_new_tokens" in error.hint
    assert nothing_ran(engine)
    assert engine.counters["admission"] == {"admitted": 0, "refused": 1}
    # a smaller request still fits the same engine
    assert engine.run([[3, 1, 4], [2, 7, 1]], max_new_tokens=new - 1).tokens
    assert engine.counters["admission"] == {"admitted": 1, "refused": 1}


def test_more_rows_need_more_bytes():
    engine = Engine.from_dir(ARITH, kv_budget_bytes=arith_bytes(1, 3, 4))
    assert engine.run([[3, 1, 4]], max_new_tokens=4).tokens
    with pytest.raises(RunError) as refused:
        engine.run([[3, 1, 4], [3, 1, 4]], max_new_tokens=4)
    assert refused.value.code == "H113"


# ------------------------------------------------------------------ sessions


def _turns(engine, sid, turns):
    return [engine.run(prompt, max_new_tokens=new, session_id=sid).tokens for prompt, new in turns]


@pytest.mark.parametrize("executor", ["ort", "native"])
def test_overflowing_session_turn_leaves_the_session_unchanged(executor, interpreter_mode):
    free = Engine.from_dir(GQA, executor)
    sid = free.create_session()
    expected = _turns(free, sid, [([[5, 6, 7]], 4), ([[9, 10]], 4), ([[11]], 4)])
    stored = free.session_token_count(sid)

    engine = Engine.from_dir(GQA, executor, kv_budget_bytes=gqa_bytes(18))
    sid = engine.create_session()
    first = engine.run([[5, 6, 7]], max_new_tokens=4, session_id=sid).tokens
    held = engine.session_token_count(sid)
    # the stored conversation counts: 7 stored + 2 new + 10 = 19 positions > 18
    assert engine.kv_bytes_needed([[9, 10]], max_new_tokens=10, session_id=sid) == gqa_bytes(19)
    before = engine.counters
    with pytest.raises(RunError) as refused:
        engine.run([[9, 10]], max_new_tokens=10, session_id=sid)
    assert refused.value.code == "H113" and "whole conversation" in refused.value.message
    after = engine.counters
    assert after["invocations"] == before["invocations"] and after["runs"] == before["runs"]
    assert engine.session_token_count(sid) == held
    rest = _turns(engine, sid, [([[9, 10]], 4), ([[11]], 4)])
    assert [first, *rest] == expected
    assert engine.session_token_count(sid) == stored
    assert engine.counters["admission"] == {"admitted": 3, "refused": 1}
    # the kept KV survived the refusal: the later turns continued it
    assert engine.counters["prefix_reuse"]["hits"] == 2


# ------------------------------------------------------------------ the command line


def _cli(capsys, *argv) -> tuple[int, dict]:
    code = main(["run", str(ARITH), "--tokens", "[[3,1,4]]", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_cli_budget(capsys):
    needed = arith_bytes(1, 3, 4)
    code, fits = _cli(capsys, "--max-new-tokens", "4", "--kv-budget-bytes", str(needed))
    assert code == 0 and fits["counters"]["admission"] == {"admitted": 1, "refused": 0}
    code, free = _cli(capsys, "--max-new-tokens", "4")
    assert code == 0 and fits["tokens"] == free["tokens"]
    code, refused = _cli(capsys, "--max-new-tokens", "4", "--kv-budget-bytes", str(needed - 1))
    assert code == 1 and refused["error"]["code"] == "H113"
    assert f"needs {needed} bytes" in refused["error"]["message"]


@pytest.mark.parametrize("text", ["-1", "1e6", "lots"])
def test_cli_budget_that_is_not_bytes(capsys, text):
    code, refused = _cli(capsys, "--kv-budget-bytes", text)
    assert code == 2 and refused["error"]["code"] == "H114"
    assert "--kv-budget-bytes" in refused["error"]["message"]


def test_unboundable_package_on_the_cli(capsys):
    with tempfile.TemporaryDirectory() as tmp:
        root = UNBOUNDED_KV.materialise(Path(tmp))
        code = main(["run", str(root), "--tokens", "[[3,1,4]]", "--kv-budget-bytes", "99"])
    assert code == 2
    assert "H114" in capsys.readouterr().err


# ------------------------------------------------------------------ the conformance cases


class IgnoresBudget(ReferenceRuntime):
    """Declares kv_admission but loads every package without its budget."""

    def load(self, package_dir, executor=None, options=None):
        return super().load(package_dir, executor)


class RunsThenRefuses(ReferenceRuntime):
    """Runs part of a turn over the budget (one new token), then refuses it: half-run."""

    def run(self, handle, request):
        try:
            return super().run(handle, request)
        except Refused:
            super().run(handle, {**request, "max_new_tokens": 1})
            raise


class RefusesWithAnotherCode(ReferenceRuntime):
    def run(self, handle, request):
        try:
            return super().run(handle, request)
        except Refused as exc:
            raise Refused("run", exc.message, "H75") from exc

    def load(self, package_dir, executor=None, options=None):
        try:
            return super().load(package_dir, executor, options)
        except Refused as exc:
            raise Refused("load", exc.message, "H75") from exc


class CountsOneNewTokenMore(ReferenceRuntime):
    """Counts one new token even for max_new_tokens 0 (refusing what fits exactly)."""

    def run(self, handle, request):
        if request.get("max_new_tokens") == 0 and request.get("prompt"):
            width = max(len(row) for row in request["prompt"])
            budget = getattr(handle, "kv_budget_bytes", None)
            if budget is not None and 8 * len(request["prompt"]) * (width + 1) > budget:
                raise Refused("run", "over the budget", "H113")
        return super().run(handle, request)


class RefusesAZeroBudget(ReferenceRuntime):
    """Takes a budget of 0 bytes for no budget at all, and refuses it."""

    def load(self, package_dir, executor=None, options=None):
        if (options or {}).get("kv_budget_bytes") == 0:
            raise Refused("load", "a budget of 0 bytes", "H114")
        return super().load(package_dir, executor, options)


class IgnoresBoundSymbols(ReferenceRuntime):
    """Sizes a KV axis an input binds as 1, whatever the request binds it to (and so takes a
    budget for a package whose KV has an axis no input bounds)."""

    def load(self, package_dir, executor=None, options=None):
        budget = (options or {}).get("kv_budget_bytes")
        if not isinstance(budget, int) or budget < 0:
            return super().load(package_dir, executor, options)
        engine = super().load(package_dir, executor)  # loaded without the budget, then given it
        estimator = engine._kv
        if any("symbol" not in problem for problem in estimator.problems):
            raise Refused("load", "; ".join(estimator.problems), "H114")
        engine.kv_budget_bytes = budget
        for i, cell in enumerate(estimator.cells):
            dims = tuple(
                1 if isinstance(d, str) and n not in (cell.sequence_axis, cell.request_axis)
                else d
                for n, d in enumerate(cell.dims)
            )  # fmt: skip
            estimator.cells[i] = dataclasses.replace(cell, dims=dims)
        return engine


ZERO_BUDGET = "kv_admission/counting_loop/zero_budget_without_kv"
# the admission suite's own cases (continuous batching under a budget is judged with batching)
ADMISSION_CASES = sorted(
    c.id
    for c in catalogue()
    if "kv_admission" in c.features
    and "continuous_batching" not in c.id
    and c.suite not in ("batch_counters", "batch_trace")
)


def certified(runtime, monkeypatch) -> dict:
    """Case id -> (status, got) of ``runtime`` certified on the kv_admission cases."""
    import conformance.certify as module

    monkeypatch.setattr(module, "open_runtime", lambda spec: runtime)
    by_id = {c.id: c for c in catalogue()}
    _, results = certify(
        "python:x:y", {}, 2, None, progress=False, cases=[by_id[i] for i in ADMISSION_CASES]
    )
    return {r.case.id: (r.status, r.got) for r in results}


def test_the_cases_are_catalogued():
    assert ADMISSION_CASES == [
        "fail_closed/kv_admission/kv_cell_without_shape",
        "fail_closed/kv_admission/kv_growth_no_input_bounds",
        "fail_closed/kv_admission/negative_budget",
        "fail_closed/kv_admission/non_integer_budget",
        "fail_closed/kv_admission/unbounded_kv",
        "kv_admission/arithmetic_decoder/fits_and_overflows",
        "kv_admission/arithmetic_decoder/kv_axis_bound_by_an_input",
        "kv_admission/arithmetic_decoder/request_axis_no_input_declares",
        "kv_admission/counting_loop/zero_budget_without_kv",
        "kv_admission/genai_decoder_gqa/session_overflow",
        "kv_admission/speculative_block/verification_capacity",
        "kv_admission/speculative_lowered/verification_capacity",
    ]


@pytest.mark.parametrize("executor", ["ort", "native"])
def test_the_reference_runtime_passes_the_cases(executor, monkeypatch):
    results = certified(ReferenceRuntime(executor, compiled=executor == "ort"), monkeypatch)
    assert {status for status, _ in results.values()} == {"passed"}, results


@pytest.mark.parametrize(
    "runtime, failing",
    [
        # A package without KV fits a budget of 0 bytes whatever the runtime does with it.
        (IgnoresBudget(), set(ADMISSION_CASES) - {ZERO_BUDGET}),
        (
            RunsThenRefuses(),
            {
                "kv_admission/genai_decoder_gqa/session_overflow",
                # the part it runs of two end ids' request cannot run on the graph's cache
                "kv_admission/arithmetic_decoder/kv_axis_bound_by_an_input",
            },
        ),
        (RefusesWithAnotherCode(), set(ADMISSION_CASES) - {ZERO_BUDGET}),
        (CountsOneNewTokenMore(), {"kv_admission/arithmetic_decoder/fits_and_overflows"}),
        (RefusesAZeroBudget(), {ZERO_BUDGET}),
        (
            IgnoresBoundSymbols(),
            {
                "kv_admission/arithmetic_decoder/kv_axis_bound_by_an_input",
                "fail_closed/kv_admission/unbounded_kv",
            },
        ),
    ],
    ids=lambda x: type(x).__name__ if not isinstance(x, set) else "",
)
def test_wrong_runtimes_fail_the_cases(runtime, failing, monkeypatch):
    results = certified(runtime, monkeypatch)
    failed = {case for case, (status, _) in results.items() if status == "failed"}
    assert failed == failing, results


def test_session_case_admits_what_the_session_turns_golden_holds():
    """The session case's admitted turns are the golden of the same three turns unbudgeted."""
    (case,) = [c for c in kv_admission.CASES if c.id.endswith("session_overflow")]
    runtime = ReferenceRuntime()
    handle = runtime.load(str(package_path(case.package)), options={"kv_budget_bytes": case.budget})
    results = run_requests(runtime, handle, RunCase(case.id, case.package, case.requests))
    admitted = [r for i, r in enumerate(results) if i not in case.refused]
    assert [results[i] for i in case.refused] == [{"error": "H113"}] * len(case.refused)
    golden = goldens.load("genai_decoder_gqa/session_turns")
    assert golden is not None and not goldens.differences(golden, admitted)


@pytest.mark.parametrize("package", ["speculative_block", "speculative_lowered"])
def test_speculative_estimate_bounds_the_verification_slots(package):
    """A speculative step feeds K + 1 positions to the target before it truncates, and rows
    that commit fewer tokens keep masked slots: the estimate bounds the largest cache each graph
    reads or writes (both caches are held at once), on a ragged batch whose rows accept
    different amounts."""
    engine = Engine.from_dir(package_path(package), kv_budget_bytes=10**9)
    plan = engine._sessions["speculate"].plan
    peaks: dict[str, int] = {}
    for role, name in (("target", plan.target), ("proposer", plan.proposer)):
        ins = {c.model_input for c in plan.cells if c.model == role}
        outs = {c.model_output for c in plan.cells if c.model == role}
        session = engine._sessions[name]
        original = session.run

        def recording(inputs, outputs, original=original, name=name, ins=ins, outs=outs):
            results = original(inputs, outputs)
            read = sum(np.asarray(v).nbytes for k, v in inputs.items() if k in ins)
            written = sum(np.asarray(v).nbytes for k, v in results.items() if k in outs)
            peaks[name] = max(peaks.get(name, 0), read, written)
            return results

        session.run = recording
    prompts = [[1, 2, 3, 4, 5], [7, 3]]
    needed = engine.kv_bytes_needed(prompts, max_new_tokens=12)
    engine.run(prompts, max_new_tokens=12, stop_on_eos=False)
    assert engine.counters["speculative"]["rollbacks"] > 0
    assert len(peaks) == 2 and sum(peaks.values()) <= needed
    # the plain formula (one position per token of the request) would not bound it
    rows, positions = 2, 5 + 12
    plain = sum(
        c.itemsize
        * int(
            np.prod(
                [
                    rows if i == 0 else positions if i == c.sequence_axis else d
                    for i, d in enumerate(c.dims)
                ]
            )
        )  # fmt: skip
        for c in engine._kv.cells
    )
    assert sum(peaks.values()) > plain
