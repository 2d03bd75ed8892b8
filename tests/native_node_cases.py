"""The ONNX backend node cases (built in memory by the installed onnx package), filtered to the
op types the native executor implements. Shared by the test and tools/native_node_report.py."""

from __future__ import annotations

import functools
import re
import warnings
from pathlib import Path

import numpy as np
import yaml

from reference_runtime.executors.native.registry import implemented

EXCLUSIONS_PATH = Path(__file__).with_name("native_node_exclusions.yaml")
# The corpus must not silently collapse (onnx 1.23 builds 1884 node cases in memory).
MIN_CORPUS = 1500


@functools.cache
def corpus() -> list:
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return list(load_model_tests(kind="node"))


def op_types(model) -> set[tuple[str, str]]:
    found = set()

    def visit(graph):
        for node in graph.node:
            found.add(("" if node.domain in ("", "ai.onnx") else node.domain, node.op_type))
            for attr in node.attribute:
                if attr.HasField("g"):
                    visit(attr.g)
                for sub in attr.graphs:
                    visit(sub)

    visit(model.graph)
    for function in model.functions:
        found.discard((function.domain, function.name))
    return found


def as_array(value):
    """A node case's datum as an array (cases store arrays, numpy scalars or TensorProtos);
    None for sequences, maps and optionals, which the native executor does not take."""
    import onnx
    from onnx import numpy_helper

    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, np.generic):
        return np.asarray(value)
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    return None


def data_sets(case) -> list[tuple[list, list]]:
    return [([as_array(v) for v in inputs], [as_array(v) for v in outputs])
            for inputs, outputs in case.data_sets]  # fmt: skip


def tensors_only(case) -> bool:
    return all(v is not None for inputs, outputs in data_sets(case) for v in (*inputs, *outputs))


@functools.cache
def applicable() -> list:
    """Cases whose every op type has a native kernel (at some version) and tensor data."""
    ops = set(implemented())
    return [c for c in corpus() if op_types(c.model) <= ops and tensors_only(c)]


@functools.cache
def _exclusions() -> dict:
    return yaml.safe_load(EXCLUSIONS_PATH.read_text()) or {}


def refused_patterns() -> dict[str, str]:
    """Pattern -> reason: cases refused at load by design."""
    return _exclusions().get("refused") or {}


def exclusions() -> dict[str, str]:
    """Case name -> reason: cases that fail for a stated reason."""
    return _exclusions().get("failing") or {}


def refusal_reason(name: str) -> str | None:
    for pattern, reason in refused_patterns().items():
        if re.fullmatch(pattern, name):
            return reason
    return None
