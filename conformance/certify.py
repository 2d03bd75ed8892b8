"""``conformance certify``: run the catalogue against a runtime and write the reports.

    conformance certify --runtime SPEC [--expectations FILE] [--report-dir DIR] [--strict]
                        [--jobs N] [--suite NAME]...
    conformance show CASE_ID --dest DIR

Exit status 0 iff no required case failed and the run has no fatal :class:`Problem` (with
``--strict``, every problem is fatal: the expectations file must be exact, every entry matching a
case that fails).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from xml.sax.saxutils import escape

import numpy
import onnx
import onnxruntime
import yaml

from .cases.catalogue import MIN_CASES, Case, catalogue, materialise
from .runtimes import open_runtime

STATUSES = ("passed", "failed", "expected_fail", "not_applicable")


@dataclass
class Result:
    case: Case
    status: str
    got: str
    seconds: float
    reason: str = ""  # the expectation's reason for expected failures / why not applicable


class ProblemKind(str, Enum):
    """What can be wrong with a run besides failed cases. A fatal kind fails the run always;
    the others fail it only under ``--strict``."""

    UNKNOWN_EXPECTATION = "unknown_expectation"  # an expectation names no case
    STALE_EXPECTATION = "stale_expectation"  # a case expected to fail passed
    EMPTY_SUITE_TRIPWIRE = "empty_suite_tripwire"  # the catalogue is below its recorded minimum
    RESULT_COUNT_MISMATCH = "result_count_mismatch"  # not one result per selected case

    @property
    def fatal(self) -> bool:
        return self in (ProblemKind.EMPTY_SUITE_TRIPWIRE, ProblemKind.RESULT_COUNT_MISMATCH)


@dataclass(frozen=True)
class Problem:
    kind: ProblemKind
    message: str

    def to_json(self) -> dict:
        return {"kind": self.kind.value, "message": self.message}


def judge(runtime, case: Case, features: set[str]) -> Result:
    missing = [f for f in case.features if f not in features]
    if missing:
        return Result(case, "not_applicable", "", 0.0, f"runtime lacks {', '.join(missing)}")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="conformance-") as tmp:
        try:
            root = case.build(Path(tmp))
            outcome = case.judge(runtime, root)
            status, got = ("passed" if outcome.passed else "failed"), outcome.got
        except Exception as exc:  # a runtime that crashes fails the case, it never passes it
            status = "failed"
            got = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            if os.environ.get("CONFORMANCE_TRACEBACKS"):
                got += "\n" + traceback.format_exc()
    return Result(case, status, got, time.perf_counter() - start)


def certify(spec: str, expectations: dict[str, str], jobs: int, suites: set[str] | None,
            progress=True, cases: list[Case] | None = None) -> tuple[dict, list[Result]]:  # fmt: skip
    """Run ``cases`` (default: the catalogue, or its ``suites``) against the runtime ``spec``."""
    runtime = open_runtime(spec)
    info = runtime.describe()
    features = set(info.get("features", []))
    if cases is None:
        cases = [c for c in catalogue() if suites is None or c.suite in suites]
    results: list[Result] = []
    counts: Counter = Counter()
    tty = sys.stderr.isatty()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(judge, runtime, case, features) for case in cases]
        for i, future in enumerate(futures, 1):
            result = future.result()
            reason = expectations.get(result.case.id)
            if reason is not None and result.status == "failed":
                result.status, result.reason = "expected_fail", reason
            results.append(result)
            counts[result.status] += 1
            if progress and (tty or i == len(cases) or i % max(1, len(cases) // 10) == 0):
                line = f"[{i}/{len(cases)}] " + " ".join(f"{s} {counts[s]}" for s in STATUSES)
                print(("\r" if tty else "") + line, end="" if tty else "\n", file=sys.stderr,
                      flush=True)  # fmt: skip
    if progress and tty:
        print(file=sys.stderr)
    if hasattr(runtime, "shutdown"):
        runtime.shutdown()
    header = {
        "runtime": spec,
        "described": info,
        "protocol_version": 1,
        "versions": {
            "python": platform.python_version(),
            "numpy": numpy.__version__,
            "onnx": onnx.__version__,
            "onnxruntime": onnxruntime.__version__,
            "platform": platform.platform(),
        },
        "catalogue_size": len(catalogue()),
        "selected": len(cases),
    }
    return header, results


def report_json(header: dict, results: list[Result], problems: list[Problem]) -> dict:
    return {
        **header,
        "summary": dict(Counter(r.status for r in results)),
        "problems": [p.to_json() for p in problems],
        "cases": [
            {
                "id": r.case.id,
                "suite": r.case.suite,
                "rule": r.case.rule,
                "features": list(r.case.features),
                "status": r.status,
                "expected": r.case.expected,
                "got": r.got,
                "reason": r.reason,
                "seconds": round(r.seconds, 4),
                "reproduce": f"conformance show {r.case.id} --dest ./case",
            }
            for r in results
        ],
    }


def report_markdown(header: dict, results: list[Result], problems: list[Problem]) -> str:
    lines = [f"# Conformance report: `{header['runtime']}`", ""]
    described = header["described"]
    lines.append(f"- runtime: {described.get('name')} {described.get('version', '')}".rstrip())
    lines.append(f"- declared features: {', '.join(described.get('features', [])) or 'none'}")
    versions = ", ".join(f"{k} {v}" for k, v in header["versions"].items())
    lines.append(f"- versions: {versions}")
    lines.append(f"- cases: {header['selected']} selected of {header['catalogue_size']}")
    lines.append("")
    by_feature: dict[str, Counter] = defaultdict(Counter)
    for r in results:
        for feature in r.case.features:
            by_feature[feature][r.status] += 1
    lines.append("| feature | passed | failed | expected fail | not applicable |")
    lines.append("|---|---|---|---|---|")
    for feature in sorted(by_feature):
        c = by_feature[feature]
        lines.append(f"| {feature} | {c['passed']} | {c['failed']} | {c['expected_fail']} | "
                     f"{c['not_applicable']} |")  # fmt: skip
    total = Counter(r.status for r in results)
    lines.append(f"| **all cases** | {total['passed']} | {total['failed']} | "
                 f"{total['expected_fail']} | {total['not_applicable']} |")  # fmt: skip
    lines.append("")
    if problems:
        lines.append("## Problems with this run")
        lines += [f"- `{p.kind.value}`: {p.message}" for p in problems] + [""]
    failures = [r for r in results if r.status == "failed"]
    lines.append(f"## Failures ({len(failures)})")
    lines.append("")
    for r in failures:
        lines.append(f"### `{r.case.id}`")
        lines.append(f"- expected: {r.case.expected}")
        lines.append(f"- got: {r.got}")
        lines.append(f"- reproduce: `conformance show {r.case.id} --dest ./case`")
        lines.append("")
    return "\n".join(lines) + "\n"


def report_junit(header: dict, results: list[Result]) -> str:
    counts = Counter(r.status for r in results)
    out = [
        '<?xml version="1.0" encoding="utf-8"?>',
        f'<testsuite name="conformance {escape(header["runtime"])}" tests="{len(results)}" '
        f'failures="{counts["failed"]}" skipped="{counts["not_applicable"] + counts["expected_fail"]}">',
    ]
    for r in results:
        name = escape(r.case.id, {'"': "&quot;"})
        out.append(f'  <testcase classname="{r.case.suite}" name="{name}" time="{r.seconds:.4f}">')
        if r.status == "failed":
            message = escape(r.got, {'"': "&quot;"})
            out.append(
                f'    <failure message="{message}">expected: {escape(r.case.expected)}</failure>'
            )
        elif r.status in ("not_applicable", "expected_fail"):
            out.append(
                f'    <skipped message="{escape(r.status + ": " + r.reason, {chr(34): "&quot;"})}"/>'
            )
        out.append("  </testcase>")
    out.append("</testsuite>")
    return "\n".join(out) + "\n"


def check_run(header: dict, results: list[Result], expectations: dict, suites) -> list[Problem]:
    problems = []
    ids = {r.case.id for r in results}
    for case_id in expectations:
        if case_id not in ids:
            problems.append(
                Problem(ProblemKind.UNKNOWN_EXPECTATION, f"expectation {case_id!r} matches no case")
            )
    for r in results:
        if r.case.id in expectations and r.status == "passed":
            problems.append(
                Problem(
                    ProblemKind.STALE_EXPECTATION,
                    f"expectation {r.case.id!r} is listed as failing but passed",
                )
            )
    if suites is None and header["catalogue_size"] < MIN_CASES:
        problems.append(
            Problem(
                ProblemKind.EMPTY_SUITE_TRIPWIRE,
                f"the catalogue holds {header['catalogue_size']} cases, fewer than {MIN_CASES}",
            )
        )
    if len(results) != header["selected"]:
        problems.append(
            Problem(
                ProblemKind.RESULT_COUNT_MISMATCH,
                f"{len(results)} results for {header['selected']} selected cases",
            )
        )
    return problems


def exit_status(results: list[Result], problems: list[Problem], strict: bool) -> int:
    """1 when a case failed, a problem is fatal, or (``strict``) there is any problem; else 0."""
    failed = any(r.status == "failed" for r in results)
    fatal = any(p.kind.fatal or strict for p in problems)
    return 1 if failed or fatal else 0


def cmd_certify(args) -> int:
    expectations = {}
    if args.expectations:
        expectations = yaml.safe_load(Path(args.expectations).read_text()) or {}
    suites = set(args.suite) if args.suite else None
    header, results = certify(args.runtime, expectations, args.jobs, suites)
    problems = check_run(header, results, expectations, suites)
    out = Path(args.report_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(
        json.dumps(report_json(header, results, problems), indent=2) + "\n"
    )
    (out / "report.md").write_text(report_markdown(header, results, problems))
    (out / "junit.xml").write_text(report_junit(header, results))
    total = Counter(r.status for r in results)
    print(f"{'status':<16} cases")
    for status in STATUSES:
        print(f"{status:<16} {total[status]}")
    for problem in problems:
        print(f"problem: {problem.message}")
    print(f"reports: {out / 'report.md'}, {out / 'report.json'}, {out / 'junit.xml'}")
    return exit_status(results, problems, args.strict)


def cmd_show(args) -> int:
    root = materialise(args.case_id, Path(args.dest))
    print(root)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="conformance", description="Certify a runtime of "
                                     "ONNX GenAI workflow packages.")  # fmt: skip
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("certify", help="run the suite against a runtime and write reports")
    p.add_argument("--runtime", required=True,
                   help="reference | reference:native (either with :plain) | "
                        "python:MODULE:FACTORY | exec:COMMAND")  # fmt: skip
    p.add_argument("--expectations", help="YAML {case id: reason} of expected failures")
    p.add_argument("--report-dir", default="conformance-report")
    p.add_argument("--strict", action="store_true", help="stale expectations fail the run")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    p.add_argument("--suite", action="append", help="only these suites (repeatable)")
    p.set_defaults(func=cmd_certify)
    p = sub.add_parser("show", help="write a case's package to a folder")
    p.add_argument("case_id")
    p.add_argument("--dest", required=True)
    p.set_defaults(func=cmd_show)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
