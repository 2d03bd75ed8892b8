"""The ONNX Runtime executor: one InferenceSession per component, created once at load.

Sessions keep ONNX Runtime's default intra-op thread pool (docs/runtime.md, "Speed", gives
what one thread instead does to a decode step on a quiet and on a busy machine).

Sessions are created on the requested provider alone, with the Python wrapper's
retry-on-another-provider off from the start (``enable_fallback=0``): a session that cannot be
created is refused (``C83``) and nothing is printed or retried on the CPU. ONNX Runtime's own
logger is limited to fatal messages: every error it reports is reported by this runtime, with a
code (``C83`` at load, ``C86`` when a run fails).
"""

from __future__ import annotations

from pathlib import Path

import onnxruntime as ort

from ..counters import Counters
from ..errors import ReferenceRuntimeError, RunError
from ..package.artifacts import load_model
from .base import Session

PROVIDERS = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider"}


class OrtExecutor:
    name = "ort"

    def __init__(self, device: str, counters: Counters):
        provider = PROVIDERS.get(device)
        if provider is None:
            raise ReferenceRuntimeError(
                f"unknown device {device!r} for the ort executor",
                code="H89",
                hint="Use device='cpu' or device='cuda'.",
            )
        if provider not in ort.get_available_providers():
            raise ReferenceRuntimeError(
                f"device {device!r} was requested but ONNX Runtime has no {provider} here "
                f"(available: {', '.join(ort.get_available_providers())})",
                code="H89",
                hint="Install the `cuda` extra (onnxruntime-gpu) on a machine with a GPU, or "
                "use device='cpu'. The runtime never falls back to another device.",
            )
        self.device = device
        self.provider = provider
        self.counters = counters

    def load(self, component: str, artifact: Path) -> OrtSession:
        options = ort.SessionOptions()
        options.log_severity_level = 4  # fatal only: the errors are ours to report
        try:
            if artifact.name.endswith(".textproto"):
                source = load_model(artifact, external_data=True).SerializeToString()
            else:
                source = str(artifact)
            # Without enable_fallback=0 the wrapper prints an "EP Error ... Falling back"
            # banner to stdout and retries on the CPU provider when creation fails (and later
            # runs would retry the same way); the runtime never substitutes a provider.
            session = ort.InferenceSession(
                source, options, providers=[self.provider], enable_fallback=0
            )
        except Exception as exc:
            raise ReferenceRuntimeError(
                f"ONNX Runtime cannot load component {component!r} ({artifact.name}): "
                f"{str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}",
                code="C83",
                hint="Check the graph with onnx.checker, or run it with --executor native.",
            ) from exc
        if self.provider not in session.get_providers():  # never another provider instead
            raise ReferenceRuntimeError(
                f"ONNX Runtime created component {component!r} without {self.provider} "
                f"(it has {', '.join(session.get_providers())})",
                code="H89",
                hint="Check the ONNX Runtime installation for this device, or use device='cpu'.",
            )
        self.counters.add("sessions_created", self.name)
        return OrtSession(component, session)


class OrtSession(Session):
    """One component's InferenceSession.

    Runs go straight to the session's native binding: the interpreter has already checked
    every feed against the component's declared contracts, so the Python wrapper's second
    pass over the feed names (and its provider-fallback retry, which is switched off) would
    only add per-call cost. ONNX Runtime itself still validates names, types and shapes.
    """

    executor = "ort"

    def __init__(self, component: str, session: ort.InferenceSession):
        self.component = component
        self.session = session
        native = getattr(session, "_sess", None)
        # binding(output names, feeds, run options) -> outputs in order
        self.binding = native.run if native is not None else session.run

    def run(self, inputs, outputs):
        return dict(zip(outputs, self.run_positional(inputs, outputs), strict=True))

    def run_positional(self, inputs, outputs) -> list:
        """The outputs named by ``outputs``, in that order."""
        try:
            return self.binding(outputs, inputs, None)
        except Exception as exc:
            raise self.failure(exc) from exc

    def failure(self, exc: Exception) -> RunError:
        """What a failed run is reported as."""
        return RunError(
            "C86",
            f"component {self.component!r} failed in ONNX Runtime: "
            f"{str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}",
            hint="The inputs passed every declared contract; check the graph itself.",
        )
