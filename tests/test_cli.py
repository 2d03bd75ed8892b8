"""The `reference-runtime` command: exit codes, human and JSON reports."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

from conformance.cases.load_rules import MUTATIONS
from fixtures import package_path
from reference_runtime.cli import main
from reference_runtime.support import REFERENCE_SUPPORT


def test_valid_package_exits_0(capsys):
    assert main(["validate", str(package_path("kv_decoder"))]) == 0
    assert "valid workflow package" in capsys.readouterr().out


def test_valid_package_json(capsys):
    assert main(["validate", str(package_path("media")), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"valid": True, "violations": []}


def _refused(tmp_path):
    mutation = next(m for m in MUTATIONS if m.code == "A03")
    return mutation, mutation.materialise(tmp_path)


def test_refused_package_exits_1_and_lists_violations(tmp_path, capsys):
    mutation, root = _refused(tmp_path)
    assert main(["validate", str(root)]) == 1
    out = capsys.readouterr().out
    assert "refused, 1 violation" in out
    assert mutation.code in out and mutation.location in out and "fix:" in out


def test_refused_package_json_shape(tmp_path, capsys):
    mutation, root = _refused(tmp_path)
    assert main(["validate", str(root), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["valid"] is False
    assert [set(v) for v in report["violations"]] == [
        {"code", "location", "message", "hint", "kind"}
    ]
    assert report["violations"][0]["code"] == mutation.code
    assert report["violations"][0]["kind"] == "violation"
    assert report["violations"][0]["location"] == mutation.location


def test_an_unsupported_feature_is_reported_as_such(tmp_path, capsys):
    """A valid package needing a feature this runtime lacks is refused with kind
    `unsupported`, not as a broken rule."""
    root = tmp_path / "pkg"
    shutil.copytree(package_path("kv_decoder"), root)
    path = root / "inference_metadata.yaml"
    text = path.read_text()
    assert "\ngeneration:\n  defaults:\n" in text
    path.write_text(text.replace("\n  defaults:\n", "\n  defaults:\n    num_beams: 4\n", 1))
    assert main(["validate", str(root), "--json"]) == 1
    (violation,) = json.loads(capsys.readouterr().out)["violations"]
    assert violation["code"] == "H93" and violation["kind"] == "unsupported"
    assert violation["location"] == "generation.defaults.num_beams"
    assert main(["validate", str(root)]) == 1
    assert "(unsupported here)" in capsys.readouterr().out


def test_missing_path_exits_2(tmp_path, capsys):
    assert main(["validate", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_file_instead_of_folder_exits_2_with_json_error(tmp_path, capsys):
    path = tmp_path / "inference_metadata.yaml"
    path.write_text("pipeline: {}\n")
    assert main(["validate", str(path), "--json"]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["code"] == "USAGE" and "not a folder" in error["message"]


def test_usage_error_exits_2(capsys):
    assert main(["validate"]) == 2
    assert main(["no-such-command"]) == 2


def test_capabilities_json(capsys):
    assert main(["capabilities", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == REFERENCE_SUPPORT.to_json()


def test_python_dash_m_entry_point():
    result = subprocess.run(
        [sys.executable, "-m", "reference_runtime", "validate", str(package_path("lora"))],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert "valid workflow package" in result.stdout
