"""Run cases against their goldens (asserted with syrupy through conformance's extension)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from conformance import goldens
from conformance.cases.run_cases import execute
from conformance.golden_extension import GoldenExtension
from conformance.runtimes.reference import ReferenceRuntime
from fixtures.generators import RUN_CASES

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def golden(snapshot):
    return snapshot.use_extension(GoldenExtension)


@pytest.mark.usefixtures("interpreter_mode")  # the compiled interpreter and the plain one
@pytest.mark.parametrize("executor", ["ort", "native"])
@pytest.mark.parametrize("case", RUN_CASES, ids=lambda c: c.id)
def test_run_case_matches_its_golden(case, executor, golden):
    results = execute(ReferenceRuntime(executor), case)
    fresh = goldens.document(case.id, case.package, results, "runtime", f"reference:{executor}")
    assert golden(name=goldens.golden_name(case.id)) == fresh


def test_goldens_are_current_and_none_is_missing_or_unused():
    spec = importlib.util.spec_from_file_location("regen", ROOT / "tools" / "regen_goldens.py")
    regen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(regen)
    assert regen.main(["--check"]) == 0, "run python tools/regen_goldens.py"
