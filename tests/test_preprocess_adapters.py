"""The image / audio preprocessing programs, run by their adapters beneath the interpreter."""

from __future__ import annotations

import io
import wave

import numpy as np
import pytest
from PIL import Image

from reference_runtime import Engine, RunError
from tests.kit import contract, emit, invoke, out, package, request_input

ENCODED = contract("uint8", "bytes")


def preprocess_package(tmp_path, kind: str, operations: list, output: dict):
    abi = f"onnx-genai.{kind}-preprocess"
    wf = {
        "manifest": {"capabilities": ["workflow_ssa", "typed_emit"], "adapter_abis": {abi: "1"}},
        "inputs": {"request.media": request_input(ENCODED, "media")},
        "outputs": {"values": out(output)},
        "components": {
            "pre": {
                "implementation": {"kind": "adapter", "abi": abi, "version": "1"},
                "ports": {"inputs": {"encoded": ENCODED}, "outputs": {"values": output}},
            }
        },
        "steps": [
            invoke("pre", {"encoded": "request.media"}, {"values": "v"}),
            emit("v", "values"),
        ],
    }
    program = {
        "adapter": "pre",
        "operations": operations,
        "outputs": {"values": {"contract": output}},
    }
    return Engine.from_dir(package(tmp_path / kind, wf, {}, preprocessing={kind: program}))


def png(color, size=(2, 3)) -> np.ndarray:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format="PNG")
    return np.frombuffer(buffer.getvalue(), dtype=np.uint8)


def test_image_program_decodes_resizes_and_normalises(tmp_path):
    ops = [
        {"kind": "decode", "format": "png"},
        {"kind": "convert", "mode": "rgb"},
        {"kind": "resize", "height": 4, "width": 4, "interpolation": "bilinear"},
        {"kind": "rescale", "factor": 1 / 255},
        {"kind": "normalize", "mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5]},
        {"kind": "layout", "layout": "chw"},
        {"kind": "publish", "output": "values"},
    ]
    engine = preprocess_package(tmp_path, "image", ops, contract("float32", 1, 3, 4, 4))
    pixels = engine.run(inputs={"request.media": png((255, 0, 51))}).outputs["values"]
    # A solid colour survives resizing; (c / 255 - 0.5) / 0.5 per channel.
    expected = np.array([1.0, -1.0, 51 / 255 * 2 - 1], np.float32)
    np.testing.assert_allclose(pixels[0, :, 2, 1], expected, rtol=1e-6)
    assert pixels.shape == (1, 3, 4, 4)
    assert engine.counters["invocations"]["pre"] == {"adapter:onnx-genai.image-preprocess@1": 1}


def wav(samples: np.ndarray, rate: int) -> np.ndarray:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as writer:
        writer.setnchannels(samples.shape[0])
        writer.setsampwidth(2)
        writer.setframerate(rate)
        writer.writeframes(samples.T.astype("<i2").tobytes())
    return np.frombuffer(buffer.getvalue(), dtype=np.uint8)


def test_audio_program_mixes_down_and_resamples(tmp_path):
    ops = [
        {"kind": "decode", "format": "wav"},
        {"kind": "mixdown", "channels": 1},
        {"kind": "resample", "sample_rate_hz": 8000},
        {"kind": "publish", "output": "values"},
    ]
    engine = preprocess_package(tmp_path, "audio", ops, contract("float32", 1, 1, "samples"))
    left = np.full(8, 16384, np.int16)  # 0.5
    right = np.full(8, -8192, np.int16)  # -0.25
    audio = engine.run(inputs={"request.media": wav(np.stack([left, right]), 16000)})
    values = audio.outputs["values"]
    assert values.shape == (1, 1, 4)  # 8 samples at 16 kHz -> 4 at 8 kHz
    np.testing.assert_allclose(values, 0.125)  # the mean of 0.5 and -0.25


def test_undecodable_media_fails_in_the_adapter(tmp_path):
    ops = [{"kind": "decode", "format": "png"}, {"kind": "publish", "output": "values"}]
    engine = preprocess_package(tmp_path, "image", ops, contract("float32", 1, 3, 4, 4))
    with pytest.raises(RunError) as err:
        engine.run(inputs={"request.media": np.frombuffer(b"not a png", np.uint8)})
    assert err.value.code == "C86" and "decode" in err.value.message
