"""The run-time suites' teeth: events in the protocol and the goldens, run-time refusals in the
fail-closed suite, and executor parity."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from conformance import goldens
from conformance.cases import batching
from conformance.cases.catalogue import catalogue
from conformance.certify import certify
from conformance.protocol import Refused, decode_result, encode_result
from conformance.runtimes.reference import ReferenceRuntime, available_executors
from fixtures.generators import RUN_CASES

EVENTS = "events_and_appends/three_steps"


def cases(*ids: str):
    by_id = {c.id: c for c in catalogue()}
    return [by_id[i] for i in ids]


def statuses(spec: str, ids) -> dict[str, tuple[str, str]]:
    _, results = certify(spec, {}, 2, None, progress=False, cases=cases(*ids))
    return {r.case.id: (r.status, r.got) for r in results}


# ------------------------------------------------------------------ events


def test_events_travel_exactly_through_the_protocol():
    result = {
        "outputs": {"y": np.arange(3, dtype=np.float32)},
        "tokens": None,
        "finish_reasons": None,
        "events": {"latest": [np.array([[1.5, 2.0]], np.float32)] * 2, "step": []},
    }
    back = decode_result(json.loads(json.dumps(encode_result(result))))
    assert sorted(back["events"]) == ["latest", "step"]
    assert back["events"]["step"] == []
    for got in back["events"]["latest"]:
        np.testing.assert_array_equal(got, result["events"]["latest"][0])
        assert got.dtype == np.float32


def test_a_golden_pins_the_events_of_the_event_fixture():
    golden = goldens.load(EVENTS)
    (result,) = golden["results"]
    assert sorted(result["events"]) == ["latest", "progress"]
    assert len(result["events"]["latest"]) == 3


class DropsEvents(ReferenceRuntime):
    def run(self, handle, request):
        return {**super().run(handle, request), "events": {}}


def drops_events():
    return DropsEvents()


def test_a_runtime_that_drops_events_fails_the_golden():
    got = statuses(f"python:{__name__}:drops_events", [f"golden/{EVENTS}"])
    status, text = got[f"golden/{EVENTS}"]
    assert status == "failed" and "event outputs" in text


def test_events_cross_the_json_lines_transport():
    spec = f"exec:{sys.executable} -m conformance.runtimes.example_server"
    ids = [f"golden/{EVENTS}", f"rows/{EVENTS.replace('three_steps', 'batch')}"]
    assert {s for s, _ in statuses(spec, ids).values()} == {"passed"}


# ------------------------------------------------------------------ run-time refusals


def test_every_run_time_refusal_of_a_run_case_is_a_fail_closed_case():
    run_time = {c.id: c for c in catalogue() if c.id.startswith("fail_closed/run/")}
    refusing = {c.id for c in RUN_CASES if any("error" in r for r in goldens.load(c.id)["results"])}
    assert {i.removeprefix("fail_closed/run/") for i in run_time} == refusing
    codes = {c.rule for c in run_time.values()}
    assert {"D44", "E56", "E57", "E58", "G87", "G88", "H75", "H84"} <= codes
    assert all(c.suite == "fail_closed" for c in run_time.values())


class PublishesAnyway(ReferenceRuntime):
    """Turns every run-time refusal into an empty result: publishing where it must refuse."""

    def run(self, handle, request):
        try:
            return super().run(handle, request)
        except Refused:
            return {"outputs": {}, "tokens": None, "finish_reasons": None}


def publishes_anyway():
    return PublishesAnyway()


class WrongCode(ReferenceRuntime):
    def run(self, handle, request):
        try:
            return super().run(handle, request)
        except Refused as exc:
            raise Refused("run", exc.message, "C86") from exc


def wrong_code():
    return WrongCode()


def test_run_time_refusals_must_refuse_with_their_code():
    ids = ["fail_closed/run/scatter_cache/cursor_at_capacity_refused",
           "fail_closed/run/arithmetic_decoder/context_overflow_refused",
           "fail_closed/run/session_counter/unknown_session_refused"]  # fmt: skip
    assert {s for s, _ in statuses("reference", ids).values()} == {"passed"}
    for spec, words in ((f"python:{__name__}:publishes_anyway", "instead of"),
                        (f"python:{__name__}:wrong_code", "refused with C86")):  # fmt: skip
        for status, text in statuses(spec, ids).values():
            assert status == "failed" and words in text, text


# ------------------------------------------------------------------ parity


def test_the_reference_runtime_declares_its_executors():
    info = ReferenceRuntime().describe()
    assert info["executors"][:2] == ["ort", "native"]
    assert set(info["executors"]) == set(available_executors())
    assert "parity" in info["features"]


class NativeDrifts(ReferenceRuntime):
    """The native executor's float outputs drift by 1e-3 (beyond the goldens' tolerance)."""

    def run(self, handle, request):
        result = super().run(handle, request)
        if handle.executor == "native":
            result["outputs"] = {
                k: v + np.float32(1e-3) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v
                for k, v in result["outputs"].items()
            }
        return result


def native_drifts():
    return NativeDrifts()


class OneExecutor(ReferenceRuntime):
    def describe(self):
        info = super().describe()
        del info["executors"]
        return info

    def load(self, package_dir):  # a runtime that knows nothing of executors
        return super().load(package_dir)


def one_executor():
    return OneExecutor()


def test_parity_compares_every_pair_of_executors():
    ids = [f"parity/{EVENTS}", "parity/arithmetic_decoder/greedy_single"]
    got = statuses("reference", ids)
    assert all(s == "passed" and "ort, native agree" in t for s, t in got.values()), got
    drift = statuses(f"python:{__name__}:native_drifts", ids)
    assert drift[ids[0]][0] == "failed" and "ort vs native" in drift[ids[0]][1]
    assert drift[ids[1]][0] == "passed"  # integer outputs only: nothing drifts


def test_parity_with_one_executor_is_judged_against_the_goldens():
    got = statuses(f"python:{__name__}:one_executor", [f"parity/{EVENTS}"])
    status, text = got[f"parity/{EVENTS}"]
    assert status == "passed" and "against the golden" in text


def test_served_outputs_through_the_json_lines_transport():
    spec = f"exec:{sys.executable} -m conformance.runtimes.example_server"
    ids = [
        f"{suite}/continuous_batching/lowered_decoder/{case}"
        for suite in ("rows", "determinism")
        for case in ("expanded_cell", "nested_rows_stop_apart")
    ]
    got = statuses(spec, ids)
    assert {k: v[0] for k, v in got.items()} == dict.fromkeys(ids, "passed"), got


def test_parity_through_the_json_lines_transport():
    spec = f"exec:{sys.executable} -m conformance.runtimes.example_server"
    status, text = statuses(spec, [f"parity/{EVENTS}"])[f"parity/{EVENTS}"]
    assert status == "passed" and "ort, native agree" in text


# ------------------------------------------------------------------ contract counters

SPECULATIVE_COUNTS = "contract_counters/speculative_lowered/greedy_ragged_batch"
GRAPHS_COUNTS = "contract_counters/cell_axes/grows_along_its_axis"


class MiscountsContracts(ReferenceRuntime):
    """Reports ``contract_executions`` through ``edit`` (a dict of counts -> what it reports)."""

    def __init__(self, edit):
        super().__init__()
        self.edit = edit

    def run(self, handle, request):
        result = super().run(handle, request)
        counters = dict(result["diagnostics"]["counters"])
        counters["contract_executions"] = self.edit(dict(counters["contract_executions"]))
        return {**result, "diagnostics": {"counters": counters}}


def counts_none():
    return MiscountsContracts(lambda counts: {})


def counts_a_foreign_contract():
    return MiscountsContracts(lambda counts: {**counts, "onnx-genai.token-policy": 1})


def counts_no_dict():
    return MiscountsContracts(lambda counts: sorted(counts))


def test_contract_counters_pass_the_reference():
    got = statuses("reference", [SPECULATIVE_COUNTS, GRAPHS_COUNTS])
    assert {k: v[0] for k, v in got.items()} == {
        SPECULATIVE_COUNTS: "passed",
        GRAPHS_COUNTS: "passed",
    }


@pytest.mark.parametrize(
    "runtime, case, words",
    [
        ("counts_none", SPECULATIVE_COUNTS, "no execution of onnx-genai."),
        ("counts_a_foreign_contract", GRAPHS_COUNTS, "which no component of the package declares"),
        ("counts_no_dict", GRAPHS_COUNTS, "no contract_executions counter"),
    ],
)
def test_contract_counters_fail_a_runtime_that_miscounts(runtime, case, words):
    status, text = statuses(f"python:{__name__}:{runtime}", [case])[case]
    assert status == "failed" and words in text, text


def test_a_served_result_without_outputs_reaches_the_judge_over_json_lines():
    """The transport passes a served result without ``outputs`` on as it came, so the rows
    suite reports it rather than the transport failing on it."""
    from conformance.runtimes.subprocess import SubprocessRuntime

    runtime = object.__new__(SubprocessRuntime)
    bare = {"index": 0, "admitted": 0, "finished": 1, "slot": 0, "tokens": [5]}
    encoded = {**bare, "outputs": {"y": {"dtype": "int64", "shape": [1], "base64": "BwAAAAAAAAA="}}}
    runtime._call = lambda method, params: {"results": [bare, encoded]}
    first, second = runtime.serve("h1", [], 1)
    assert first == bare
    assert second["outputs"]["y"].tolist() == [7]
    assert batching.output_problems([{"outputs": {}}], [first]) == [
        "request 0: the served result carries no outputs"
    ]
