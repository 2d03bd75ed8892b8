"""The image / audio preprocessing programs (`{transforms, outputs}`), run by their adapters
beneath the interpreter."""

from __future__ import annotations

import io
import wave

import numpy as np
import pytest
from PIL import Image

from reference_runtime import Engine, PackageError, RunError, validate_package
from tests.kit import contract, emit, invoke, out, package, request_input

# every test here runs under the compiled interpreter and the plain one
pytestmark = pytest.mark.usefixtures("interpreter_mode")

ENCODED = contract("uint8", "bytes")


def preprocess_workflow(kind: str, outputs: dict[str, dict]) -> dict:
    """A workflow whose one preprocess adapter publishes ``outputs`` (value name -> contract),
    each emitted under the same output name."""
    abi = f"onnx-genai.{kind}-preprocess"
    ports = {name.replace(".", "_"): c for name, c in outputs.items()}
    return {
        "manifest": {"capabilities": ["workflow_ssa", "typed_emit"], "adapter_abis": {abi: "1"}},
        "inputs": {"request.media": request_input(ENCODED, "media")},
        "outputs": {name.replace(".", "_"): out(c) for name, c in outputs.items()},
        "components": {
            "pre": {
                "implementation": {"kind": "adapter", "abi": abi, "version": "1"},
                "ports": {"inputs": {"encoded": ENCODED}, "outputs": ports},
            }
        },
        "steps": [
            invoke(
                "pre",
                {"encoded": "request.media"},
                {p: n for p, n in zip(ports, outputs, strict=True)},
            ),
            *(emit(name, name.replace(".", "_")) for name in outputs),
        ],
    }


def binding(name: str, source: str, content: str, c: dict) -> dict:
    return {"name": name, "source": source, "content": content, "dtype": c["dtype"], "contract": c}


def write(tmp_path, kind: str, transforms: list, bindings: list[dict]):
    wf = preprocess_workflow(kind, {b["name"]: b["contract"] for b in bindings})
    program = {"transforms": transforms, "outputs": bindings}
    return package(tmp_path / kind, wf, {}, preprocessing={kind: program})


def engine(tmp_path, kind, transforms, bindings) -> Engine:
    return Engine.from_dir(write(tmp_path, kind, transforms, bindings))


def png(color, size=(2, 3)) -> np.ndarray:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format="PNG")
    return np.frombuffer(buffer.getvalue(), dtype=np.uint8)


PIXELS = contract("float32", 1, 3, 4, 4)


def test_image_program_decodes_resizes_and_normalises(tmp_path):
    transforms = [
        {"op": "decode_rgb"},
        {"op": "emit_original_size", "outputs": ["size"]},
        {"op": "resize", "size": {"width": 4, "height": 4}, "interpolation": "bilinear"},
        {"op": "rescale", "scale": 1 / 255},
        {"op": "normalize", "mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5], "outputs": ["px"]},
    ]
    bindings = [
        binding("pre.pixels", "px", "pixels", PIXELS),
        binding("pre.size", "size", "original_size", contract("int64", 2)),
    ]
    e = engine(tmp_path, "image", transforms, bindings)
    result = e.run(inputs={"request.media": png((255, 0, 51))})
    pixels = result.outputs["pre_pixels"]
    # A solid colour survives resizing; (c / 255 - 0.5) / 0.5 per channel, channels first.
    expected = np.array([1.0, -1.0, 51 / 255 * 2 - 1], np.float32)
    np.testing.assert_allclose(pixels[0, :, 2, 1], expected, rtol=1e-6)
    assert pixels.shape == (1, 3, 4, 4)
    # the size was recorded before resizing, and did not interrupt the pixel stream
    np.testing.assert_array_equal(result.outputs["pre_size"], [3, 2])  # height, width
    assert e.counters["invocations"]["pre"] == {"adapter:onnx-genai.image-preprocess@1": 1}


def test_a_transform_reads_a_named_value(tmp_path):
    transforms = [
        {"op": "decode_rgb", "outputs": ["rgb"]},
        {"op": "resize", "size": 4, "outputs": ["big"]},
        {"op": "resize", "inputs": ["rgb"], "size": 1, "outputs": ["small"]},
        {"op": "rescale", "inputs": ["big"], "scale": 1.0, "outputs": ["px"]},
    ]
    bindings = [binding("pre.pixels", "px", "pixels", PIXELS)]
    result = engine(tmp_path, "image", transforms, bindings).run(
        inputs={"request.media": png((10, 20, 30))}
    )
    np.testing.assert_allclose(result.outputs["pre_pixels"][0, :, 0, 0], [10, 20, 30])


def wav(samples: np.ndarray, rate: int) -> np.ndarray:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as writer:
        writer.setnchannels(samples.shape[0])
        writer.setsampwidth(2)
        writer.setframerate(rate)
        writer.writeframes(samples.T.astype("<i2").tobytes())
    return np.frombuffer(buffer.getvalue(), dtype=np.uint8)


def test_audio_program_downmixes_resamples_and_pads(tmp_path):
    transforms = [
        {"op": "decode"},
        {"op": "downmix", "channels": 1},
        {"op": "resample", "sample_rate": 8000},
        {"op": "emit_valid_samples", "outputs": ["valid"]},
        {"op": "pad", "target_length": 6, "pad_value": -1.0, "outputs": ["samples"]},
    ]
    bindings = [
        binding("pre.audio", "samples", "waveform", contract("float32", 1, 1, "samples")),
        binding("pre.valid", "valid", "valid_samples", contract("int64", 1)),
    ]
    e = engine(tmp_path, "audio", transforms, bindings)
    left = np.full(8, 16384, np.int16)  # 0.5
    right = np.full(8, -8192, np.int16)  # -0.25
    result = e.run(inputs={"request.media": wav(np.stack([left, right]), 16000)})
    values = result.outputs["pre_audio"]
    assert values.shape == (1, 1, 6)  # 8 samples at 16 kHz -> 4 at 8 kHz, padded to 6
    np.testing.assert_allclose(values[0, 0], [0.125] * 4 + [-1.0] * 2)  # mean of 0.5, -0.25
    np.testing.assert_array_equal(result.outputs["pre_valid"], [4])


def test_zero_mean_unit_variance_and_trim(tmp_path):
    transforms = [
        {"op": "decode"},
        {"op": "trim", "target_length": 4},
        {"op": "zero_mean_unit_variance", "epsilon": 0.0, "outputs": ["x"]},
    ]
    bindings = [binding("pre.audio", "x", "waveform", contract("float32", 1, 1, "samples"))]
    e = engine(tmp_path, "audio", transforms, bindings)
    samples = np.array([[0, 8192, 16384, 24576, 32767]], np.int16)
    x = e.run(inputs={"request.media": wav(samples, 8000)}).outputs["pre_audio"][0, 0]
    assert x.shape == (4,)
    np.testing.assert_allclose([x.mean(), x.std()], [0.0, 1.0], atol=1e-6)


def test_undecodable_media_fails_in_the_adapter(tmp_path):
    bindings = [binding("pre.pixels", "decode", "pixels", PIXELS)]
    e = engine(tmp_path, "image", [{"op": "decode"}], bindings)
    with pytest.raises(RunError) as err:
        e.run(inputs={"request.media": np.frombuffer(b"not a png", np.uint8)})
    assert err.value.code == "C86" and "decode" in err.value.message


@pytest.mark.parametrize(
    "transform, words",
    [
        ({"op": "patchify", "patch_size": 2}, "'patchify' is not implemented"),
        ({"op": "resize", "size": 4, "mode": "crop"}, "resize mode 'crop'"),
        ({"op": "resize", "size": 4, "max_pixels": 9}, "does not take max_pixels"),
        ({"op": "tile", "tile_size": 2}, "'tile' is not implemented"),
    ],
)
def test_an_operation_this_runtime_does_not_implement_is_unsupported(tmp_path, transform, words):
    """Upstream's vocabulary is open: an operation (or parameter) this runtime does not run is
    refused at load as unsupported (H93), never skipped."""
    transforms = [{"op": "decode_rgb"}, transform, {"op": "rescale", "scale": 1.0}]
    bindings = [binding("pre.pixels", "rescale", "pixels", PIXELS)]
    violations = validate_package(write(tmp_path, "image", transforms, bindings))
    assert [v.code for v in violations] == ["H93"], violations
    assert violations[0].location == "preprocessing.image.transforms[1].op"
    assert words in violations[0].message


def test_program_rules(tmp_path):
    """G69: an output reading a value no transform produces, a binding whose dtype disagrees
    with its contract, and an output that is not an output of the adapter's invocation."""
    transforms = [{"op": "decode_rgb"}, {"op": "rescale", "scale": 1.0}]
    bad_source = binding("pre.pixels", "nowhere", "pixels", PIXELS)
    bad_dtype = {**binding("pre.pixels", "rescale", "pixels", PIXELS), "dtype": "float16"}
    for i, b in enumerate((bad_source, bad_dtype)):
        violations = validate_package(write(tmp_path / str(i), "image", transforms, [b]))
        assert [v.code for v in violations] == ["G69"], violations
    root = write(tmp_path / "2", "image", transforms, [binding("pre.pixels", "rescale", "pixels",
                                                               PIXELS)])  # fmt: skip
    text = (root / "inference_metadata.yaml").read_text().replace("name: pre.pixels", "name: other")
    (root / "inference_metadata.yaml").write_text(text)
    with pytest.raises(PackageError) as err:
        Engine.from_dir(root)
    assert set(err.value.codes) == {"G69"}
