"""The suite has teeth: certification of the reference runtime with one deliberate fault
injected at a time (REFERENCE_RUNTIME_FAULT) must fail, with a case that explains why."""

from __future__ import annotations

import pytest

from conformance.cases.catalogue import catalogue
from conformance.certify import certify
from reference_runtime.faults import ENVIRONMENT_VARIABLE, FAULTS

RUN_SUITES = ("golden", "rows", "determinism", "executor")

# fault -> (runtime spec, a case that must fail because of it)
CAUGHT_BY = {
    "emit_off_by_one": ("reference", "golden/counting_loop/rows_finish_at_different_times"),
    "skip_inactive_merge": ("reference", "golden/counting_loop/rows_finish_at_different_times"),
    "predicate_after_body": ("reference", "golden/counting_loop/predicate_false_at_entry"),
    "wrong_default_broadcast": ("reference", "golden/counting_loop/rows_finish_at_different_times"),
    "session_not_saved": ("reference", "golden/session_counter/three_runs"),
    "native_falls_back_to_ort": (
        "reference:native",
        "executor/counting_loop/rows_finish_at_different_times",
    ),
}


def run_cases(package: str | None = None):
    """The run-suite cases (of one fixture package, when given)."""
    return [
        c
        for c in catalogue()
        if c.suite in RUN_SUITES and (package is None or c.id.split("/")[1] == package)
    ]


def failures(spec: str, package: str | None = None) -> dict[str, str]:
    _, results = certify(spec, {}, 2, None, progress=False, cases=run_cases(package))
    return {r.case.id: r.got for r in results if r.status == "failed"}


def test_every_fault_has_a_catching_case():
    assert set(CAUGHT_BY) == set(FAULTS)
    ids = {c.id for c in run_cases()}
    for fault, (_, case_id) in CAUGHT_BY.items():
        assert case_id in ids, f"{fault}: {case_id} is not in the catalogue"


@pytest.mark.parametrize("spec", ["reference", "reference:native"])
def test_without_a_fault_the_run_suites_pass(spec, monkeypatch):
    monkeypatch.delenv(ENVIRONMENT_VARIABLE, raising=False)
    assert failures(spec) == {}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_each_injected_fault_fails_certification(fault, monkeypatch):
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, fault)
    spec, case_id = CAUGHT_BY[fault]
    failed = failures(spec, package=case_id.split("/")[1])
    assert case_id in failed, f"{fault} was not caught by {case_id}; failures: {sorted(failed)}"
