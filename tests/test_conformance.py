"""Certification itself: reports, transports, expectations, applicability, and teeth."""

from __future__ import annotations

import json
import sys

import pytest

from conformance.cases.catalogue import MIN_CASES, catalogue, package_features
from conformance.cases.load_rules import BASES
from conformance.cases.mutations import load_document
from conformance.certify import certify, check_run, main
from conformance.protocol import decode_array, encode_array
from conformance.runtimes.reference import ReferenceRuntime

SUITE = ["--suite", "acceptance"]


def some_fail_closed(n=12):
    """A spread of fail-closed cases (one per rule family at least)."""
    cases = [c for c in catalogue() if c.suite == "fail_closed"]
    step = max(1, len(cases) // n)
    return cases[::step][:n]


def test_catalogue_holds_every_mutation_and_base():
    cases = catalogue()
    assert len(cases) >= MIN_CASES
    assert len({c.id for c in cases}) == len(cases)
    assert {
        "acceptance",
        "fail_closed",
        "golden",
        "determinism",
        "rows",
        "executor",
        "parity",
        "fixtures",
    } == {c.suite for c in cases}


def test_features_are_derived_from_the_package():
    assert "speculative" in package_features(load_document("speculative"))
    assert "indexed_scatter" in package_features(load_document("static_cache"))
    kv = package_features(load_document("kv_decoder"))
    assert {"loop", "branch", "per_row_emit", "session_state"} <= set(kv)
    assert "speculative" not in kv


@pytest.mark.parametrize(
    "array",
    [
        __import__("numpy").arange(6, dtype="float32").reshape(2, 3),
        __import__("numpy").array([True, False]),
        __import__("numpy").array([[2**63 - 1]], dtype="int64"),
        __import__("numpy").array([float("nan"), float("inf")], dtype="float16"),
        __import__("numpy").array(7, dtype="int64"),  # rank 0 must stay rank 0
    ],
)
def test_arrays_round_trip_exactly(array):
    import numpy as np

    back = decode_array(json.loads(json.dumps(encode_array(array))))
    assert back.dtype == array.dtype and back.shape == array.shape
    np.testing.assert_array_equal(back, array)


def test_certify_reference_writes_reports(tmp_path, capsys):
    code = main(["certify", "--runtime", "reference", *SUITE, "--report-dir", str(tmp_path)])
    assert code == 0
    report = json.loads((tmp_path / "report.json").read_text())
    n = len(BASES)
    assert report["summary"] == {"passed": n}
    assert report["described"]["name"] == "reference:ort"
    assert {"python", "numpy", "onnx", "onnxruntime"} <= set(report["versions"])
    assert f"| **all cases** | {n} | 0 | 0 | 0 |" in (tmp_path / "report.md").read_text()
    assert f'tests="{n}" failures="0"' in (tmp_path / "junit.xml").read_text()


def test_certify_through_the_json_lines_transport(tmp_path):
    spec = f"exec:{sys.executable} -m conformance.runtimes.example_server"
    header, results = certify(spec, {}, 2, {"acceptance"}, progress=False)
    assert [r.status for r in results] == ["passed"] * len(BASES)
    assert header["described"]["name"] == "reference:ort"


class NeverRefuses(ReferenceRuntime):
    """A runtime that loads anything: certification must fail it."""

    def load(self, package_dir):
        return object()


def never_refuses():
    return NeverRefuses()


def test_a_runtime_that_never_refuses_fails_certification(tmp_path):
    spec = f"python:{__name__}:never_refuses"
    code = main(
        ["certify", "--runtime", spec, "--suite", "fail_closed", "--report-dir", str(tmp_path)]
    )
    assert code == 1
    statuses = {r["status"] for r in json.loads((tmp_path / "report.json").read_text())["cases"]}
    assert statuses == {"failed"}
    report = (tmp_path / "report.md").read_text()
    assert "loaded without refusal" in report and "conformance show fail_closed/" in report


class NoSpeculation(ReferenceRuntime):
    def describe(self):
        info = super().describe()
        info["features"] = [f for f in info["features"] if f != "speculative"]
        return info


def no_speculation():
    return NoSpeculation()


def test_unsupported_features_are_not_applicable_never_passes():
    _, results = certify(f"python:{__name__}:no_speculation", {}, 2, {"acceptance"}, progress=False)
    status = {r.case.id: r.status for r in results}
    assert status["acceptance/speculative"] == "not_applicable"
    assert status["acceptance/kv_decoder"] == "passed"


def test_expectations_mark_failures_and_stale_entries_are_reported(tmp_path):
    spec = f"python:{__name__}:never_refuses"
    cases = some_fail_closed(3)
    failing = cases[0].id
    expectations = {failing: "known gap in this runtime", "fail_closed/no-such-case": "stale"}
    header, results = certify(spec, expectations, 2, None, progress=False, cases=cases)
    statuses = {r.case.id: r.status for r in results}
    assert statuses[failing] == "expected_fail"
    assert [statuses[c.id] for c in cases[1:]] == ["failed", "failed"]
    problems = check_run(header, results, expectations, {"fail_closed"})
    assert any("no-such-case" in p for p in problems)
    path = tmp_path / "expect.yaml"
    path.write_text(f"{failing}: known gap\nfail_closed/no-such-case: stale\n")
    args = ["certify", "--runtime", "reference", "--suite", "acceptance",
            "--expectations", str(path), "--report-dir", str(tmp_path / "r")]  # fmt: skip
    assert main(args) == 0
    assert main([*args, "--strict"]) == 1


def test_certification_needs_no_test_dependency():
    """The README's main command installs the project without its `test` extra."""
    import subprocess

    blocked = "; ".join(f"sys.modules[{m!r}] = None" for m in ("syrupy", "hypothesis", "pytest"))
    code = f"import sys; {blocked}; import conformance.certify, reference_runtime.cli"
    subprocess.run([sys.executable, "-c", code], check=True)
