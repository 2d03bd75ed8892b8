"""`reference-runtime inspect`: what a package asks of its caller (each input and how to pass
it), what it publishes, which executors run each component, the capabilities it needs; for
workflow packages and bare decoders alike."""

from __future__ import annotations

import json

import pytest

from fixtures import package_path
from reference_runtime.cli import main


def inspect_json(capsys, name: str) -> dict:
    assert main(["inspect", str(package_path(name)), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def by_name(items: list[dict]) -> dict:
    return {item["name"]: item for item in items}


def test_inputs_say_how_to_pass_each(capsys):
    info = inspect_json(capsys, "counting_loop")
    assert info["kind"] == "workflow package"
    inputs = by_name(info["inputs"])
    start = inputs["start"]
    assert start["pass"] == "--input start=[...] or --input start=@FILE.npy"
    assert (start["dtype"], start["shape"], start["required"]) == ("int64", ["batch"], True)
    assert start["source"] == "application (start)" and start["role"] == "opaque"
    bound = inputs["request.max_new_tokens"]
    assert bound["pass"] == "--max-new-tokens N" and bound["role"] == "runtime max_output_tokens"
    assert (bound["required"], bound["default"]) == (False, 16)
    literal = inputs["package.increment"]
    assert literal["source"] == "literal" and literal["pass"].startswith("fixed by the package")
    # what the caller passes comes first, what the package fixes last
    assert [i["name"] for i in info["inputs"]][-1] == "package.increment"


def test_prompt_inputs_name_the_prompt_flags(capsys):
    inputs = by_name(inspect_json(capsys, "branching")["inputs"])
    assert inputs["request.tokens"]["pass"] == "--tokens JSON or --prompt JSON"
    assert inputs["negate"]["shape"] == [] and inputs["negate"]["dtype"] == "bool"
    # a package with a tokenizer takes text as well
    inputs = by_name(inspect_json(capsys, "genai_decoder")["inputs"])
    assert inputs["request.prompt_tokens"]["pass"].endswith("(or --text TEXT)")


def test_media_outputs_and_what_run_out_saves(capsys):
    info = inspect_json(capsys, "media")
    outputs = by_name(info["outputs"])
    assert outputs["image"]["role"] == "image" and outputs["image"]["saved_as"] == [".npy", ".png"]
    audio = outputs["audio"]
    assert audio["media"]["container"] == "wav" and audio["media"]["sample_rate_hz"] == 16000
    assert audio["saved_as"] == [".npy", ".wav"]
    components = by_name(info["components"])
    assert components["image_pre"]["implementation"] == "adapter onnx-genai.image-preprocess@1"
    assert [a["abi"] for a in info["adapter_abis"]] == [
        "onnx-genai.image-preprocess", "onnx-genai.text-assembly"
    ]  # fmt: skip
    assert "image_preprocessing_program" in [c["name"] for c in info["capabilities"]]


def test_executors_per_component(capsys):
    shrink = by_name(inspect_json(capsys, "native_gap")["components"])["shrink"]
    assert shrink["graph"] == "shrink.onnx"
    assert shrink["executors"]["ort"] == "yes"
    native = shrink["executors"]["native"]
    assert native.startswith("no: 1 node(s)") and "Shrink" in native
    model = by_name(inspect_json(capsys, "counting_loop")["components"])
    assert all(c["executors"] == {"ort": "yes", "native": "yes"} for c in model.values())


@pytest.mark.parametrize("name", ["genai_decoder", "model_io_decoder"])
def test_bare_decoders_are_described_lowered(capsys, name):
    info = inspect_json(capsys, name)
    assert info["kind"] == "bare decoder (lowered to a workflow)"
    assert by_name(info["inputs"])["request.prompt_tokens"]["required"] is True
    assert "tokens" in [o["role"] for o in info["outputs"]]


def test_human_readable(capsys):
    assert main(["inspect", str(package_path("native_gap"))]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{package_path('native_gap')}: workflow package\n")
    assert "\ninputs:\n  x  " in out and "      pass: --input x=" in out
    assert "      --executor native: no: 1 node(s)" in out
