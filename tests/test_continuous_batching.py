"""``onnx-genai.continuous-batch@1`` and ``Engine.serve``: each request's tokens equal its solo
run, whatever shares the batch and whenever it was admitted, on both executors; freed slots are
reused; the batch publishes one liveness bit and per-slot ``accepted_len``; every refusal is
coded and happens before anything runs."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixtures import package_path
from reference_runtime import Engine, PackageError
from reference_runtime.errors import RunError, UsageError
from reference_runtime.package.lowering import lower

SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PACKAGES = ["genai_decoder", "genai_decoder_gqa", "model_io_decoder"]


@pytest.fixture(scope="module")
def engines():
    cache = {}

    def get(name, executor="ort", **kwargs):
        key = (name, executor, tuple(sorted(kwargs.items())))
        if key not in cache:
            cache[key] = Engine.from_dir(package_path(name), executor=executor, **kwargs)
        return cache[key]

    return get


def solo(engine, request) -> tuple[list[int], str]:
    keywords = {k: v for k, v in request.items() if k not in ("arrival", "prompt")}
    result = engine.run(prompt=[request["prompt"]], **keywords)
    return result.tokens[0], result.finish_reasons[0]


def served(engine, requests, **kwargs) -> dict:
    return {r.index: r for r in engine.serve(requests, **kwargs)}


REQUEST = st.fixed_dictionaries(
    {
        "prompt": st.lists(st.integers(4, 60), min_size=1, max_size=7),
        "max_new_tokens": st.sampled_from([1, 3, 5]),
        "arrival": st.integers(0, 6),
    },
    optional={
        "seed": st.integers(0, 5),
        "temperature": st.sampled_from([0.7, 1.3]),
        "stop_on_eos": st.booleans(),
    },
)


@pytest.mark.parametrize("executor", ["ort", "native"])
@pytest.mark.parametrize("name", PACKAGES)
@SETTINGS
@given(requests=st.lists(REQUEST, min_size=1, max_size=6), slots=st.integers(1, 4))
def test_each_request_equals_its_solo_run(engines, name, executor, requests, slots):
    engine = engines(name, executor)
    results = served(engine, requests, slots=slots)
    assert sorted(results) == list(range(len(requests)))
    for i, request in enumerate(requests):
        got = results[i].result
        assert (got.tokens[0], got.finish_reasons[0]) == solo(engine, request), (i, request)
        assert results[i].admitted >= request.get("arrival", 0)
        assert results[i].finished >= results[i].admitted


def test_rows_of_different_lengths_share_one_body(engines):
    engine = engines("genai_decoder")
    requests = [
        {"prompt": [5, 6, 7, 8, 9, 10, 11], "max_new_tokens": 6},
        {"prompt": [12], "max_new_tokens": 6, "arrival": 2},
        {"prompt": [13, 14, 15], "max_new_tokens": 6, "arrival": 3},
    ]
    before = engine.counters["batching"]
    trace = []
    results = served(engine, requests, slots=3, trace=trace)
    after = engine.counters["batching"]
    for i, request in enumerate(requests):
        assert results[i].result.tokens[0] == solo(engine, request)[0]
    # steps 3..5 ran the three requests in one body each: the batch shared the decoder
    shared = [t for t in trace if sum(s is not None for s in t.slots) == 3]
    assert shared and all(t.bodies == 1 for t in shared)
    # one row per token each request generated (a row that stops on an end token leaves)
    generated = sum(len(results[i].result.tokens[0]) for i in range(3))
    assert after["rows"] - before["rows"] == generated
    assert after["steps"] - before["steps"] == len(trace)


def test_a_freed_slot_is_reused(engines):
    engine = engines("genai_decoder")
    before = engine.counters["batching"]
    requests = [
        {"prompt": [5, 6], "max_new_tokens": 2},
        {"prompt": [7, 8, 9], "max_new_tokens": 3, "arrival": 0},
        {"prompt": [10], "max_new_tokens": 2, "arrival": 9},  # arrives into an empty batch
    ]
    results = served(engine, requests, slots=1)
    after = engine.counters["batching"]
    assert after["admitted"] - before["admitted"] == 3
    assert after["slots_reused"] - before["slots_reused"] == 2
    assert [results[i].slot for i in range(3)] == [0, 0, 0]
    assert results[1].admitted == results[0].finished + 1
    assert results[2].admitted == 9  # the clock moved on to its arrival


def test_liveness_bit_and_accepted_len(engines):
    engine = engines("genai_decoder")
    trace = []
    requests = [
        {"prompt": [5, 6, 7], "max_new_tokens": 4},
        {"prompt": [8], "max_new_tokens": 2, "arrival": 1},
    ]
    list(engine.serve(requests, slots=3, trace=trace))
    assert [t.step for t in trace] == list(range(len(trace)))
    assert [t.live for t in trace] == [True] * (len(trace) - 1) + [False]
    for t in trace:
        for slot, index in enumerate(t.slots):
            assert t.accepted_len[slot] == (0 if index is None else 1)
    assert trace[0].slots == [0, None, None]
    assert trace[1].slots == [0, 1, None]
    assert list(trace[-1].accepted_len) == [1, 0, 0]


def test_the_queue_keeps_the_liveness_bit_on(engines):
    engine = engines("genai_decoder")
    trace = []
    requests = [{"prompt": [5], "max_new_tokens": 1}, {"prompt": [6], "max_new_tokens": 1}]
    list(engine.serve(requests, slots=1, trace=trace))
    assert [t.live for t in trace] == [True, False]  # request 1 waited for the slot


def test_requests_with_different_bounds_share_a_body(engines):
    engine = engines("genai_decoder")
    requests = [
        {"prompt": [5, 6], "max_new_tokens": 3, "stop_on_eos": False},
        {"prompt": [7, 8, 9], "max_new_tokens": 6, "stop_on_eos": False},
        {"prompt": [10], "max_new_tokens": 1, "stop_on_eos": False},
    ]
    trace = []
    results = served(engine, requests, slots=3, trace=trace)
    assert all(t.bodies == 1 for t in trace)  # the policy takes one bound per row
    assert [len(results[i].result.tokens[0]) for i in range(3)] == [3, 6, 1]
    for i, request in enumerate(requests):
        assert (results[i].result.tokens[0], results[i].result.finish_reasons[0]) == solo(
            engine, request
        )


def test_requests_that_cannot_share_a_body_run_in_groups(engines):
    engine = engines("genai_decoder")
    requests = [
        {"prompt": [5, 6], "max_new_tokens": 3},
        {"prompt": [7, 8], "max_new_tokens": 5},
        {"prompt": [9, 10], "max_new_tokens": 3, "stop_on_eos": False},  # another stop rule
    ]
    trace = []
    results = served(engine, requests, slots=3, trace=trace)
    assert trace[0].bodies == 2
    for i, request in enumerate(requests):
        assert results[i].result.tokens[0] == solo(engine, request)[0]


@pytest.mark.parametrize("shape", [["batch"], [1]])
def test_each_row_reads_its_own_iteration(tmp_path, shape):
    from conformance.cases.batching import _LOOP, _ROWS, _WF
    from conformance.cases.mutations import Set, Variant

    contract = {"dtype": "int64", "rank": 1, "shape": shape}
    if shape == ["batch"]:
        contract["batch_layout"] = _ROWS
    numbered = Variant(
        "lowered_decoder",
        (
            Set((*_WF, "manifest", "capabilities", 10), "loop_induction_values"),
            Set((*_LOOP, "iteration"), {"value": "step.index", "contract": contract}),
        ),
        "numbered",
    )
    engine = Engine.from_dir(numbered.materialise(tmp_path))
    requests = [
        {"prompt": [5, 6], "max_new_tokens": 4},
        {"prompt": [7, 8, 9], "max_new_tokens": 4},
        {"prompt": [10], "max_new_tokens": 4, "arrival": 2},
    ]
    trace = []
    results = served(engine, requests, slots=3, trace=trace)
    # rows at different iterations share a body only where each has its own number
    assert [t.bodies for t in trace] == ([1] * 6 if shape == ["batch"] else [1, 1, 2, 2, 1, 1])
    for i, request in enumerate(requests):
        assert (results[i].result.tokens[0], results[i].result.finish_reasons[0]) == solo(
            engine, request
        )


def test_results_come_as_requests_finish(engines):
    engine = engines("genai_decoder")
    requests = [
        {"prompt": [5, 6], "max_new_tokens": 6},
        {"prompt": [7, 8], "max_new_tokens": 6, "arrival": 1},
        {"prompt": [9], "max_new_tokens": 6, "arrival": 0},
    ]
    order = [r.index for r in engine.serve(requests, slots=3)]
    assert order == [0, 2, 1]  # 0 and 2 were admitted at step 0, 1 at step 1


def test_plain_run_counts_the_batch_contract(engines):
    engine = engines("genai_decoder")
    before = engine.counters["contract_executions"].get("onnx-genai.continuous-batch", 0)
    result = engine.run(prompt=[[5, 6, 7]], max_new_tokens=4)
    after = engine.counters["contract_executions"]["onnx-genai.continuous-batch"]
    assert after - before == len(result.tokens[0])


def test_kv_budget_applies_per_request_and_bounds_the_batch(engines):
    free = engines("genai_decoder")
    request = {"prompt": [5, 6, 7], "max_new_tokens": 4}
    one = free.kv_bytes_needed(prompt=[request["prompt"]], max_new_tokens=4)
    engine = Engine.from_dir(package_path("genai_decoder"), kv_budget_bytes=one)
    trace = []
    results = served(engine, [request, dict(request, prompt=[8, 9, 10])], slots=2, trace=trace)
    # the budget holds one request's KV: the second waits for the first to leave
    assert all(sum(s is not None for s in t.slots) == 1 for t in trace)
    assert results[1].admitted == results[0].finished + 1
    assert engine.counters["admission"]["admitted"] == 2
    with pytest.raises(RunError) as refused:
        engine.serve([request, {"prompt": [5] * 20, "max_new_tokens": 4}])
    assert refused.value.code == "H113"
    assert "requests[1]" in refused.value.message
    assert engine.counters["admission"]["refused"] == 1


@pytest.mark.parametrize(
    "requests, fragment",
    [
        ({"prompt": [1]}, "list of request mappings"),
        ([[1, 2]], "requests[0] is a list"),
        ([{"prompt": [5], "session_id": "x"}], "no session"),
        ([{"prompt": [5], "arrival": -1}], "requests[0].arrival"),
        ([{"prompt": [5], "arrival": True}], "requests[0].arrival"),
        ([{"prompt": [[5], [6]]}], "carries 2 prompt rows"),
        ([{"prompt": [5]}, {"prompt": [5], "max_new_tokens": "many"}], "requests[1]"),
        ([{"prompt": [5]}, {}], "requests[1]"),
    ],
)
def test_bad_requests_are_refused_before_anything_runs(engines, requests, fragment):
    engine = engines("genai_decoder")
    runs = engine.counters["runs"]
    with pytest.raises(RunError) as refused:
        engine.serve(requests)
    assert refused.value.code == "H75"
    assert fragment in refused.value.message
    assert engine.counters["runs"] == runs


@pytest.mark.parametrize("slots", [0, 9, True, 2.0])
def test_slots_outside_the_contract_are_refused(engines, slots):
    with pytest.raises(UsageError) as refused:
        engines("genai_decoder").serve([{"prompt": [5]}], slots=slots)
    assert refused.value.code == "H124"


def test_a_package_without_the_contract_cannot_be_served(tmp_path):
    root = tmp_path / "pkg"
    source = package_path("model_io_decoder")
    root.mkdir()
    for path in source.iterdir():
        (root / path.name).write_bytes(path.read_bytes())
    metadata = root / "inference_metadata.yaml"
    document = yaml.safe_load(metadata.read_text())
    document["model"]["runtime_configurable"] = {"continuous_batching": False}
    metadata.write_text(yaml.safe_dump(document))
    assert "onnx-genai.continuous-batch" not in lower(root)
    engine = Engine.from_dir(root)
    with pytest.raises(UsageError) as refused:
        engine.serve([{"prompt": [5]}])
    assert refused.value.code == "H124"
    assert engine.run(prompt=[[5, 6]], max_new_tokens=2).tokens  # run still works


def test_lowered_decoders_declare_the_contract():
    document = yaml.safe_load(lower(package_path("genai_decoder")))
    workflow = document["pipeline"]["workflow"]
    assert workflow["components"]["batch"]["contract"] == {
        "id": "onnx-genai.continuous-batch",
        "version": "1",
        "parameters": {"max_slots": 8},
    }
    assert "continuous_batching" in workflow["manifest"]["capabilities"]
    body = workflow["steps"][0]["steps"]
    assert [s.get("component") for s in body] == ["policy", None, "decoder", "batch"]


def test_capability_is_supported():
    from reference_runtime.support import REFERENCE_SUPPORT

    assert "continuous_batching" in REFERENCE_SUPPORT.capabilities
    assert "onnx-genai.continuous-batch@1" in REFERENCE_SUPPORT.binding_contracts


def test_served_result_json_is_plain(engines):
    from reference_runtime.cli import _served_json

    engine = engines("genai_decoder")
    (only,) = engine.serve([{"prompt": [5, 6], "max_new_tokens": 2, "arrival": 3}])
    report = json.loads(json.dumps(_served_json(only)))
    assert report["arrival"] == 3 and report["admitted"] == 3 and report["slot"] == 0
    assert report["tokens"] == solo(engine, {"prompt": [5, 6], "max_new_tokens": 2})[0]
    assert isinstance(np.asarray(report["tokens"]), np.ndarray)


def test_package_error_for_a_misplaced_batch_component(tmp_path):
    root = tmp_path / "pkg"
    source = package_path("lowered_decoder")
    root.mkdir()
    for path in source.iterdir():
        (root / path.name).write_bytes(path.read_bytes())
    metadata = root / "inference_metadata.yaml"
    document = yaml.safe_load(metadata.read_text())
    loop = document["pipeline"]["workflow"]["steps"][0]
    loop["setup"].append(loop["steps"].pop())  # into the setup, where no body batches it
    loop["setup"][-1]["inputs"] = {
        "active": "package.active",
        "next_active": "package.active",
        "accepted": "package.one_row",
    }
    metadata.write_text(yaml.safe_dump(document))
    with pytest.raises(PackageError) as refused:
        Engine.from_dir(root)
    assert "C120" in refused.value.codes


# ------------------------------------------------------------------ the conformance cases


def _case(case_id):
    from conformance.cases.catalogue import batching_catalogue

    return next(c for c in batching_catalogue() if c.id == case_id)


class _Wrong:
    """The reference runtime with its served results altered by ``alter``."""

    def __init__(self, alter):
        from conformance.runtimes.reference import ReferenceRuntime

        self.inner = ReferenceRuntime()
        self.alter = alter

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def serve(self, handle, requests, slots):
        return self.alter(self.inner.serve(handle, requests, slots))


def _judge(case_id, runtime, tmp_path):
    case = _case(case_id)
    return case.judge(runtime, case.build(tmp_path))


def test_the_served_case_passes_the_reference(tmp_path):
    from conformance.runtimes.reference import ReferenceRuntime

    outcome = _judge(
        "continuous_batching/genai_decoder/staggered_ragged", ReferenceRuntime(), tmp_path
    )
    assert outcome.passed, outcome.got


def _swap_tokens(served):
    served = [dict(s) for s in served]
    served[0]["tokens"], served[1]["tokens"] = served[1]["tokens"], served[0]["tokens"]
    return served


def _one_slot(served):
    return [{**s, "slot": 0} for s in served]


def _early(served):
    return [{**s, "admitted": 0} for s in served]


def _lost(served):
    return served[1:]


@pytest.mark.parametrize("alter", [_swap_tokens, _one_slot, _early, _lost])
def test_the_served_case_fails_a_wrong_schedule_or_wrong_tokens(alter, tmp_path):
    outcome = _judge("continuous_batching/genai_decoder/staggered_ragged", _Wrong(alter), tmp_path)
    assert not outcome.passed and outcome.kind == "mismatch", outcome.got


def test_the_rows_case_fails_tokens_that_are_not_the_solo_run(tmp_path):
    outcome = _judge(
        "rows/continuous_batching/genai_decoder/mixed_requests", _Wrong(_swap_tokens), tmp_path
    )
    assert not outcome.passed


def _one_more_row(served):
    served = [dict(s) for s in served]
    outputs = dict(served[0]["outputs"])
    outputs["continuing"] = outputs["continuing"] + outputs["continuing"][:1]
    served[0]["outputs"] = outputs
    return served


def _shifted_pair(served):
    served = [dict(s) for s in served]
    served[-1]["outputs"] = {**served[-1]["outputs"], "pairs": served[-1]["outputs"]["pairs"] + 1}
    return served


def _no_outputs(served):
    return [{k: v for k, v in s.items() if k != "outputs"} for s in served]


def _no_events(served):
    return [{**s, "events": {"extra": [np.zeros(1)]}} for s in served]


@pytest.mark.parametrize(
    "case, alter, fragment",
    [
        ("nested_rows_stop_apart", _one_more_row, "output 'continuing' differs"),
        ("expanded_cell", _shifted_pair, "output 'pairs' differs"),
        ("expanded_cell", _no_outputs, "carries no outputs"),
        ("expanded_cell", _no_events, "event outputs ['extra']"),
    ],
)
def test_the_rows_case_fails_outputs_that_are_not_the_solo_run(case, alter, fragment, tmp_path):
    outcome = _judge(f"rows/continuous_batching/lowered_decoder/{case}", _Wrong(alter), tmp_path)
    assert not outcome.passed and fragment in outcome.got, outcome.got


def test_the_determinism_case_fails_outputs_that_differ_between_serves(tmp_path):
    calls = []

    def second_differs(served):
        calls.append(1)
        return _shifted_pair(served) if len(calls) == 2 else served

    outcome = _judge(
        "determinism/continuous_batching/lowered_decoder/expanded_cell",
        _Wrong(second_differs),
        tmp_path,
    )
    assert not outcome.passed and "output 'pairs' differs" in outcome.got, outcome.got


def test_served_cases_need_the_feature():
    from conformance.cases.catalogue import batching_catalogue

    cases = batching_catalogue()
    assert cases and all("continuous_batching" in c.features for c in cases)
    assert {c.suite for c in cases} == {
        "continuous_batching", "determinism", "rows", "parity", "fail_closed", "batch_counters",
        "batch_trace",
    }  # fmt: skip
    assert all("batch_counters" in c.features for c in cases if c.suite == "batch_counters")
    assert {c.rule for c in cases if c.suite == "fail_closed"} == {"H124", "H75", "D85", "E57"}


class _Serves:
    """The reference runtime serving whatever it is asked, without refusing."""

    def __init__(self):
        from conformance.runtimes.reference import ReferenceRuntime

        self.inner = ReferenceRuntime()

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def serve(self, handle, requests, slots):
        return [{"index": 0, "admitted": 0, "finished": 0, "slot": 0, "tokens": [1]}]


@pytest.mark.parametrize(
    "name",
    ["not_servable", "no_slots", "fractional_slots", "negative_arrival", "fractional_arrival"],
)
def test_the_refusal_cases_fail_a_runtime_that_serves(name, tmp_path):
    case_id = f"fail_closed/continuous_batching/{name}"
    assert _judge(case_id, _Serves(), tmp_path).kind == "not_refused"
    from conformance.runtimes.reference import ReferenceRuntime

    outcome = _judge(case_id, ReferenceRuntime(), tmp_path / "again")
    assert outcome.passed, outcome.got


class _Apart:
    """A runtime that serves each request by running it alone (what a serve that runs
    requests apart gives), with ``alter`` applied to what it serves."""

    def __init__(self, alter=None):
        from conformance.runtimes.reference import ReferenceRuntime

        self.inner = ReferenceRuntime()
        self.alter = alter or (lambda served: served)

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def serve(self, handle, requests, slots):
        served = []
        for i, request in enumerate(requests):
            alone = self.inner.run(handle, {k: v for k, v in request.items() if k != "arrival"})
            served.append(
                {
                    "index": i,
                    "tokens": alone["tokens"][0],
                    "finish_reason": alone["finish_reasons"][0],
                    "outputs": alone["outputs"],
                    "events": alone["events"],
                }
            )
        return self.alter(served)


def _first_row_for_all(served):
    """Every request publishes the first request's row (one row cut for each from the rows
    the shared body made: row 1 of four is still the first request's)."""
    return [{**s, "outputs": {**s["outputs"], "repeated": served[0]["outputs"]["repeated"]}}
            for s in served]  # fmt: skip


class _RefusesOtherwise:
    def __init__(self, code):
        from conformance.runtimes.reference import ReferenceRuntime

        self.inner, self.code = ReferenceRuntime(), code

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def serve(self, handle, requests, slots):
        from conformance.protocol import Refused

        raise Refused("run", "refused for another reason", self.code)


@pytest.mark.parametrize("name", ["repeated_published", "repeated_carried", "scalar_published"])
def test_a_body_value_without_a_row_per_request_is_refused_or_run_apart(name, tmp_path):
    case_id = f"fail_closed/continuous_batching/{name}"
    from conformance.runtimes.reference import ReferenceRuntime

    outcome = _judge(case_id, ReferenceRuntime(), tmp_path / "reference")
    assert outcome.passed and outcome.got.startswith("refused"), outcome.got
    outcome = _judge(case_id, _Apart(), tmp_path / "apart")
    assert outcome.passed and "served apart" in outcome.got, outcome.got
    outcome = _judge(case_id, _RefusesOtherwise("H84"), tmp_path / "other")
    assert not outcome.passed and outcome.kind == "wrong_code", outcome.got


@pytest.mark.parametrize("name", ["repeated_published", "repeated_carried"])
def test_a_serve_that_cuts_a_row_each_anyway_fails(name, tmp_path):
    outcome = _judge(
        f"fail_closed/continuous_batching/{name}", _Apart(_first_row_for_all), tmp_path
    )
    assert not outcome.passed and "output 'repeated' differs" in outcome.got, outcome.got


def test_the_reference_refuses_a_body_value_without_a_row_per_request(tmp_path):
    from conformance.cases.batching import REPEATED_PUBLISHED

    engine = Engine.from_dir(REPEATED_PUBLISHED.materialise(tmp_path))
    request = {"prompt": [[5, 6, 7]], "max_new_tokens": 2}
    assert engine.run(**request).outputs["repeated"].tolist() == [3]
    with pytest.raises(RunError) as caught:
        list(engine.serve([request, request], slots=2))
    assert caught.value.code == "D85"
    assert "has 4 rows on the request axis of output 'repeated'" in caught.value.message
    assert "the 2 request(s) sharing this body need 2" in caught.value.message


# ------------------------------------------------------------------ the command line


def _requests_file(tmp_path, lines) -> str:
    path = tmp_path / "requests.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.mark.parametrize("executor", ["ort", "native"])
def test_cli_serve_prints_each_request_as_json_lines(tmp_path, capsys, engines, executor):
    from reference_runtime.cli import main

    requests = [
        {"prompt": [5, 6, 7], "max_new_tokens": 4},
        {"prompt": [8], "max_new_tokens": 3, "arrival": 1},
        {"prompt": "t9 t10", "max_new_tokens": 2, "arrival": 1},
    ]
    path = _requests_file(tmp_path, [json.dumps(r) for r in requests])
    package = str(package_path("genai_decoder"))
    code = main(["serve", package, "--requests", path, "--slots", "2", "--json", "--trace",
                 "--executor", executor])  # fmt: skip
    assert code == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    served, summary = lines[:-1], lines[-1]
    assert sorted(s["index"] for s in served) == [0, 1, 2]
    engine = engines("genai_decoder", executor)
    for s in served:
        request = requests[s["index"]]
        prompt = request["prompt"]
        keywords = {"max_new_tokens": request["max_new_tokens"]}
        alone = engine.run(prompt=prompt if isinstance(prompt, str) else [prompt], **keywords)
        assert s["tokens"] == alone.tokens[0]
        assert s["finish_reason"] == alone.finish_reasons[0]
        assert s["text"] == alone.text[0]
    assert summary["counters"]["batching"]["admitted"] == 3
    assert summary["counters"]["batching"]["slots_reused"] == 1  # request 2 waits for a slot
    assert len(summary["trace"]) == summary["steps"]


def test_cli_serve_human_readable(tmp_path, capsys):
    from reference_runtime.cli import main

    path = _requests_file(tmp_path, ['{"prompt": [5, 6], "max_new_tokens": 2}', ""])
    assert main(["serve", str(package_path("genai_decoder")), "--requests", path]) == 0
    out = capsys.readouterr().out
    assert out.startswith("request 0 (slot 0, arrival 0, admitted at step 0, finished at step 1")
    assert "served 1 request(s) in 2 step(s)" in out


@pytest.mark.parametrize(
    "lines, code, fragment",
    [
        (['{"prompt": [5]}', "not json"], 2, "line 2: not JSON"),
        (["[" * 100_000 + "]" * 100_000], 2, "line 1: not JSON (RecursionError"),
        (['{"prompt": [[' + "9" * 5000 + "]]}"], 2, "line 1: not JSON (ValueError"),
        (['{"prompt": [5]}', '{"prompt": [5], "arrival": -3}'], 1, "requests[1].arrival"),
        (['{"prompt": [5], "session_id": "s"}'], 1, "no session"),
    ],
)
def test_cli_serve_refusals(tmp_path, capsys, lines, code, fragment):
    from reference_runtime.cli import main

    path = _requests_file(tmp_path, lines)
    assert main(["serve", str(package_path("genai_decoder")), "--requests", path]) == code
    captured = capsys.readouterr()
    assert fragment in captured.err
    assert "Traceback" not in captured.err
    assert captured.out == ""  # nothing was served


def test_cli_serve_a_missing_file_is_a_usage_error(tmp_path, capsys):
    from reference_runtime.cli import main

    missing = str(tmp_path / "absent.jsonl")
    assert main(["serve", str(package_path("genai_decoder")), "--requests", missing]) == 2
    assert "cannot be read" in capsys.readouterr().err


def test_counter_problems_read_the_schedule():
    """``batch_counters``: the counters must agree with the served schedule."""
    from conformance.cases import batching

    case = next(c for c in batching.CASES if c.apart is None and len(c.sources) > c.slots)
    # three requests over two slots: 0 in slot 0 for steps 0-2, 1 in slot 1 for steps 1-3,
    # 2 reusing slot 0 for steps 3-4 (4 or 5 steps run the body, advancing 5 to 8 rows)
    spans = [(0, 2, 0), (1, 3, 1), (3, 4, 0)]

    def served(**counts):
        good = {"admitted": 3, "slots_reused": 1, "steps": 5, "bodies": 5, "rows": 7}
        totals = {"batching": {**good, **counts}}
        return [
            {"index": i, "admitted": a, "finished": f, "slot": s,
             "diagnostics": {"counters": totals}}
            for i, (a, f, s) in enumerate(spans)
        ]  # fmt: skip

    assert batching.counter_problems(case, served()) == []
    for wrong in ({"admitted": 2}, {"slots_reused": 0}, {"bodies": 7}, {"steps": 3},
                  {"rows": 12}, {"rows": 4}):  # fmt: skip
        assert batching.counter_problems(case, served(**wrong)), wrong
    bare = [{k: v for k, v in s.items() if k != "diagnostics"} for s in served()]
    assert batching.counter_problems(case, bare) == [
        "a served entry reports no diagnostics.counters.batching"
    ]


def test_trace_problems_read_the_schedule():
    """``batch_trace``: each step's record must agree with the served schedule."""
    from conformance.cases import batching

    case = next(c for c in batching.CASES if c.apart is None and c.slots == 2 and c.accepted_len)
    # 0 in slot 0 for steps 0-2, 1 in slot 1 for steps 1-3, 2 reusing slot 0 for steps 3-4
    spans = [(0, 2, 0), (1, 3, 1), (3, 4, 0)]
    good = [
        {"step": 0, "slots": [0, None], "accepted_len": [1, 0], "live": True, "bodies": 1},
        {"step": 1, "slots": [0, 1], "accepted_len": [1, 1], "live": True, "bodies": 1},
        {"step": 2, "slots": [0, 1], "accepted_len": [1, 1], "live": True, "bodies": 1},
        {"step": 3, "slots": [2, 1], "accepted_len": [1, 1], "live": True, "bodies": 1},
        {"step": 4, "slots": [2, None], "accepted_len": [1, 0], "live": False, "bodies": 1},
    ]

    def served(trace):
        return [
            {"index": i, "admitted": a, "finished": f, "slot": s,
             "diagnostics": {"batch_trace": trace}}
            for i, (a, f, s) in enumerate(spans)
        ]  # fmt: skip

    def edited(step, **fields):
        return [{**r, **fields} if r["step"] == step else r for r in good]

    assert batching.trace_problems(case, served(good)) == []
    wrongs = {
        "a step left out": good[:2] + good[3:],
        "a slot sat out": edited(1, slots=[0, None], accepted_len=[1, 0]),
        "slots swapped": edited(1, slots=[1, 0]),
        "accepted_len of an empty slot": edited(0, accepted_len=[1, 1]),
        "accepted_len of a running slot": edited(2, accepted_len=[0, 1]),
        "liveness off too early": edited(3, live=False),
        "liveness on at the end": edited(4, live=True),
        "two bodies": edited(2, bodies=2),
        "no body": edited(2, bodies=0),
        "an empty step": [*good, {"step": 5, "slots": [None, None], "accepted_len": [0, 0],
                                  "live": False, "bodies": 1}],
        "a record without bodies": [{k: v for k, v in r.items() if k != "bodies"} for r in good],
    }  # fmt: skip
    for what, trace in wrongs.items():
        assert batching.trace_problems(case, served(trace)), what
    bare = [{k: v for k, v in s.items() if k != "diagnostics"} for s in served(good)]
    assert batching.trace_problems(case, bare) == [
        "a served entry reports no diagnostics.batch_trace"
    ]


def test_the_trace_case_passes_the_reference_and_fails_a_dark_liveness_bit(tmp_path):
    from conformance.runtimes.reference import ReferenceRuntime

    case_id = "batch_trace/genai_decoder/staggered_ragged"
    assert _judge(case_id, ReferenceRuntime(), tmp_path / "right").passed

    def dark(served):
        trace = [{**r, "live": False} for r in served[0]["diagnostics"]["batch_trace"]]
        return [{**s, "diagnostics": {**s["diagnostics"], "batch_trace": trace}} for s in served]

    outcome = _judge(case_id, _Wrong(dark), tmp_path / "dark")
    assert not outcome.passed and "liveness bit False" in outcome.got, outcome.got
