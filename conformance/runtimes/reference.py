"""The reference runtime, in process, behind the runner protocol.

It declares the executors it can run here (``describe()["executors"]``): ``ort`` and
``native`` on the CPU, plus ``ort:cuda`` / ``native:cuda`` where ONNX Runtime's CUDA provider
or CuPy with a visible GPU is available. ``load(package, executor=...)`` takes one of them.
"""

from __future__ import annotations

import contextlib
import functools

import onnx
import onnxruntime

import reference_runtime
from reference_runtime import Engine, PackageError, ReferenceRuntimeError, UsageError

from ..protocol import FEATURES, PROTOCOL_VERSION, SAMPLING_KEYWORDS, Refused


@functools.cache
def available_executors() -> tuple[str, ...]:
    """The executors (``executor`` or ``executor:device``) usable on this machine."""
    found = ["ort", "native"]
    from reference_runtime.executors.native import array_module
    from reference_runtime.executors.ort import PROVIDERS

    if PROVIDERS["cuda"] in onnxruntime.get_available_providers():
        found.append("ort:cuda")
    try:
        array_module("cuda")
    except ReferenceRuntimeError:
        pass
    else:
        found.append("native:cuda")
    return tuple(found)


@contextlib.contextmanager
def _refused(stage: str):
    """The runtime's coded errors as the protocol's refusals."""
    try:
        yield
    except ReferenceRuntimeError as exc:
        raise Refused(stage, exc.message, exc.code) from exc


class ReferenceRuntime:
    """``compiled=False`` runs the plain interpreter (the specification path)."""

    def __init__(self, executor: str = "ort", device: str = "cpu", *, compiled: bool = True):
        self.executor = executor
        self.device = device
        self.compiled = compiled

    def describe(self) -> dict:
        return {
            "name": f"reference:{self.executor}" + ("" if self.compiled else ":plain"),
            "protocol": PROTOCOL_VERSION,
            "version": getattr(reference_runtime, "__version__", "0.1.0"),
            "features": [
                f for f in FEATURES if f != "native_executor" or self.executor == "native"
            ],
            "versions": {"onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__},
            "executors": list(available_executors()),
        }

    def load(self, package_dir: str, executor: str | None = None, options: dict | None = None):
        """``options``: ``{"kv_budget_bytes": N}`` (the ``kv_admission`` feature), ``{"draft":
        folder}`` (``attached_draft``)."""
        name, device = self.executor, self.device
        if executor is not None:
            name, _, device = executor.partition(":")
            device = device or "cpu"
        options = options or {}
        try:
            return Engine.from_dir(
                package_dir,
                name,
                device,
                compiled=self.compiled,
                kv_budget_bytes=options.get("kv_budget_bytes"),
                draft=options.get("draft"),
            )
        except PackageError as exc:
            violations = [(v.code, v.location) for v in exc.violations]
            raise Refused("load", str(exc), ",".join(exc.codes), violations) from exc
        except (ReferenceRuntimeError, UsageError) as exc:
            raise Refused("load", exc.message, exc.code) from exc

    def run(self, handle: Engine, request: dict) -> dict:
        try:
            result = handle.run(
                prompt=request.get("prompt"),
                inputs=request.get("inputs") or {},
                max_new_tokens=request.get("max_new_tokens"),
                seed=request.get("seed"),
                greedy=request.get("greedy", True),
                **{k: request.get(k) for k in SAMPLING_KEYWORDS},
                stop_on_eos=request.get("stop_on_eos", True),
                session_id=request.get("session_id"),
                overrides=request.get("overrides"),
            )
        except ReferenceRuntimeError as exc:
            raise Refused("run", exc.message, exc.code) from exc
        return {
            "outputs": result.outputs,
            "tokens": result.tokens,
            "finish_reasons": result.finish_reasons,
            "events": result.events,
            "diagnostics": {"counters": handle.counters},
        }

    def serve(self, handle: Engine, requests: list[dict], slots: int) -> list[dict]:
        """The ``continuous_batching`` feature: ``Engine.serve``."""
        keys = ("prompt", "inputs", "max_new_tokens", "seed", "stop_on_eos", "arrival",
                *SAMPLING_KEYWORDS)  # fmt: skip
        served, trace = [], []
        try:
            for request in requests:
                if request.get("session_id") is not None:
                    raise Refused("run", "a served request has no session", "H75")
            calls = [
                {
                    **{k: request[k] for k in keys if request.get(k) is not None},
                    "greedy": request.get("greedy", True),
                }
                for request in requests
            ]
            for item in handle.serve(calls, slots=slots, trace=trace):
                served.append(
                    {
                        "index": item.index,
                        "admitted": item.admitted,
                        "finished": item.finished,
                        "slot": item.slot,
                        "tokens": item.result.tokens[0] if item.result.tokens else None,
                        "finish_reason": (
                            item.result.finish_reasons[0] if item.result.finish_reasons else None
                        ),
                        "outputs": item.result.outputs,
                        "events": item.result.events,
                    }
                )
        except ReferenceRuntimeError as exc:
            raise Refused("run", exc.message, exc.code) from exc
        diagnostics = {
            "counters": {"batching": dict(handle.counters.get("batching", {}))},
            "batch_trace": [record.to_json() for record in trace],
        }
        return [{**entry, "diagnostics": diagnostics} for entry in served]

    def create_session(self, handle: Engine) -> str:
        with _refused("run"):
            return handle.create_session()

    def reset_session(self, handle: Engine, sid: str) -> None:
        with _refused("run"):
            handle.reset_session(sid)

    def close_session(self, handle: Engine, sid: str) -> None:
        with _refused("run"):
            handle.close_session(sid)

    def close(self, handle) -> None:
        return None


def factory() -> ReferenceRuntime:
    """``--runtime python:conformance.runtimes.reference:factory``."""
    return ReferenceRuntime()
