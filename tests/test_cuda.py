"""CUDA: the native executor on CuPy and ONNX Runtime's CUDA provider, against the CPU results,
with residency counters (a ratchet: device values cross to the host only where the host must
read them). Every test skips, with the reason, where no GPU is usable."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from conformance import goldens
from conformance.cases.run_cases import execute
from conformance.runtimes.reference import ReferenceRuntime
from fixtures import package_path
from fixtures.generators import RUN_CASES
from reference_runtime import Engine
from tests.conftest import UPSTREAM


def _cupy_gpu() -> str | None:
    """Why CuPy on a GPU is unusable here (None when it is usable)."""
    try:
        import cupy
    except ImportError:
        return "CuPy is not installed (the `cuda` extra)"
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "no CUDA device is visible"
    except Exception as exc:  # CUDA driver missing or broken
        return f"CUDA is unusable: {exc}"
    return None


NO_CUPY = _cupy_gpu()
needs_cupy = pytest.mark.skipif(NO_CUPY is not None, reason=str(NO_CUPY))
needs_ort_cuda = pytest.mark.skipif(
    "CUDAExecutionProvider" not in ort.get_available_providers(),
    reason="onnxruntime has no CUDAExecutionProvider here (the `cuda` extra on a GPU machine)",
)


@needs_cupy
@pytest.mark.parametrize("case", RUN_CASES, ids=lambda c: c.id)
def test_native_cuda_results_equal_the_goldens(case):
    results = execute(ReferenceRuntime("native", "cuda"), case)
    problems = goldens.differences(goldens.load(case.id), results)
    assert not problems, problems


@needs_cupy
def test_kv_stays_on_the_device_across_decode_steps():
    engine = Engine.from_dir(package_path("genai_decoder_gqa"), executor="native", device="cuda")
    steps = 16
    result = engine.run(prompt=[[5, 6, 7]], max_new_tokens=steps, stop_on_eos=False)
    assert len(result.tokens[0]) == steps
    moved = engine.counters["materialisations"]
    # The host reads one thing per step: the logits the token policy selects from. The KV
    # (2 cells per layer, 2 layers) never comes back, and nothing else does.
    assert moved["device_to_host"] == steps  # the logits each policy step reads
    # Per decode call: input ids, attention mask and position ids go up; the past KV goes up
    # once, empty, at the prefill.
    assert moved["host_to_device"] == 3 * (steps + 1) + 4
    cpu = Engine.from_dir(package_path("genai_decoder_gqa"), executor="native")
    assert cpu.run(prompt=[[5, 6, 7]], max_new_tokens=steps, stop_on_eos=False).tokens == (
        result.tokens
    )
    assert set(engine.counters["sessions_created"]) == {"native"}


@needs_cupy
@pytest.mark.skipif(not UPSTREAM.is_dir(), reason="shared upstream fixtures are absent")
@pytest.mark.parametrize("name", ["decoder"])
def test_upstream_packages_on_cuda_give_the_cpu_tokens(name):
    prompt = np.array([[1, 2, 3, 4], [5, 6, 7, 8]], dtype=np.int64)
    want = Engine.from_dir(UPSTREAM / name, executor="ort").run(prompt=prompt, max_new_tokens=8)
    got = Engine.from_dir(UPSTREAM / name, executor="native", device="cuda").run(
        prompt=prompt, max_new_tokens=8
    )
    assert got.tokens == want.tokens


@needs_ort_cuda
@pytest.mark.parametrize("name", ["genai_decoder", "arithmetic_decoder"])
def test_onnxruntime_cuda_gives_the_cpu_tokens(name):
    prompt = [[3, 1, 4], [1, 5, 9]]
    cpu = Engine.from_dir(package_path(name)).run(prompt=prompt, max_new_tokens=6)
    gpu = Engine.from_dir(package_path(name), device="cuda").run(prompt=prompt, max_new_tokens=6)
    assert gpu.tokens == cpu.tokens


def test_host_reads_of_device_values_are_counted():
    from reference_runtime.arrays import to_host
    from reference_runtime.counters import Counters

    class DeviceValue:  # what the host sees of a CuPy array: .get() copies it back
        def __init__(self, array):
            self.array = array

        def get(self):
            return self.array.copy()

    counters = Counters()
    host = np.arange(3)
    assert to_host(host, counters) is host  # host arrays pass through, uncounted
    back = to_host(DeviceValue(host), counters)
    assert back.tolist() == [0, 1, 2] and back is not host
    assert counters.snapshot()["materialisations"] == {"host_to_device": 0, "device_to_host": 1}


@needs_cupy
def test_serving_on_cuda_equals_the_cpu_solo_runs():
    """Continuous batching on the device: each served request equals its CPU solo run."""
    requests = [
        {"prompt": [5, 6, 7, 8, 9], "max_new_tokens": 5},
        {"prompt": [10], "max_new_tokens": 5, "arrival": 1},
        {"prompt": [11, 12], "max_new_tokens": 5, "arrival": 2},
    ]
    cpu = Engine.from_dir(package_path("genai_decoder"), executor="native")
    gpu = Engine.from_dir(package_path("genai_decoder"), executor="native", device="cuda")
    served = {s.index: s.result.tokens[0] for s in gpu.serve(requests, slots=2)}
    for i, request in enumerate(requests):
        solo = cpu.run(prompt=[request["prompt"]], max_new_tokens=5).tokens[0]
        assert served[i] == solo
