"""The native executor: ONNX ops of our own, written once against an array module (numpy on
``device="cpu"``, CuPy on ``device="cuda"``). It never creates an ONNX Runtime session and
never falls back to one: what it cannot run is refused when the component is loaded."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...counters import Counters
from ...errors import ReferenceRuntimeError
from ...package.artifacts import load_model
from ..base import Session
from .graph import Plan, plan_model


def array_module(device: str):
    if device == "cpu":
        return np
    try:
        import cupy
    except ImportError:
        raise ReferenceRuntimeError(
            "device 'cuda' was requested for the native executor but CuPy is not installed",
            code="H89",
            hint="Install the `cuda` extra (cupy-cuda12x) on a machine with an NVIDIA GPU, or "
            "use device='cpu'. The runtime never falls back to another device.",
        ) from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # no driver, no device
        count = 0
        reason = str(exc)
    else:
        reason = "no CUDA device is visible"
    if count == 0:
        raise ReferenceRuntimeError(
            f"device 'cuda' was requested but no GPU is usable here ({reason})",
            code="H89",
            hint="Use device='cpu' on this machine.",
        )
    return cupy


class NativeExecutor:
    name = "native"

    def __init__(self, device: str, counters: Counters):
        self.device = device
        self.counters = counters
        self.xp = array_module(device)

    def load(self, component: str, artifact: Path) -> NativeSession:
        model = load_model(artifact, external_data=True)
        plan, problems = plan_model(model, self.xp, cuda=self.device == "cuda")
        if problems:
            lines = [f"  node {p.node!r}: {p.op}: {p.reason}" for p in problems[:20]]
            more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
            raise ReferenceRuntimeError(
                f"the native executor cannot run component {component!r} ({artifact.name}):\n"
                + "\n".join(lines)
                + more,
                code="H90",
                hint="Run this package with --executor ort (executor='ort'); the native "
                "executor refuses what it does not implement instead of falling back.",
            )
        self.counters.add("sessions_created", self.name)
        return NativeSession(component, plan, self)


class NativeSession(Session):
    executor = "native"

    def __init__(self, component: str, plan: Plan, executor: NativeExecutor):
        self.component = component
        self.plan = plan
        self.xp = executor.xp
        self.counters = executor.counters
        self.on_device = executor.device == "cuda"

    def run(self, inputs, outputs):
        """Host inputs are copied to the device (counted); device values, and the outputs,
        stay there: the interpreter copies back only what the host must read."""
        feeds = dict(inputs)
        if self.on_device:
            for name, value in feeds.items():
                if isinstance(value, np.ndarray):
                    feeds[name] = self.xp.asarray(value)
                    self.counters.add("materialisations", "host_to_device")
        results = self.plan.run(feeds)
        return {name: results[name] for name in outputs}
