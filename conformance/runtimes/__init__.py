"""Runtimes under test: in-process adapters and the JSON-lines subprocess transport.

``--runtime`` takes ``reference`` (the reference runtime, ONNX Runtime executor),
``reference:native`` (its native executor), either with ``:plain`` appended (its plain
interpreter, the specification path, instead of the compiled fast path), ``python:MODULE:FACTORY`` (a factory returning an
object implementing conformance.protocol.Runtime) or ``exec:COMMAND`` (a process speaking the
JSON-lines protocol on stdin/stdout).
"""

from __future__ import annotations

import importlib
import shlex

from ..protocol import Runtime

REFERENCE_SPECS = ("reference", "reference:ort", "reference:native")


def open_runtime(spec: str) -> Runtime:
    base = spec.removesuffix(":plain")
    if base in REFERENCE_SPECS:
        from .reference import ReferenceRuntime

        executor = "native" if base == "reference:native" else "ort"
        return ReferenceRuntime(executor, compiled=base == spec)
    if spec.startswith("python:"):
        _, module, factory = spec.split(":", 2)
        return getattr(importlib.import_module(module), factory)()
    if spec.startswith("exec:"):
        from .subprocess import SubprocessRuntime

        return SubprocessRuntime(shlex.split(spec[len("exec:") :]))
    raise ValueError(
        f"unknown runtime {spec!r}: use reference, reference:native (either with :plain), "
        "python:MODULE:FACTORY or exec:COMMAND"
    )
