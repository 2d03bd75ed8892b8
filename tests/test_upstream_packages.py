"""The format's upstream example packages validate, with their real graphs loaded."""

from __future__ import annotations

import shutil

import onnx
import pytest
import yaml

from reference_runtime.package import load_package, validate_package
from reference_runtime.package.model import OnnxImplementation

WORKFLOW_PACKAGES = [
    "adapter", "codec", "decoder", "diffusion", "speculative", "speech_wav", "static_cache",
]  # fmt: skip


@pytest.mark.parametrize("name", WORKFLOW_PACKAGES)
def test_upstream_package_validates(upstream_dir, name):
    package = load_package(upstream_dir / name)
    components = package.metadata.workflow.components
    onnx_components = {
        n for n, c in components.items() if isinstance(c.implementation, OnnxImplementation)
    }
    # The port checks ran against every real graph.
    assert set(package.graphs) == onnx_components
    for component, graph in package.graphs.items():
        model = onnx.load(str(graph.path), format="textproto", load_external_data=False)
        assert list(graph.inputs) == [v.name for v in model.graph.input], component
        assert list(graph.outputs) == [v.name for v in model.graph.output], component


def test_legacy_model_io_package_is_lowered_then_validated(upstream_dir):
    assert validate_package(upstream_dir / "tiny-llm") == []
    package = load_package(upstream_dir / "tiny-llm")
    assert package.provenance == "lowered"
    assert set(package.metadata.workflow.components) == {"decoder", "policy", "batch"}


def _copy(upstream_dir, tmp_path, name):
    root = tmp_path / name
    shutil.copytree(upstream_dir / name, root)
    return root, yaml.safe_load((root / "inference_metadata.yaml").read_text())


def _save(root, doc):
    (root / "inference_metadata.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))


def test_declared_port_is_checked_against_the_real_graph(upstream_dir, tmp_path):
    root, doc = _copy(upstream_dir, tmp_path, "static_cache")
    port = doc["pipeline"]["workflow"]["components"]["model"]["ports"]["outputs"]["logits"]
    port["shape"][2] = 9  # the graph fixes it to 8
    _save(root, doc)
    codes = {(v.code, v.location) for v in validate_package(root)}
    assert ("C78", "pipeline.workflow.components.model.ports.outputs.logits.shape[2]") in codes


def test_undeclared_ports_are_checked_against_the_graph(upstream_dir, tmp_path):
    root, doc = _copy(upstream_dir, tmp_path, "codec")
    doc["pipeline"]["workflow"]["steps"][0]["inputs"] = {"audio": "request.waveform"}
    _save(root, doc)
    found = [(v.code, v.location) for v in validate_package(root)]
    assert ("D28", "pipeline.workflow.steps[0].inputs.audio") in found  # not a graph input
    assert ("D28", "pipeline.workflow.steps[0].inputs") in found  # `waveform` left unbound
