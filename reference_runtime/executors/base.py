"""The component seam: an executor loads a component once and runs it many times.

The interpreter sees only :class:`ComponentSession`: ``run(inputs, outputs)`` takes the bound
input ports (host numpy arrays) and the names of the output ports to produce, and returns them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import numpy as np


class ComponentSession(Protocol):
    executor: str  # the name counted in engine.counters["invocations"]

    def run(
        self, inputs: Mapping[str, np.ndarray], outputs: Sequence[str]
    ) -> dict[str, np.ndarray]: ...


class BindingCopy:
    """A ``binding`` component without a contract: each output port copies the input port of
    the same name."""

    executor = "binding"

    def __init__(self, component: str):
        self.component = component

    def run(self, inputs, outputs):
        from ..errors import RunError

        missing = [port for port in outputs if port not in inputs]
        if missing:
            raise RunError(
                "H84",
                f"binding component {self.component!r} has no input for output port(s) "
                f"{', '.join(missing)}",
            )
        return {port: inputs[port] for port in outputs}
