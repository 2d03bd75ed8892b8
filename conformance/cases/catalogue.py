"""The case catalogue: every case a runtime is certified against.

A :class:`Case` knows how to build its package in a folder, the features it needs, and how to
judge a runtime on it. Suites so far:

- ``acceptance``: every valid generated package loads;
- ``fail_closed``: every mutation in ``load_rules`` (one or more per load-time rule code) is
  refused at load, or at run time before any output is published; never run silently.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fixtures import package_path
from reference_runtime.package.parse import find_metadata

from ..protocol import Refused, Runtime
from .load_rules import BASES, MUTATIONS
from .mutations import load_document

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
    return cases


def materialise(case_id: str, dest: Path) -> Path:
    """Write a case's package under ``dest`` (for reproducing a failure by hand)."""
    for case in catalogue():
        if case.id == case_id:
            dest.mkdir(parents=True, exist_ok=True)
            root = case.build(dest)
            assert find_metadata(root) is not None or case.suite == "fail_closed"
            return root
    raise KeyError(f"no case {case_id!r}")
