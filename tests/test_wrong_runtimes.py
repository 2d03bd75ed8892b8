"""The judges have teeth: deliberately wrong runtimes (the reference runtime behind an adapter
that breaks one thing, declaring no ``reference_draws``, so sampled tokens are judged by their
properties only) must each fail certification, on the cases named here."""

from __future__ import annotations

import random

import numpy as np
import pytest

from conformance.cases.catalogue import catalogue
from conformance.certify import certify
from conformance.protocol import SAMPLING_KEYWORDS, Refused
from conformance.runtimes.reference import ReferenceRuntime


class Wrong(ReferenceRuntime):
    """The reference runtime without ``reference_draws``; subclasses break one thing."""

    def describe(self):
        info = super().describe()
        info["features"] = [f for f in info["features"] if f != "reference_draws"]
        return info

    def request(self, request: dict) -> dict:
        return request

    def result(self, result: dict, request: dict) -> dict:
        return result

    def run(self, handle, request):
        request = self.request(dict(request))
        return self.result(super().run(handle, request), request)


class SampledAsGreedy(Wrong):
    """Decodes greedily whatever the request asks."""

    def request(self, request):
        inputs = dict(request.get("inputs") or {})
        if "request.temperature" in inputs:
            inputs["request.temperature"] = np.zeros_like(inputs["request.temperature"])
        return {**request, "greedy": True, "inputs": inputs}


class IgnoresTemperature(Wrong):
    def request(self, request):
        inputs = {k: v for k, v in (request.get("inputs") or {}).items()}
        if "request.temperature" in inputs:
            inputs["request.temperature"] = np.ones_like(inputs["request.temperature"])
        return {**request, "inputs": inputs}


class IgnoresTopK(Wrong):
    def request(self, request):
        inputs = {k: v for k, v in (request.get("inputs") or {}).items()}
        if "request.top_k" in inputs:
            inputs["request.top_k"] = np.zeros_like(inputs["request.top_k"])
        return {**request, "inputs": inputs}


class UnseededDraws(Wrong):
    def request(self, request):
        return {**request, "seed": random.randrange(1 << 30)}


class DropsEndToken(Wrong):
    """A row that stops on an end id does not publish it."""

    def result(self, result, request):
        tokens = result.get("tokens")
        if tokens is not None:
            for row, reason in enumerate(result["finish_reasons"]):
                if reason == "stop" and tokens[row]:
                    tokens[row] = tokens[row][:-1]
                    rows = result["outputs"]["tokens"]
                    rows[row] = rows[row][:, :-1] if rows[row] is not None else None
        return result


class ContextLengthAsLength(Wrong):
    def result(self, result, request):
        reasons = result.get("finish_reasons")
        if reasons is not None:
            result["finish_reasons"] = ["length" if r == "context_length" else r for r in reasons]
        return result


class ForgetsSessions(Wrong):
    """Every request of a session runs in a fresh one."""

    def run(self, handle, request):
        if request.get("session_id") is not None:
            request = {**request, "session_id": handle.create_session()}
        return super().run(handle, request)


class IgnoresOverrides(Wrong):
    """Runs every request as if it carried no component overrides."""

    def request(self, request):
        return {k: v for k, v in request.items() if k != "overrides"}


class KeepsOverrides(Wrong):
    """A request's component overrides stay in force for the later requests of the package."""

    def run(self, handle, request):
        kept = self.__dict__.setdefault("kept", {})
        if request.get("overrides") is not None:
            kept[id(handle)] = request["overrides"]
        elif id(handle) in kept:
            request = {**request, "overrides": kept[id(handle)]}
        return super().run(handle, request)


class OverrideFallsBack(Wrong):
    """Runs the target where an override must be refused."""

    def run(self, handle, request):
        try:
            return super().run(handle, request)
        except Refused as exc:
            if exc.code != "C21":
                raise
            return super().run(handle, {**request, "overrides": None})


class UnsetGreedyIsGreedy(Wrong):
    """Reads a request leaving ``greedy`` unset as greedy, whatever the package's
    ``generation.defaults.do_sample`` says."""

    def request(self, request):
        keywords = any(request.get(k) is not None for k in SAMPLING_KEYWORDS)
        unset = request.get("greedy", True) is None and not keywords
        return {**request, "greedy": True} if unset else request


class UncheckedMinP(Wrong):
    """Clips a sampling keyword into its range instead of refusing it (min_p above 1 as 1)."""

    def request(self, request):
        if isinstance(request.get("min_p"), float) and request["min_p"] > 1:
            return {**request, "min_p": 1.0}
        return request


class RefusesEverything(Wrong):
    def load(self, package_dir, executor=None):
        raise Refused("load", "refused", "A01")


class WrongCode(Wrong):
    """Refuses what must be refused, naming another rule."""

    def load(self, package_dir, executor=None):
        try:
            return super().load(package_dir, executor)
        except Refused as exc:
            other = "A01" if "A01" not in (exc.code or "") else "D27"
            raise Refused("load", exc.message, other) from exc


WRONG = {
    # runtime: a case that must fail
    SampledAsGreedy: "sampling/genai_decoder/seeded_sampling/distribution",
    IgnoresTemperature: "sampling/genai_decoder/seeded_sampling/temperature",
    IgnoresTopK: "sampling/genai_decoder/seeded_sampling/within_filters",
    UnseededDraws: "sampling/genai_decoder/seeded_sampling/reproducible",
    DropsEndToken: "golden/genai_decoder_multi_eos/either_end_id_stops",
    ContextLengthAsLength: "golden/genai_decoder_multi_eos/context_length",
    ForgetsSessions: "golden/genai_decoder_gqa/session_turns",
    IgnoresOverrides: "golden/component_overrides/applied_for_one_request",
    KeepsOverrides: "golden/component_overrides/applied_for_one_request",
    OverrideFallsBack: "fail_closed/run/component_overrides/mismatches_refused",
    UnsetGreedyIsGreedy: "golden/sampling_defaults/package_defaults_sample",
    UncheckedMinP: "fail_closed/run/sampling_keywords/keywords_out_of_range_refused",
    RefusesEverything: "acceptance/kv_decoder",
    WrongCode: "fail_closed/D28-kv_decoder-unknown_input_port",
}


def certified(runtime_class, case_ids) -> dict:
    """Case id -> (status, got) of ``runtime_class`` certified on ``case_ids``."""
    import conformance.certify as module

    by_id = {c.id: c for c in catalogue()}
    spec = f"python:{__name__}:{runtime_class.__name__}"
    original = module.open_runtime
    module.open_runtime = lambda s: runtime_class() if s == spec else original(s)
    try:
        _, results = certify(spec, {}, 2, None, progress=False,
                             cases=[by_id[i] for i in case_ids])  # fmt: skip
    finally:
        module.open_runtime = original
    return {r.case.id: (r.status, r.got) for r in results}


@pytest.mark.parametrize("runtime_class", list(WRONG), ids=lambda c: c.__name__)
def test_each_wrong_runtime_fails_certification(runtime_class):
    case_id = WRONG[runtime_class]
    status, got = certified(runtime_class, [case_id])[case_id]
    assert status == "failed", f"{runtime_class.__name__} passed {case_id}: {got}"


def test_the_honest_baseline_passes_the_same_cases():
    """Without a fault the same adapter passes every case above (the control)."""
    results = certified(Wrong, sorted(set(WRONG.values())))
    assert {status for status, _ in results.values()} == {"passed"}, results
