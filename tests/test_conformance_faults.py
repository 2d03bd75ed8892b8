"""The suite has teeth: certification of the reference runtime with one deliberate fault
injected at a time (from outside the runtime: tests/runtime_faults.py) must fail, with a case
that explains why.

Each fault is certified here only on the run cases of the package that catches it (fast);
``python tools/fault_kill_count.py`` certifies every fault on every run case and reports the
kill count."""

from __future__ import annotations

import pytest

from conformance.cases.catalogue import RUN_SUITES, catalogue
from conformance.certify import certify
from tests.runtime_faults import FAULTS, injected

# fault -> (runtime spec, a case that must fail because of it)
CAUGHT_BY = {
    "emit_off_by_one": ("reference:plain", "golden/counting_loop/rows_finish_at_different_times"),
    "skip_inactive_merge": (
        "reference:plain",
        "golden/counting_loop/rows_finish_at_different_times",
    ),
    "predicate_after_body": ("reference:plain", "golden/counting_loop/predicate_false_at_entry"),
    "wrong_default_broadcast": (
        "reference:plain",
        "golden/counting_loop/rows_finish_at_different_times",
    ),
    "session_not_saved": ("reference:plain", "golden/session_counter/three_runs"),
    "native_falls_back_to_ort": (
        "reference:native:plain",
        "executor/counting_loop/rows_finish_at_different_times",
    ),
}


def run_cases(package: str | None = None):
    """The cases that run requests (of one fixture package, when given): the run suites and the
    run-time cases of fail_closed."""
    return [
        c
        for c in catalogue()
        if c.run is not None and (package is None or c.run.package == package)
    ]


def test_run_cases_are_the_run_suites_and_run_time_refusals():
    suites = {c.suite for c in run_cases()}
    assert suites == {*RUN_SUITES, "fail_closed"}
    assert all(c.id.startswith("fail_closed/run/") for c in run_cases() if c.suite == "fail_closed")


def failures(spec: str, package: str | None = None, fault: str | None = None) -> dict[str, str]:
    with injected(fault):
        _, results = certify(spec, {}, 2, None, progress=False, cases=run_cases(package))
    return {r.case.id: r.got for r in results if r.status == "failed"}


def test_every_fault_has_a_catching_case():
    assert set(CAUGHT_BY) == set(FAULTS)
    ids = {c.id for c in run_cases()}
    for fault, (_, case_id) in CAUGHT_BY.items():
        assert case_id in ids, f"{fault}: {case_id} is not in the catalogue"


CATCHING_PACKAGES = sorted({case_id.split("/")[1] for _, case_id in CAUGHT_BY.values()})


@pytest.mark.parametrize("spec", ["reference:plain", "reference:native:plain"])
@pytest.mark.parametrize("package", CATCHING_PACKAGES)
def test_without_a_fault_the_catching_packages_pass(spec, package):
    """The control for the fault tests: the plain interpreter the faults are injected into
    passes. (Every run case matches its golden under both executors and both interpreters in
    test_goldens.py; tools/fault_kill_count.py certifies every run case fault-free first.)"""
    assert failures(spec, package) == {}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_each_injected_fault_fails_certification(fault):
    spec, case_id = CAUGHT_BY[fault]
    failed = failures(spec, package=case_id.split("/")[1], fault=fault)
    assert case_id in failed, f"{fault} was not caught by {case_id}; failures: {sorted(failed)}"


def test_the_plain_interpreter_refuses_every_run_time_fail_closed_case():
    """The run suites are held to their goldens under both interpreters in test_goldens.py;
    here the run-time refusals of fail_closed are certified on the plain interpreter."""
    refusals = [c for c in run_cases() if c.suite == "fail_closed"]
    assert refusals
    _, results = certify("reference:plain", {}, 2, None, progress=False, cases=refusals)
    assert [r.status for r in results] == ["passed"] * len(refusals), [
        (r.case.id, r.got) for r in results if r.status != "passed"
    ]
