"""Runtimes under test: in-process adapters and the JSON-lines subprocess transport.

``--runtime`` takes ``reference`` (the reference runtime, ONNX Runtime executor),
``reference:native`` (its native executor), ``python:MODULE:FACTORY`` (a factory returning an
object implementing conformance.protocol.Runtime) or ``exec:COMMAND`` (a process speaking the
JSON-lines protocol on stdin/stdout).
"""

from __future__ import annotations

import importlib
import shlex

from ..protocol import Runtime


def open_runtime(spec: str) -> Runtime:
    if spec in ("reference", "reference:ort"):
        from .reference import ReferenceRuntime

        return ReferenceRuntime("ort")
    if spec == "reference:native":
        from .reference import ReferenceRuntime

        return ReferenceRuntime("native")
    if spec.startswith("python:"):
        _, module, factory = spec.split(":", 2)
        return getattr(importlib.import_module(module), factory)()
    if spec.startswith("exec:"):
        from .subprocess import SubprocessRuntime

        return SubprocessRuntime(shlex.split(spec[len("exec:") :]))
    raise ValueError(
        f"unknown runtime {spec!r}: use reference, reference:native, python:MODULE:FACTORY or "
        "exec:COMMAND"
    )
