"""Certification itself: reports, transports, expectations, applicability, and teeth."""

from __future__ import annotations

import json
import sys

import pytest

from conformance.cases.catalogue import MIN_CASES, catalogue, package_features
from conformance.cases.load_rules import BASES, MUTATIONS, VARIANTS
from conformance.cases.mutations import load_document
from conformance.certify import (
    Problem,
    ProblemKind,
    Result,
    certify,
    check_run,
    exit_status,
)
from conformance.cli import main
from conformance.protocol import Refused, Unsupported, decode_array, encode_array
from conformance.runtimes import open_runtime
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
        "component_sessions",
        "contract_counters",
        "sampling",
        "kv_admission",
        "continuous_batching",
        "batch_counters",
        "batch_trace",
        "drafted",
    } == {c.suite for c in cases}


def test_features_are_derived_from_the_package():
    assert "speculative" in package_features(load_document("speculative"))
    assert "indexed_scatter" in package_features(load_document("static_cache"))
    kv = package_features(load_document("kv_decoder"))
    assert {"loop", "branch", "per_row_emit", "session_state"} <= set(kv)
    assert "speculative" not in kv
    assert "continuous_batching" in package_features(load_document("lowered_decoder"))
    assert "continuous_batching" not in kv


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
    n = len(BASES) + len(VARIANTS)
    assert report["summary"] == {"passed": n}
    assert report["described"]["name"] == "reference:ort"
    assert {"python", "numpy", "onnx", "onnxruntime"} <= set(report["versions"])
    assert f"| **all cases** | {n} | 0 | 0 | 0 |" in (tmp_path / "report.md").read_text()
    assert f'tests="{n}" failures="0"' in (tmp_path / "junit.xml").read_text()


def test_certify_through_the_json_lines_transport(tmp_path):
    spec = f"exec:{sys.executable} -m conformance.runtimes.example_server"
    header, results = certify(spec, {}, 2, {"acceptance"}, progress=False)
    assert [r.status for r in results] == ["passed"] * (len(BASES) + len(VARIANTS))
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
    assert [p.kind for p in problems] == [ProblemKind.UNKNOWN_EXPECTATION]
    assert "no-such-case" in problems[0].message
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
    code = f"import sys; {blocked}; import conformance.cli, reference_runtime.cli"
    subprocess.run([sys.executable, "-c", code], check=True)


# ------------------------------------------------------------------ problems and the exit status

FATAL = {
    ProblemKind.EMPTY_SUITE_TRIPWIRE,
    ProblemKind.RESULT_COUNT_MISMATCH,
    ProblemKind.UNKNOWN_FEATURE,
    ProblemKind.INTERRUPTED,
}


@pytest.mark.parametrize("kind", list(ProblemKind))
def test_each_problem_kind_decides_the_exit_status(kind):
    problem = Problem(kind, "whatever the message says")
    assert kind.fatal == (kind in FATAL)
    assert exit_status([], [problem], strict=False) == (1 if kind in FATAL else 0)
    assert exit_status([], [problem], strict=True) == 1
    assert exit_status([], [], strict=True) == 0


def test_the_exit_status_reads_the_kind_never_the_message():
    """An expectation whose case id reads like a tripwire stays a strict-only problem."""
    header = {"catalogue_size": MIN_CASES, "selected": 0, "described": {}}
    expectations = {"fail_closed/fewer than 5 results for 3": "a case id like a tripwire"}
    problems = check_run(header, [], expectations, None)
    assert [p.kind for p in problems] == [ProblemKind.UNKNOWN_EXPECTATION]
    assert exit_status([], problems, strict=False) == 0


def test_a_failed_case_fails_the_run_without_problems():
    case = next(c for c in catalogue() if c.suite == "acceptance")
    assert exit_status([Result(case, "failed", "", 0.0)], [], strict=False) == 1
    for status in ("passed", "expected_fail", "not_applicable"):
        assert exit_status([Result(case, status, "", 0.0)], [], strict=False) == 0


def _certify_two_cases(drop_one=False):
    """``certify`` on two acceptance cases whatever the command line selects (optionally losing
    one result), so that the whole-catalogue checks run without running the whole catalogue."""
    import conformance.certify as module

    real = module.certify

    def fake(spec, expectations, jobs, suites, progress=True, cases=None, runtime=None):
        cases = [c for c in catalogue() if c.suite == "acceptance"][:2]
        header, results = real(spec, expectations, jobs, suites, progress=False, cases=cases,
                               runtime=runtime)  # fmt: skip
        return header, results[1:] if drop_one else results

    return fake


@pytest.mark.parametrize(
    "kind, expectations, strict, code",
    [
        (ProblemKind.UNKNOWN_EXPECTATION, {"acceptance/no-such-package": "stale"}, False, 0),
        (ProblemKind.UNKNOWN_EXPECTATION, {"acceptance/no-such-package": "stale"}, True, 1),
        (ProblemKind.STALE_EXPECTATION, {"acceptance/kv_decoder": "fixed since"}, False, 0),
        (ProblemKind.STALE_EXPECTATION, {"acceptance/kv_decoder": "fixed since"}, True, 1),
        (None, {}, True, 0),
    ],
)
def test_expectation_problems_fail_the_run_only_when_strict(
    tmp_path, capsys, kind, expectations, strict, code
):
    path = tmp_path / "expect.yaml"
    path.write_text(json.dumps(expectations))
    args = ["certify", "--runtime", "reference", *SUITE, "--expectations", str(path),
            "--report-dir", str(tmp_path / "r"), *(["--strict"] if strict else [])]  # fmt: skip
    assert main(args) == code
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert [p["kind"] for p in report["problems"]] == ([kind.value] if kind else [])
    if kind:
        (problem,) = report["problems"]
        assert set(problem) == {"kind", "message"}
        assert f"problem: {problem['message']}" in capsys.readouterr().out
        assert (
            f"- `{kind.value}`: {problem['message']}" in (tmp_path / "r" / "report.md").read_text()
        )


def test_a_catalogue_below_its_minimum_always_fails_the_run(tmp_path, monkeypatch):
    import conformance.certify as module
    import conformance.cli as cli

    monkeypatch.setattr(cli, "certify", _certify_two_cases())
    args = ["certify", "--runtime", "reference", "--report-dir", str(tmp_path)]
    assert main(args) == 0  # no --suite: the whole catalogue is checked against its minimum
    monkeypatch.setattr(module, "MIN_CASES", 10**6)
    assert main(args) == 1
    report = json.loads((tmp_path / "report.json").read_text())
    assert [p["kind"] for p in report["problems"]] == ["empty_suite_tripwire"]
    assert report["summary"] == {"passed": 2}
    assert main([*args, "--suite", "acceptance"]) == 0  # a selection is not the catalogue


def test_a_lost_result_always_fails_the_run(tmp_path, monkeypatch):
    import conformance.cli as cli

    monkeypatch.setattr(cli, "certify", _certify_two_cases(drop_one=True))
    assert main(["certify", "--runtime", "reference", *SUITE, "--report-dir", str(tmp_path)]) == 1
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["problems"] == [
        {"kind": "result_count_mismatch", "message": "1 results for 2 selected cases"}
    ]


@pytest.mark.parametrize(
    "spec, name, compiled",
    [
        ("reference", "reference:ort", True),
        ("reference:native", "reference:native", True),
        ("reference:plain", "reference:ort:plain", False),
        ("reference:native:plain", "reference:native:plain", False),
    ],
)
def test_reference_specs_pick_the_executor_and_the_interpreter(spec, name, compiled):
    runtime = open_runtime(spec)
    assert runtime.describe()["name"] == name and runtime.compiled is compiled


@pytest.mark.parametrize("spec", ["reference:plain:native", "reference:fast", "reference:"])
def test_unknown_reference_specs_are_refused(spec):
    with pytest.raises(ValueError, match="unknown runtime"):
        open_runtime(spec)


# ------------------------------------------------------------------ refusals, unsupported, expectations


class RefusesEverything(ReferenceRuntime):
    """Refuses every package, naming a rule that does not exist."""

    def load(self, package_dir, executor=None):
        raise Refused("load", "I refuse", "X00")


def refuses_everything():
    return RefusesEverything()


def test_a_runtime_that_refuses_everything_fails_every_case_it_is_judged_on():
    cases = [*some_fail_closed(4), next(c for c in catalogue() if c.suite == "acceptance")]
    _, results = certify(f"python:{__name__}:refuses_everything", {}, 2, None, progress=False,
                         cases=cases)  # fmt: skip
    kinds = {r.case.id: (r.status, r.kind) for r in results}
    assert [kinds[c.id] for c in cases] == [("failed", "wrong_code")] * 4 + [("failed", "refused")]
    assert all("X00" in r.got for r in results)


def test_a_refusal_passes_when_it_names_the_rule_among_others_unless_codes_are_exact(tmp_path):
    case = some_fail_closed(1)[0]

    where = next(m.location for m in MUTATIONS if case.id == f"fail_closed/{m.ident}")

    class Lists(ReferenceRuntime):
        exact = True

        def describe(self):
            info = super().describe()
            if not self.exact:
                info["features"].remove("exact_rule_codes")
            return info

        def load(self, package_dir, executor=None):
            raise Refused("load", "several rules", f"Z99, {case.rule}",
                          [("Z99", "<document>"), (case.rule, where)])  # fmt: skip

    root = case.build(tmp_path)
    outcome = case.judge(Lists(), root)
    assert (outcome.passed, outcome.kind) == (False, "extra_codes"), outcome.got
    Lists.exact = False
    outcome = case.judge(Lists(), root)
    assert outcome.passed, outcome.got


class NoCodes(ReferenceRuntime):
    """An honest runtime that does not name rules: it does not declare ``rule_codes``."""

    def describe(self):
        info = super().describe()
        info["features"] = [f for f in info["features"] if f != "rule_codes"]
        return info


def no_codes():
    return NoCodes()


def test_fail_closed_cases_need_rule_codes():
    _, results = certify(f"python:{__name__}:no_codes", {}, 2, None, progress=False,
                         cases=some_fail_closed(3))  # fmt: skip
    assert {(r.status, r.reason) for r in results} == {
        ("not_applicable", "runtime lacks rule_codes")
    }


class AnswersUnsupported(ReferenceRuntime):
    """Answers "unsupported" for every package, naming ``feature``, and declares ``declared``."""

    feature, declared = "branch", True

    def describe(self):
        info = super().describe()
        info["features"] = [f for f in info["features"] if f != "branch" or self.declared]
        return info

    def load(self, package_dir, executor=None):
        raise Unsupported("load", self.feature, "no branches here")


@pytest.mark.parametrize(
    "feature, declared, status, kind",
    [
        ("branch", True, "failed", "unsupported"),  # declared, then answered unsupported
        ("branch", False, "not_applicable", None),  # honest: not declared
        ("teleportation", False, "failed", "unsupported"),  # not a feature of the protocol
    ],
)
def test_unsupported_is_not_applicable_only_for_an_undeclared_feature(
    feature, declared, status, kind, monkeypatch
):
    monkeypatch.setattr(AnswersUnsupported, "feature", feature)
    monkeypatch.setattr(AnswersUnsupported, "declared", declared)
    case = next(c for c in catalogue() if c.id == "acceptance/lora")
    assert "branch" not in case.features
    from conformance.certify import judge

    runtime = AnswersUnsupported()
    result = judge(runtime, case, set(runtime.describe()["features"]))
    assert (result.status, result.kind) == (status, kind), result.got
    if status == "not_applicable":
        assert result.reason == "runtime answered unsupported: branch"


def test_unsupported_travels_through_the_json_lines_transport():
    import io

    from conformance.runtimes.example_server import serve

    stdin = io.StringIO(json.dumps({"id": 1, "method": "load", "params": {"package": "x"}}))
    stdout = io.StringIO()
    runtime = AnswersUnsupported()
    serve(runtime, stdin, stdout)
    error = json.loads(stdout.getvalue())["error"]
    assert error == {"stage": "load", "unsupported": "branch", "message": "no branches here"}


@pytest.mark.parametrize(
    "entry, status",
    [
        ("known gap", "expected_fail"),
        ({"reason": "known gap", "kind": "not_refused"}, "expected_fail"),
        ({"reason": "known gap", "match": "without refusal"}, "expected_fail"),
        ({"reason": "known gap", "kind": "wrong_code"}, "failed"),  # it fails another way
        ({"reason": "known gap", "match": "crashed"}, "failed"),
    ],
)
def test_expectations_may_pin_the_failure(entry, status):
    case = some_fail_closed(1)[0]
    _, (result,) = certify(f"python:{__name__}:never_refuses", {case.id: entry}, 1, None,
                           progress=False, cases=[case])  # fmt: skip
    assert result.status == status
    if status == "failed":
        assert "but failed otherwise" in result.reason


@pytest.mark.parametrize(
    "document, message",
    [
        (["a list"], "maps case ids"),
        ({"x": {"kind": "mismatch"}}, "give a reason"),
        ({"x": {"reason": "r", "kind": "wobbly"}}, "is not one of"),
        ({"x": {"reason": "r", "match": "("}}, "match"),
        ({"x": {"reason": "r", "because": "r"}}, "unknown key"),
    ],
)
def test_malformed_expectations_are_refused_in_one_line(document, message, tmp_path, capsys):
    path = tmp_path / "expect.yaml"
    path.write_text(json.dumps(document))
    code = main(["certify", "--runtime", "reference", "--suite", "acceptance",
                 "--expectations", str(path), "--report-dir", str(tmp_path)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err


class DeclaresLowering(ReferenceRuntime):
    def describe(self):
        info = super().describe()
        info["features"] = [*info["features"], "lowering"]
        return info


def declares_lowering():
    return DeclaresLowering()


def test_a_feature_outside_the_protocol_is_a_fatal_problem(tmp_path):
    spec = f"python:{__name__}:declares_lowering"
    code = main(["certify", "--runtime", spec, "--suite", "acceptance",
                 "--report-dir", str(tmp_path)])  # fmt: skip
    assert code == 1
    problems = json.loads((tmp_path / "report.json").read_text())["problems"]
    assert [p["kind"] for p in problems] == ["unknown_feature"]
    assert "genai_config, model_io and runtime_contracts" in problems[0]["message"]


def test_the_report_gives_a_verdict_per_feature_and_per_suite(tmp_path):
    spec = f"python:{__name__}:no_speculation"
    assert main(["certify", "--runtime", spec, "--suite", "acceptance",
                 "--report-dir", str(tmp_path)]) == 0  # fmt: skip
    report = json.loads((tmp_path / "report.json").read_text())
    features = report["features"]
    assert features["speculative"]["verdict"] == "not_applicable"
    assert not features["speculative"]["declared"]
    assert features["loop"]["verdict"] == "certified" and features["loop"]["passed"] > 0
    assert features["rule_codes"]["verdict"] == "no_case"  # no fail-closed case selected
    assert report["suites"]["acceptance"]["not_applicable"] >= 1
    text = (tmp_path / "report.md").read_text()
    assert "| speculative | no | not applicable |" in text
    assert "## Not applicable" in text and "runtime lacks speculative" in text
    assert "## Slowest cases" in text


def test_the_plain_interpreter_refuses_every_run_time_fail_closed_case():
    """The run suites are held to their goldens under both interpreters in test_goldens.py;
    here the run-time refusals of fail_closed are certified on the plain interpreter."""
    refusals = [c for c in catalogue() if c.suite == "fail_closed" and c.run is not None]
    assert refusals
    _, results = certify("reference:plain", {}, 2, None, progress=False, cases=refusals)
    assert [r.status for r in results] == ["passed"] * len(refusals), [
        (r.case.id, r.got) for r in results if r.status != "passed"
    ]
