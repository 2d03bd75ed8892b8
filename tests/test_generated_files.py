"""Derived files are pure functions of their sources: regenerate and compare byte for byte."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures import MANIFEST_PATH, PACKAGES_DIR
from fixtures.generators.common import sha256
from reference_runtime.package.schema import SCHEMA_PATH, schema_text

ROOT = Path(__file__).resolve().parents[1]


def _tool(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_schema_file_matches_the_model():
    assert SCHEMA_PATH.read_text(encoding="utf-8") == schema_text(), (
        "run python tools/generate_schema.py"
    )


def test_generated_docs_match_the_rule_table():
    for path, text in _tool("generate_docs").generated().items():
        assert path.read_text(encoding="utf-8") == text, "run python tools/generate_docs.py"


def test_committed_fixtures_match_their_manifest():
    manifest = json.loads(MANIFEST_PATH.read_text())
    on_disk = {
        package.name: {
            f.relative_to(package).as_posix(): sha256(f)
            for f in sorted(package.rglob("*"))
            if f.is_file()
        }
        for package in sorted(PACKAGES_DIR.iterdir())
        if package.is_dir()
    }
    assert on_disk == manifest


def test_fixture_generators_are_deterministic(tmp_path):
    first = _tool("generate_fixtures").generate(tmp_path / "a")
    second = _tool("generate_fixtures").generate(tmp_path / "b")
    assert first == second
    assert first == json.loads(MANIFEST_PATH.read_text()), "run python tools/generate_fixtures.py"


@pytest.mark.skipif(shutil.which("ruff") is None and importlib.util.find_spec("ruff") is None,
                    reason="ruff is not installed (it comes with the test extra)")  # fmt: skip
@pytest.mark.parametrize("command", [["check", "."], ["format", "--check", "."]])
def test_ruff_is_clean(command):
    result = subprocess.run(
        [sys.executable, "-m", "ruff", *command], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
