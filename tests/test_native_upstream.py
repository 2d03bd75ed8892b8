"""The native executor against ONNX Runtime on the upstream packages: every component graph on
inputs captured from real workflow runs, and every package end to end."""

from __future__ import annotations

import numpy as np
import pytest

from reference_runtime import Engine
from reference_runtime.executors.ort import OrtSession
from reference_runtime.package.model import OnnxImplementation

# Float outputs may differ by the order of floating-point operations between kernels.
RTOL, ATOL = 1e-4, 1e-5


def _grammar():
    table = np.zeros((2, 32), np.int64)
    table[0, 31] = 1
    table[1, :] = -1
    table[1, 9] = 0
    return table


def _speculative(rows):
    return {
        "grammar.initial_state": np.zeros(rows, np.int64),
        "grammar.transition_table": _grammar(),
        "telemetry.draft_ms": np.ones(rows, np.float32),
        "telemetry.target_ms": np.ones(rows, np.float32),
        "verifier.past_key_values.0.key": np.zeros((rows, 2, 0, 8), np.float32),
        "verifier.past_key_values.0.value": np.zeros((rows, 4, 0, 4), np.float32),
    }


def _selection():
    return {
        "activations": np.array([[1.0, 2.0], [3.0, 4.0]], np.float32),
        "request.adapter_segments": np.array([[0, -1], [1, 0]]),
        "request.adapter_counts": np.array([1, 2]),
        "request.adapter_scales": np.array([[1.0, 0.0], [0.5, 1.0]], np.float32),
        "request.active": np.array([True, True]),
    }


REQUESTS = {
    "decoder": [
        {"prompt": [[1, 2, 3]], "max_new_tokens": 4},
        {"prompt": [[1, 2, 3], [4, 5, 6]], "max_new_tokens": 3, "greedy": False, "seed": 7,
         "temperature": 0.8, "top_k": 20, "inputs": {"eos_ids": [[127], [127]]}},
    ],
    "static_cache": [
        {"prompt": [[1, 2], [3, 4]],
         "inputs": {"write_indices": np.array([0, 4]), "active": np.array([True, False])}},
    ],
    "diffusion": [
        {"prompt": [[1, 2, 3], [4, 5, 6]], "max_new_tokens": 3,
         "inputs": {"noise": np.random.default_rng(0).standard_normal((2, 4, 2, 3)).astype(np.float32)}},
    ],
    "codec": [{"inputs": {"request.waveform": np.linspace(-1, 1, 16, dtype=np.float32).reshape(1, 1, 16)}}],
    "adapter": [{"inputs": _selection()}],
    "speculative": [
        {"prompt": [[5, 6, 7, 8]], "max_new_tokens": 5, "inputs": _speculative(1)},
        {"prompt": [[5, 6, 7, 8], [1, 2, 31, 4]], "max_new_tokens": 5, "inputs": _speculative(2)},
    ],
    "speech_wav": [{"prompt": [[2, 10, 20, 3], [5, 5, 5, 5]]}],
}  # fmt: skip


def assert_same(native, reference, what: str) -> None:
    if isinstance(reference, list):
        assert isinstance(native, list) and len(native) == len(reference), what
        for r, (a, b) in enumerate(zip(native, reference, strict=True)):
            if b is None:
                assert a is None, f"{what} row {r}"
            else:
                assert_same(a, b, f"{what} row {r}")
        return
    native, reference = np.asarray(native), np.asarray(reference)
    assert native.dtype == reference.dtype, f"{what}: dtype {native.dtype} vs {reference.dtype}"
    assert native.shape == reference.shape, f"{what}: shape {native.shape} vs {reference.shape}"
    if reference.dtype.kind in "fc":
        np.testing.assert_allclose(native, reference, rtol=RTOL, atol=ATOL, err_msg=what)
    else:
        np.testing.assert_array_equal(native, reference, err_msg=what)


def capture(engine: Engine, requests) -> dict[str, list]:
    """Every ORT component call made while running ``requests``: name -> [(inputs, outputs,
    results)]. Every call an OrtSession makes goes through its ``binding``; the count is
    checked against the engine's own invocation counters, so a capture that missed calls fails."""
    calls: dict[str, list] = {}
    for name, session in engine._sessions.items():
        if isinstance(session, OrtSession):
            original = session.binding

            def spy(outputs, inputs, options, _name=name, _run=original):
                results = _run(outputs, inputs, options)
                named = dict(zip(outputs, results, strict=True))
                calls.setdefault(_name, []).append((dict(inputs), list(outputs), named))
                return results

            session.binding = spy
    before = engine.counters["invocations"]
    for request in requests:
        engine.run(**request)
    after = engine.counters["invocations"]
    ran = sum(n.get("ort", 0) for n in after.values()) - sum(
        n.get("ort", 0) for n in before.values()
    )
    assert sum(len(records) for records in calls.values()) == ran
    return calls


@pytest.mark.parametrize("name", sorted(REQUESTS))
def test_every_component_matches_onnx_runtime(upstream_dir, name):
    reference = Engine.from_dir(upstream_dir / name, executor="ort")
    calls = capture(reference, REQUESTS[name])
    native = Engine.from_dir(upstream_dir / name, executor="native")
    components = reference.package.metadata.workflow.components
    onnx_names = {
        n for n, c in components.items() if isinstance(c.implementation, OnnxImplementation)
    }
    assert set(calls) <= onnx_names
    for component, records in sorted(calls.items()):
        session = native._sessions[component]
        for i, (inputs, outputs, expected) in enumerate(records):
            got = session.run(inputs, outputs)
            for port in outputs:
                assert_same(got[port], expected[port], f"{name}/{component} call {i} {port}")


@pytest.mark.parametrize("name", sorted(REQUESTS))
def test_packages_run_natively_like_onnx_runtime(upstream_dir, name):
    reference = Engine.from_dir(upstream_dir / name, executor="ort")
    native = Engine.from_dir(upstream_dir / name, executor="native")
    for request in REQUESTS[name]:
        want, got = reference.run(**request), native.run(**request)
        assert got.tokens == want.tokens
        assert got.finish_reasons == want.finish_reasons
        assert set(got.outputs) == set(want.outputs)
        for output in want.outputs:
            assert_same(got.outputs[output], want.outputs[output], f"{name}/{output}")
    counters = native.counters
    components = native.package.metadata.workflow.components
    n_onnx = sum(isinstance(c.implementation, OnnxImplementation) for c in components.values())
    # No ONNX Runtime session under the native executor; one native session per component.
    assert counters["sessions_created"] == {"native": n_onnx}
    for component, by_executor in counters["invocations"].items():
        assert "ort" not in by_executor, component
