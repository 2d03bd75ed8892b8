"""The case catalogue: every case a runtime is certified against.

A :class:`Case` knows how to build its package in a folder, the features it needs, and how to
judge a runtime on it. Suites so far:

- ``acceptance``: every valid generated package loads;
- ``fail_closed``: every mutation in ``load_rules`` (one or more per load-time rule code) is
  refused at load, or at run time before any output is published; never run silently;
- ``golden``: every run case's results equal its golden (goldens/);
- ``determinism``: running a case twice gives identical results;
- ``rows``: each row of a batched request equals the same row run alone;
- ``executor``: under a native executor, no ONNX Runtime session ever exists (runtimes that
  report executor diagnostics and declare ``native_executor`` only).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fixtures import package_path
from fixtures.generators import RUN_CASES
from fixtures.generators.cases import RunCase
from reference_runtime.package.parse import find_metadata

from .. import goldens
from ..protocol import Refused, Runtime
from .load_rules import BASES, MUTATIONS
from .mutations import load_document
from .run_cases import (
    aligned_outputs,
    execute,
    request_rows,
    row_differences,
    same,
    solo_request,
)

# The catalogue must not shrink silently (a tripwire in certification checks this).
MIN_CASES = 350


@dataclass(frozen=True)
class Outcome:
    passed: bool
    got: str


@dataclass(frozen=True)
class Case:
    id: str
    suite: str
    features: tuple[str, ...]
    expected: str
    build: Callable[[Path], Path]
    judge: Callable[[Runtime, Path], Outcome]
    rule: str | None = None  # the rule code a fail-closed case breaks


def package_features(document: dict) -> tuple[str, ...]:
    """The features a package exercises, read from its document."""
    found = {"load"}
    workflow = (document.get("pipeline") or {}).get("workflow") or {}

    def visit(steps):
        for step in steps or ():
            if not isinstance(step, dict):
                continue
            kind = step.get("kind")
            if kind in ("invoke", "loop", "branch", "emit", "sequence"):
                found.add(kind)
            if kind == "emit":
                if step.get("when") or step.get("valid_length"):
                    found.add("per_row_emit")
                if step.get("mode") == "event":
                    found.add("event_emit")
            visit(step.get("setup"))
            visit(step.get("steps"))
            for case in (step.get("cases") or {}).values():
                visit(case)
            visit(step.get("default"))

    visit(workflow.get("steps"))
    state = workflow.get("state") or {}
    if any(isinstance(c, dict) and c.get("scope") == "session" for c in state.values()):
        found.add("session_state")
    groups = ((workflow.get("serving") or {}).get("state_service") or {}).get("groups") or {}
    if groups:
        found.add("service_groups")
    if any(
        isinstance(g, dict) and (g.get("update") or {}).get("kind") == "indexed_scatter"
        for g in groups.values()
    ):
        found.add("indexed_scatter")
    abis = {
        (c.get("implementation") or {}).get("abi")
        for c in (workflow.get("components") or {}).values()
        if isinstance(c, dict)
    }
    if document.get("adapters") or "onnx-genai.parameter-overlay" in abis:
        found.add("adapters")
    if "onnx-genai.grammar-guidance" in abis:
        found.add("grammar_guidance")
    if "onnx-genai.telemetry" in abis:
        found.add("telemetry")
    if document.get("preprocessing"):
        found.add("preprocessing")
    if document.get("speculative"):
        found.add("speculative")
    return tuple(sorted(found))


def _copy_base(base: str) -> Callable[[Path], Path]:
    def build(dest: Path) -> Path:
        root = dest / base
        shutil.copytree(package_path(base), root, symlinks=True)
        return root

    return build


def _judge_accept(runtime: Runtime, root: Path) -> Outcome:
    try:
        handle = runtime.load(str(root))
    except Refused as exc:
        return Outcome(False, f"refused at load [{exc.code}]: {exc.message.splitlines()[0]}")
    runtime.close(handle)
    return Outcome(True, "loaded")


def _judge_refusal(runtime: Runtime, root: Path) -> Outcome:
    try:
        handle = runtime.load(str(root))
    except Refused as exc:
        return Outcome(True, f"refused at load [{exc.code}]")
    runtime.close(handle)
    return Outcome(False, "loaded without refusal (the package is invalid)")


def _judge_golden(run: RunCase):
    def judge(runtime: Runtime, root: Path) -> Outcome:
        golden = goldens.load(run.id)
        if golden is None:
            return Outcome(False, "no golden for this case (run tools/regen_goldens.py)")
        if golden["provenance"]["fixture_sha256"] != goldens.fixture_hash(run.package):
            return Outcome(False, "the golden is stale: the package changed since it was recorded")
        problems = goldens.differences(golden, execute(runtime, run, root))
        return Outcome(not problems, "; ".join(problems[:3]) or "matches the golden")

    return judge


def _judge_determinism(run: RunCase):
    def judge(runtime: Runtime, root: Path) -> Outcome:
        first, second = execute(runtime, run, root), execute(runtime, run, root)
        return Outcome(same(first, second), "identical" if same(first, second) else "runs differ")

    return judge


def _judge_rows(run: RunCase):
    def judge(runtime: Runtime, root: Path) -> Outcome:
        problems = []
        for request in run.requests:
            rows = request_rows(run, request)
            if rows < 2:
                continue
            single = RunCase(run.id, run.package, (request,))
            (batched,) = execute(runtime, single, root)
            for row in range(rows):
                alone = RunCase(run.id, run.package, (solo_request(run, request, row),))
                (solo,) = execute(runtime, alone, root)
                problems += row_differences(batched, solo, row, aligned_outputs(run))
        return Outcome(not problems, "; ".join(problems[:3]) or "rows equal their solo runs")

    return judge


def _judge_native_executor(run: RunCase):
    def judge(runtime: Runtime, root: Path) -> Outcome:
        problems = []
        for result in execute(runtime, run, root):
            counters = (result.get("diagnostics") or {}).get("counters")
            if counters is None:
                if not result.get("error"):
                    problems.append("the run reported no executor counters")
                continue
            foreign = sorted(set(counters.get("sessions_created", {})) - {"native"})
            if foreign:
                problems.append(
                    f"sessions created by {', '.join(foreign)} under the native executor"
                )
            for component, by_executor in counters.get("invocations", {}).items():
                if "ort" in by_executor:
                    problems.append(f"{component!r} ran on ONNX Runtime")
        return Outcome(not problems, "; ".join(problems[:3]) or "native sessions only")

    return judge


def run_catalogue() -> list[Case]:
    cases = []
    documents: dict[str, tuple[str, ...]] = {}
    for run in RUN_CASES:
        if run.package not in documents:
            documents[run.package] = package_features(load_document(run.package))
        features = (*documents[run.package], "run")
        build = _copy_base(run.package)
        notes = f" ({run.notes})" if run.notes else ""
        cases.append(Case(f"golden/{run.id}", "golden", features,
                          f"results equal the golden{notes}", build, _judge_golden(run)))  # fmt: skip
        cases.append(Case(f"determinism/{run.id}", "determinism", features,
                          "two runs give identical results", build, _judge_determinism(run)))  # fmt: skip
        cases.append(Case(f"executor/{run.id}", "executor", (*features, "native_executor"),
                          "no ONNX Runtime session under the native executor", build,
                          _judge_native_executor(run)))  # fmt: skip
        if run.rows_independent:
            cases.append(Case(f"rows/{run.id}", "rows", features,
                              "each batched row equals its solo run", build, _judge_rows(run)))  # fmt: skip
    return cases


def catalogue() -> list[Case]:
    cases: list[Case] = []
    features = {base: package_features(load_document(base)) for base in BASES}
    for base in BASES:
        cases.append(
            Case(
                id=f"acceptance/{base}",
                suite="acceptance",
                features=features[base],
                expected="the valid package loads",
                build=_copy_base(base),
                judge=_judge_accept,
            )
        )
    seen: set[str] = set()
    for mutation in MUTATIONS:
        ident = f"fail_closed/{mutation.ident}"
        n = 2
        while ident in seen:
            ident, n = f"fail_closed/{mutation.ident}-{n}", n + 1
        seen.add(ident)
        cases.append(
            Case(
                id=ident,
                suite="fail_closed",
                features=features[mutation.base],
                expected=f"refused ({mutation.code}): {mutation.describe()}",
                build=mutation.materialise,
                judge=_judge_refusal,
                rule=mutation.code,
            )
        )
    return cases + run_catalogue()


def materialise(case_id: str, dest: Path) -> Path:
    """Write a case's package under ``dest`` (for reproducing a failure by hand)."""
    for case in catalogue():
        if case.id == case_id:
            dest.mkdir(parents=True, exist_ok=True)
            root = case.build(dest)
            assert find_metadata(root) is not None or case.suite == "fail_closed"
            return root
    raise KeyError(f"no case {case_id!r}")
