"""Certification: run the catalogue against a runtime and write the reports (the command line
is :mod:`conformance.cli`).

Exit status 0 iff no required case failed and the run has no fatal :class:`Problem` (with
``--strict``, every problem is fatal: the expectations file must be exact, every entry matching a
case that fails).

An expectations file maps case ids to why they are expected to fail: ``{case id: reason}``, or
``{case id: {reason, kind, match}}`` where ``kind`` (one of ``FAILURE_KINDS``) and ``match`` (a
regular expression searched in what the case got) pin the failure: a case that fails another
way is a failure.
"""

from __future__ import annotations

import functools
import os
import platform
import re
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

from .cases.catalogue import FAILURE_KINDS, MIN_CASES, Case, catalogue
from .protocol import FEATURES, PROTOCOL_VERSION, Unsupported
from .runtimes import open_runtime

STATUSES = ("passed", "failed", "expected_fail", "not_applicable")


@dataclass
class Result:
    case: Case
    status: str
    got: str
    seconds: float
    reason: str = ""  # the expectation's reason for expected failures / why not applicable
    kind: str | None = None  # a failure's kind (FAILURE_KINDS)


@dataclass(frozen=True)
class Expectation:
    """Why a case is expected to fail, and optionally how: its failure ``kind`` and a regular
    expression ``match`` searched in what it got."""

    reason: str
    kind: str | None = None
    match: str | None = None

    def covers(self, result: Result) -> bool:
        if self.kind is not None and result.kind != self.kind:
            return False
        return self.match is None or re.search(self.match, result.got) is not None

    def describe(self) -> str:
        pinned = [f"kind {self.kind}"] * bool(self.kind) + [f"matching /{self.match}/"] * bool(
            self.match
        )
        return " and ".join(pinned)


def read_expectations(data) -> dict[str, Expectation]:
    """An expectations document (``{case id: reason | {reason, kind, match}}``), checked."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError("an expectations file maps case ids to reasons")
    out = {}
    for case_id, entry in data.items():
        if isinstance(entry, Expectation):
            out[str(case_id)] = entry
            continue
        if isinstance(entry, str):
            out[str(case_id)] = Expectation(entry)
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("reason"), str):
            raise ValueError(f"expectation {case_id!r}: give a reason, or {{reason, kind, match}}")
        unknown = sorted(set(entry) - {"reason", "kind", "match"})
        if unknown:
            raise ValueError(f"expectation {case_id!r}: unknown key(s) {', '.join(unknown)}")
        kind = entry.get("kind")
        if kind is not None and kind not in FAILURE_KINDS:
            raise ValueError(
                f"expectation {case_id!r}: kind {kind!r} is not one of {', '.join(FAILURE_KINDS)}"
            )
        match = entry.get("match")
        if match is not None:
            try:
                re.compile(match)
            except re.error as exc:
                raise ValueError(f"expectation {case_id!r}: match {match!r}: {exc}") from None
        out[str(case_id)] = Expectation(entry["reason"], kind, match)
    return out


class ProblemKind(str, Enum):
    """What can be wrong with a run besides failed cases. A fatal kind fails the run always;
    the others fail it only under ``--strict``."""

    UNKNOWN_EXPECTATION = "unknown_expectation"  # an expectation names no case
    STALE_EXPECTATION = "stale_expectation"  # a case expected to fail passed
    EMPTY_SUITE_TRIPWIRE = "empty_suite_tripwire"  # the catalogue is below its recorded minimum
    RESULT_COUNT_MISMATCH = "result_count_mismatch"  # not one result per selected case
    UNKNOWN_FEATURE = "unknown_feature"  # the runtime declares a feature the protocol lacks
    INTERRUPTED = "interrupted"  # the run was stopped (Ctrl-C) before every case ran

    @property
    def fatal(self) -> bool:
        return self in (
            ProblemKind.EMPTY_SUITE_TRIPWIRE,
            ProblemKind.RESULT_COUNT_MISMATCH,
            ProblemKind.UNKNOWN_FEATURE,
            ProblemKind.INTERRUPTED,
        )


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
    reason, kind = "", None
    with tempfile.TemporaryDirectory(prefix="conformance-") as tmp:
        try:
            root = case.build(Path(tmp))
            outcome = case.judge(runtime, root)
            status, got, kind = (
                ("passed" if outcome.passed else "failed"),
                outcome.got,
                outcome.kind,
            )
        except Unsupported as exc:
            status, got, reason, kind = _unsupported(exc, features)
        except Exception as exc:  # a runtime that crashes fails the case, it never passes it
            status, kind = "failed", "error"
            got = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            if os.environ.get("CONFORMANCE_TRACEBACKS"):
                got += "\n" + traceback.format_exc()
    return Result(case, status, got, time.perf_counter() - start, reason, kind)


def _unsupported(exc: Unsupported, features: set[str]) -> tuple:
    """(status, got, reason, kind) of a case the runtime answered "unsupported" for: not
    applicable for a feature it does not declare; failed for one it declares, or an unknown one."""
    said = f"unsupported at {exc.stage}: {exc.feature}: {exc.message.splitlines()[0]}"
    if exc.feature not in FEATURES:
        return "failed", f"{said} (not a feature of the protocol)", "", "unsupported"
    if exc.feature in features:
        return "failed", f"{said}, a feature the runtime declares", "", "unsupported"
    return "not_applicable", said, f"runtime answered unsupported: {exc.feature}", None


class Progress:
    """Certification progress on stderr: a bar with elapsed time and ETA on a terminal (tqdm),
    else a line every tenth of the run."""

    def __init__(self, total: int, enabled: bool = True):
        self.total, self.enabled, self.done = total, enabled, 0
        self.counts: Counter = Counter()
        self.started = time.perf_counter()
        self.bar = None
        if enabled and sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="case", file=sys.stderr, dynamic_ncols=True)

    def update(self, result: Result) -> None:
        self.done += 1
        self.counts[result.status] += 1
        if not self.enabled:
            return
        tally = " ".join(f"{s} {self.counts[s]}" for s in STATUSES if self.counts[s])
        if self.bar is not None:
            self.bar.set_postfix_str(tally, refresh=False)
            self.bar.update(1)
        elif self.done == self.total or self.done % max(1, self.total // 10) == 0:
            elapsed = time.perf_counter() - self.started
            eta = elapsed / self.done * (self.total - self.done)
            print(f"[{self.done}/{self.total}] {tally} ({elapsed:.0f} s elapsed, "
                  f"about {eta:.0f} s left)", file=sys.stderr, flush=True)  # fmt: skip

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


@functools.cache
def catalogue_size() -> int:
    """How many cases the catalogue holds (a report's header says it; built once a process:
    building the catalogue takes a second, and a caller may certify many selections)."""
    return len(catalogue())


def certify(spec: str, expectations: dict, jobs: int, suites: set[str] | None,
            progress=True, cases: list[Case] | None = None,
            runtime=None, fail_fast: bool = False) -> tuple[dict, list[Result]]:  # fmt: skip
    """Run ``cases`` (default: the catalogue, or its ``suites``) against the runtime ``spec``
    (``runtime``: the runtime already opened from ``spec``); ``expectations`` as
    :func:`read_expectations` takes them. With ``fail_fast``, the first failed case (in the
    order of ``cases``) ends the run: the cases not yet started are not judged, so the results
    hold fewer entries than the selection (``header["selected"]``).

    Ctrl-C stops the run: cases not yet started are cancelled, and the header says
    ``interrupted`` with the results obtained so far."""
    started = time.perf_counter()
    expectations = read_expectations(expectations)
    runtime = runtime or open_runtime(spec)
    info = runtime.describe()
    features = set(info.get("features", []))
    if cases is None:
        cases = [c for c in catalogue() if suites is None or c.suite in suites]
    results: list[Result] = []
    bar = Progress(len(cases), progress)
    interrupted = False
    pool = ThreadPoolExecutor(max_workers=jobs)
    try:
        futures = [pool.submit(judge, runtime, case, features) for case in cases]
        for future in futures:
            result = future.result()
            expectation = expectations.get(result.case.id)
            if expectation is not None and result.status == "failed":
                if expectation.covers(result):
                    result.status, result.reason = "expected_fail", expectation.reason
                else:
                    result.reason = (
                        f"expected to fail with {expectation.describe()}, but failed otherwise"
                    )
            results.append(result)
            bar.update(result)
            if fail_fast and result.status == "failed":
                break
    except KeyboardInterrupt:
        interrupted = True
    finally:
        # Cases not yet started are cancelled (after a fail-fast stop or an interrupt).
        pool.shutdown(wait=not interrupted, cancel_futures=True)
        bar.close()
    if hasattr(runtime, "shutdown"):
        runtime.shutdown()
    header = {
        "runtime": spec,
        "described": info,
        "protocol_version": info.get("protocol", 1),
        "seconds": round(time.perf_counter() - started, 2),
        "versions": {
            "python": platform.python_version(),
            "numpy": numpy.__version__,
            "onnx": onnx.__version__,
            "onnxruntime": onnxruntime.__version__,
            "platform": platform.platform(),
        },
        "catalogue_size": catalogue_size(),
        "selected": len(cases),
        "interrupted": interrupted,
    }
    return header, results


VERDICTS = {
    "certified": "certified",
    "certified_with_expected_failures": "certified, with expected failures",
    "failed": "failed",
    "not_applicable": "not applicable",
    "no_case": "no case in this selection",
}


def feature_verdicts(results: list[Result], declared) -> dict[str, dict]:
    """Per feature of the protocol: the counts of the cases that need it (or, declared, make
    their judge stricter), and a verdict: failed if any failed; else certified (with expected
    failures, if any) if any applied; else not applicable (or no case needs it here)."""
    counts: dict[str, Counter] = defaultdict(Counter)
    for r in results:
        for feature in (*r.case.features, *(f for f in r.case.stricter if f in declared)):
            counts[feature][r.status] += 1
    out = {}
    for feature in FEATURES:
        c = counts[feature]
        if c["failed"]:
            verdict = "failed"
        elif c["expected_fail"]:
            verdict = "certified_with_expected_failures"
        elif c["passed"]:
            verdict = "certified"
        elif c["not_applicable"]:
            verdict = "not_applicable"
        else:
            verdict = "no_case"
        out[feature] = {"declared": feature in declared, "verdict": verdict,
                        **{status: c[status] for status in STATUSES}}  # fmt: skip
    return out


def suite_table(results: list[Result]) -> dict[str, dict]:
    """Per suite: the counts by status and the seconds its cases took."""
    out: dict[str, dict] = {}
    for r in results:
        row = out.setdefault(r.case.suite, {**dict.fromkeys(STATUSES, 0), "seconds": 0.0})
        row[r.status] += 1
        row["seconds"] += r.seconds
    for row in out.values():
        row["seconds"] = round(row["seconds"], 2)
    return out


def report_json(header: dict, results: list[Result], problems: list[Problem]) -> dict:
    declared = set(header["described"].get("features", []))
    return {
        **header,
        "summary": dict(Counter(r.status for r in results)),
        "features": feature_verdicts(results, declared),
        "suites": suite_table(results),
        "problems": [p.to_json() for p in problems],
        "cases": [
            {
                "id": r.case.id,
                "suite": r.case.suite,
                "rule": r.case.rule,
                "features": list(r.case.features),
                "status": r.status,
                "kind": r.kind,
                "expected": r.case.expected,
                "got": r.got,
                "reason": r.reason,
                "seconds": round(r.seconds, 4),
                "reproduce": f"conformance show {r.case.id} --dest ./case",
            }
            for r in results
        ],
    }


def _row(*cells) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def report_markdown(header: dict, results: list[Result], problems: list[Problem]) -> str:
    lines = [f"# Conformance report: `{header['runtime']}`", ""]
    described = header["described"]
    declared = set(described.get("features", []))
    lines.append(f"- runtime: {described.get('name')} {described.get('version', '')}".rstrip())
    lines.append(f"- protocol: version {header['protocol_version']}")
    lines.append(f"- declared features: {', '.join(described.get('features', [])) or 'none'}")
    versions = ", ".join(f"{k} {v}" for k, v in header["versions"].items())
    lines.append(f"- versions: {versions}")
    lines.append(f"- cases: {header['selected']} selected of {header['catalogue_size']}, "
                 f"in {header['seconds']:.1f} s")  # fmt: skip
    if header.get("interrupted"):
        lines.append(f"- **interrupted**: partial report, {len(results)} cases ran")
    lines.append("")
    lines += ["## Verdict per feature", ""]
    lines.append(_row("feature", "declared", "verdict", "passed", "failed", "expected fail",
                      "not applicable"))  # fmt: skip
    lines.append("|---|---|---|---|---|---|---|")
    for feature, v in feature_verdicts(results, declared).items():
        lines.append(_row(feature, "yes" if v["declared"] else "no", VERDICTS[v["verdict"]],
                          v["passed"], v["failed"], v["expected_fail"], v["not_applicable"]))  # fmt: skip
    lines += ["", "## Per suite", ""]
    lines.append(_row("suite", "passed", "failed", "expected fail", "not applicable", "seconds"))
    lines.append("|---|---|---|---|---|---|")
    for suite, v in sorted(suite_table(results).items()):
        lines.append(_row(suite, v["passed"], v["failed"], v["expected_fail"],
                          v["not_applicable"], f"{v['seconds']:.1f}"))  # fmt: skip
    total = Counter(r.status for r in results)
    lines.append(_row("**all cases**", total["passed"], total["failed"], total["expected_fail"],
                      total["not_applicable"], f"{sum(r.seconds for r in results):.1f}"))  # fmt: skip
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
        lines.append(f"- got ({r.kind}): {r.got}")
        if r.reason:
            lines.append(f"- note: {r.reason}")
        lines.append(f"- reproduce: `conformance show {r.case.id} --dest ./case`")
        lines.append("")
    expected = [r for r in results if r.status == "expected_fail"]
    if expected:
        lines += [f"## Expected failures ({len(expected)})", ""]
        lines += [f"- `{r.case.id}` ({r.kind}): {r.reason}" for r in expected] + [""]
    not_applicable: dict[str, list[str]] = defaultdict(list)
    for r in results:
        if r.status == "not_applicable":
            not_applicable[r.reason].append(r.case.id)
    if not_applicable:
        lines += [f"## Not applicable ({sum(map(len, not_applicable.values()))})", ""]
        for reason, ids in sorted(not_applicable.items(), key=lambda item: -len(item[1])):
            lines.append(f"- {reason}: {len(ids)} cases ({', '.join(ids[:3])}"
                         f"{', ...' if len(ids) > 3 else ''})")  # fmt: skip
        lines.append("")
    slowest = sorted(results, key=lambda r: -r.seconds)[:5]
    lines += ["## Slowest cases", ""]
    lines += [f"- `{r.case.id}`: {r.seconds:.2f} s" for r in slowest] + [""]
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
    unknown = sorted(set(header["described"].get("features", [])) - set(FEATURES))
    for feature in unknown:
        hint = (
            " (protocol version 2 split it into genai_config, model_io and runtime_contracts)"
            if feature == "lowering"
            else ""
        )
        problems.append(
            Problem(
                ProblemKind.UNKNOWN_FEATURE,
                f"the runtime declares {feature!r}, which is not a feature of protocol version "
                f"{PROTOCOL_VERSION}{hint}; declare only features of docs/conformance.md",
            )
        )
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
    if header.get("interrupted"):
        problems.append(
            Problem(
                ProblemKind.INTERRUPTED,
                f"interrupted after {len(results)} of {header['selected']} cases: this report is "
                "partial",
            )
        )
    elif len(results) != header["selected"]:
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
