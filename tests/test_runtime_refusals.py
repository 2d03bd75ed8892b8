"""Run-time refusals without the shared packages: emits, executors/devices, LoRA selection."""

from __future__ import annotations

import numpy as np
import pytest

from fixtures import package_path
from reference_runtime import Engine, ReferenceRuntimeError, RunError
from tests.kit import app, contract, emit, package, rows

# every test here runs under the compiled interpreter and the plain one
pytestmark = pytest.mark.usefixtures("interpreter_mode")

TOKENS = rows("int64", "n")


def emit_package(tmp_path):
    wf = {
        "inputs": {
            "value": app(TOKENS),
            "length": app(contract("int64", "k")),
            "keep": app(rows("bool")),
        },
        "outputs": {"out": out_rows()},
        "steps": [emit("value", "out", "append", valid_length="length", when="keep")],
    }
    return Engine.from_dir(package(tmp_path / "emit", wf, {}))


def out_rows():
    return {"contract": TOKENS, "role": "tokens", "stage": "pre_adapter"}


def test_per_row_emit_cuts_and_guards_rows(tmp_path):
    result = emit_package(tmp_path).run(
        inputs={"value": [[1, 2, 3], [4, 5, 6]], "length": [2, 3], "keep": [True, False]}
    )
    assert result.tokens == [[1, 2], []]
    assert result.outputs["out"][1] is None


@pytest.mark.parametrize(
    "inputs, words",
    [
        ({"length": [4, 1], "keep": [True, True]}, "valid_length 4 of row 0 is outside [0, 3]"),
        ({"length": [1, 1, 1], "keep": [True, True]}, "valid_length holds 3 values for 2 rows"),
    ],
)
def test_bad_row_controls_are_refused(tmp_path, inputs, words):
    engine = emit_package(tmp_path)
    with pytest.raises(RunError) as err:
        engine.run(inputs={"value": [[1, 2, 3], [4, 5, 6]], **inputs})
    assert err.value.code == "D85" and words in err.value.message


def test_unavailable_device_or_executor_is_refused_not_substituted():
    import onnxruntime

    try:
        import cupy

        has_gpu = cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        has_gpu = False
    if not has_gpu:
        with pytest.raises(ReferenceRuntimeError) as err:
            Engine.from_dir(package_path("lora"), executor="native", device="cuda")
        assert err.value.code == "H89"

    if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        pytest.skip("this machine has CUDA; the refusal is for machines without it")
    with pytest.raises(ReferenceRuntimeError) as err:
        Engine.from_dir(package_path("lora"), device="cuda")
    assert err.value.code == "H89" and "CUDAExecutionProvider" in err.value.message


def test_onnx_runtime_sessions_never_retry_on_another_provider():
    """ONNX Runtime's Python sessions retry a failed run on the CPU provider unless told not
    to; every session the ort executor creates has that retry switched off."""
    engine = Engine.from_dir(package_path("lora"))
    sessions = [s.session for s in engine._sessions.values() if s.executor == "ort"]
    assert sessions
    assert all(session._enable_fallback is False for session in sessions)


def lora_request(segments, counts, scales, active):
    return {
        "activations": np.array([[1.0, 2.0], [3.0, -1.0]], np.float32)[: len(counts)],
        "request.adapter_segments": segments,
        "request.adapter_counts": counts,
        "request.adapter_scales": np.asarray(scales, np.float32),
        "request.adapter_active": active,
    }


def test_lora_overlay_per_row_from_json_and_safetensors():
    engine = Engine.from_dir(package_path("lora"))
    result = engine.run(
        inputs=lora_request([[0, -1], [1, 0]], [1, 2], [[2.0, 0.0], [1.0, 0.5]], [True, True])
    )
    # red (JSON): A=[[1,0]], B=[[1],[2]]; peft (safetensors): A=[[1,-1]], B=[[0.5],[0.25]];
    # alpha / rank = 1; y = x + sum(scale * B (A x)); the projector graph is an identity.
    x0, x1 = np.array([1.0, 2.0]), np.array([3.0, -1.0])
    red = lambda x: np.array([1.0, 2.0]) * x[0]  # noqa: E731
    peft = lambda x: np.array([0.5, 0.25]) * (x[0] - x[1])  # noqa: E731
    expected = np.stack([x0 + 2.0 * red(x0), x1 + 1.0 * peft(x1) + 0.5 * red(x1)])
    np.testing.assert_allclose(result.outputs["result"], expected, rtol=1e-6)
    assert engine.counters["adapter_cache"] == {"loads": 2, "hits": 1, "evictions": 0}


def test_inactive_row_and_empty_selection_pass_through():
    engine = Engine.from_dir(package_path("lora"))
    result = engine.run(
        inputs=lora_request([[0, -1], [0, -1]], [1, 0], [[1.0, 0.0], [0.0, 0.0]], [False, True])
    )
    np.testing.assert_allclose(result.outputs["result"], [[1.0, 2.0], [3.0, -1.0]])
    assert engine.counters["adapter_cache"]["loads"] == 0


@pytest.mark.parametrize(
    "segments, counts, scales, words",
    [
        ([[0, 0], [1, -1]], [2, 1], [[1, 1], [1, 0]], "selected twice"),
        ([[7, -1], [1, -1]], [1, 1], [[1, 0], [1, 0]], "not declared"),
        ([[0, -1], [1, -1]], [1, 1], [[17, 0], [1, 0]], "[-16, 16]"),
        ([[0, -1], [1, -1]], [3, 1], [[1, 0], [1, 0]], "count 3"),
    ],
)
def test_bad_adapter_selection_is_refused_before_running(segments, counts, scales, words):
    engine = Engine.from_dir(package_path("lora"))
    with pytest.raises(RunError) as err:
        engine.run(inputs=lora_request(segments, counts, scales, [True, True]))
    assert err.value.code == "G87" and words in err.value.message
    assert engine.counters["invocations"] == {}


def _lora_with_row_selection(tmp_path):
    import json
    import shutil

    root = tmp_path / "lora"
    shutil.copytree(package_path("lora"), root)
    document = json.loads((root / "inference_metadata.json").read_text())
    document["pipeline"]["workflow"]["inputs"]["request.rows"] = {
        "contract": contract("int64", "picked"),
        "role": {"kind": "runtime", "version": "1.0", "role": "row_selection"},
        "source": {"kind": "request"},
    }
    (root / "inference_metadata.json").write_text(json.dumps(document))
    return Engine.from_dir(root)


def test_row_selection_regathers_the_adapter_context(tmp_path):
    engine = _lora_with_row_selection(tmp_path)
    request = lora_request([[0, -1], [1, -1]], [1, 1], [[1.0, 0.0], [1.0, 0.0]], [True, True])
    plain = engine.run(inputs={**request, "request.rows": np.array([0, 1], np.int64)})
    plain = plain.outputs["result"]
    # Row 0 now takes row 1's adapters and row 1 takes row 0's; the activations stay put.
    swapped = engine.run(inputs={**request, "request.rows": np.array([1, 0], np.int64)})
    x = request["activations"].astype(np.float64)
    red = np.array([1.0, 2.0]) * x[1, 0]  # row 1 with adapter 0 (red): B (A x)
    peft = np.array([0.5, 0.25]) * (x[0, 0] - x[0, 1])  # row 0 with adapter 1 (peft)
    np.testing.assert_allclose(swapped.outputs["result"], np.stack([x[0] + peft, x[1] + red]))
    assert not np.allclose(plain, swapped.outputs["result"])


def test_row_selection_outside_the_request_is_refused(tmp_path):
    engine = _lora_with_row_selection(tmp_path)
    request = lora_request([[0, -1], [1, -1]], [1, 1], [[1.0, 0.0], [1.0, 0.0]], [True, True])
    with pytest.raises(RunError) as caught:
        engine.run(inputs={**request, "request.rows": np.array([0, 2], np.int64)})
    assert caught.value.code == "G87" and "row 2" in caught.value.message
