"""Executors beneath the interpreter: each runs components, none knows about workflows.

:func:`load_sessions` gives every component of a package its session, chosen by what the
component declares: an ONNX graph runs on the requested ONNX executor (ONNX Runtime or the
native one, never the other), a ``binding`` component keyed to a runtime contract on that
contract's executor, a plain ``binding`` component copies its ports, an ``adapter`` component
runs on its ABI's executor.
"""

from __future__ import annotations

from ..counters import Counters
from ..package.model import AdapterImplementation, BindingImplementation, OnnxImplementation
from ..package.runtime_contracts import BATCH_CONTRACT
from .adapters import build_adapter_session
from .base import BindingCopy, ComponentSession
from .batching import ContinuousBatch
from .decoding import build_contract_session
from .native import NativeExecutor
from .ort import OrtExecutor

ONNX_EXECUTORS = {"ort": OrtExecutor, "native": NativeExecutor}


def onnx_executor(executor: str, device: str, counters: Counters):
    """The executor every ONNX graph of the package runs on."""
    return ONNX_EXECUTORS[executor](device, counters)


def load_sessions(package, executor: str, device: str, counters: Counters) -> dict:
    """Component name -> :class:`ComponentSession`, each loaded once."""
    graphs = onnx_executor(executor, device, counters)
    sessions: dict[str, ComponentSession] = {}
    for name, comp in package.metadata.workflow.components.items():
        impl = comp.implementation
        if isinstance(impl, OnnxImplementation):
            sessions[name] = graphs.load(name, package.resolve(impl.artifact))
        elif isinstance(impl, BindingImplementation) and comp.contract is not None:
            if comp.contract.id == BATCH_CONTRACT:
                sessions[name] = ContinuousBatch(name, comp.contract.parameters)
                continue
            sessions[name] = build_contract_session(package, name, comp, graphs, sessions)
        elif isinstance(impl, BindingImplementation):
            sessions[name] = BindingCopy(name)
        elif isinstance(impl, AdapterImplementation):
            sessions[name] = build_adapter_session(package, name, comp, counters)
    return sessions
