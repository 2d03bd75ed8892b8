"""The adapters of third-party runtimes (conformance/runtimes/ort_genai.py, onnx_genai.py): each
loads a generated decoder folder and runs one greedy request to its golden tokens. A runtime that
cannot be imported here (or, for nxrt, whose ONNX Runtime library does not load) is skipped with
the reason."""

from __future__ import annotations

import pytest

from conformance import goldens
from conformance.protocol import Refused, Unsupported
from fixtures import package_path
from fixtures.generators import RUN_CASES

CASE = next(c for c in RUN_CASES if c.id == "genai_decoder/greedy_ragged_batch")
FACTORIES = {
    "onnxruntime-genai": ("conformance.runtimes.ort_genai", "factory"),
    "onnx-genai": ("conformance.runtimes.onnx_genai", "onnx_genai"),
    "nxrt": ("conformance.runtimes.onnx_genai", "nxrt"),
}


def _open(name: str):
    """(runtime, handle of the case's package), or skip saying why it cannot run here."""
    import importlib

    module, factory = FACTORIES[name]
    try:
        runtime = getattr(importlib.import_module(module), factory)()
    except ImportError as exc:
        pytest.skip(f"{name} cannot be imported: {exc}")
    try:
        handle = runtime.load(str(package_path(CASE.package)))
    except Refused as exc:
        if name == "nxrt" and "ONNX_GENAI_ORT_LIB" in exc.message:
            pytest.skip(f"nxrt's ONNX Runtime library does not load: {exc.message.splitlines()[0]}")
        raise
    return runtime, handle


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_greedy_request_gives_the_golden_tokens(name):
    runtime, handle = _open(name)
    try:
        described = runtime.describe()
        assert described["protocol"] == 2
        assert set(described["features"]) == {"load", "run", "genai_config", "sampling"}
        (request,) = CASE.requests
        got = runtime.run(handle, dict(request))
    finally:
        runtime.close(handle)
    (want,) = goldens.load(CASE.id)["results"]
    assert got["tokens"] == want["tokens"]
    assert got["finish_reasons"] == want["finish_reasons"]
    assert not goldens.differences(goldens.load(CASE.id), [got])


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_documents_of_the_format_are_unsupported(name):
    runtime, handle = _open(name)
    runtime.close(handle)
    with pytest.raises(Unsupported) as err:
        runtime.load(str(package_path("model_io_decoder")))
    assert (err.value.stage, err.value.feature) == ("load", "model_io")


SPECS = {
    "onnxruntime-genai": ("python:conformance.runtimes.ort_genai:factory", "ort_genai"),
    "onnx-genai": ("python:conformance.runtimes.onnx_genai:onnx_genai", "onnx_genai"),
    "nxrt": ("python:conformance.runtimes.onnx_genai:nxrt", "nxrt"),
}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_each_runtime_is_certified_with_its_committed_expectations(name, tmp_path):
    """The whole catalogue, strictly: every failure is a committed, pinned expectation (each
    with its evidence), and no expectation is stale."""
    import json
    from pathlib import Path

    from conformance.cli import main

    runtime, handle = _open(name)
    runtime.close(handle)
    spec, stem = SPECS[name]
    expectations = Path(__file__).resolve().parents[1] / "conformance" / "expectations"
    code = main(["certify", "--runtime", spec, "--expectations", str(expectations / f"{stem}.yaml"),
                 "--strict", "--jobs", "2", "--report-dir", str(tmp_path)])  # fmt: skip
    report = json.loads((tmp_path / "report.json").read_text())
    assert code == 0, [(c["id"], c["got"]) for c in report["cases"] if c["status"] == "failed"]
    assert report["problems"] == []
    verdicts = {f: v["verdict"] for f, v in report["features"].items()}
    assert verdicts["genai_config"].startswith("certified")
    assert verdicts["sampling"] in ("certified", "certified_with_expected_failures")
    for feature in ("rule_codes", "min_p", "reference_draws", "loop", "model_io"):
        assert verdicts[feature] == "not_applicable", feature
    assert report["summary"]["passed"] >= 30
