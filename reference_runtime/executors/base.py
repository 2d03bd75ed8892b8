"""The component seam: an executor loads a component once and runs it many times.

The interpreter and the engine see every component through :class:`ComponentSession` and use
nothing else of it. :class:`Session` gives the members a session does not need their defaults;
every session type of the runtime derives from it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from ..errors import RunError


@dataclass(frozen=True)
class RunContext:
    """What every session is told before a request runs."""

    stop_on_eos: bool  # whether rows stop on end tokens
    session_id: str | None  # the conversation session, if any
    adapters: object | None = None  # the request's adapter selection (parameter overlays)


@runtime_checkable
class ComponentSession(Protocol):
    """One loaded component, as the interpreter and the engine use it."""

    # the name counted in engine.counters["invocations"] ("ort", "native", "binding", ...)
    executor: str
    # runs on host arrays: device inputs are copied to the host first (and counted)
    host_only: bool
    # the runtime contract this session executes (counted at dispatch), or None
    contract: str | None
    # a faster call ``binding(output names, feeds, None) -> outputs in that order``, or None;
    # what it raises is reported through ``failure``
    binding: Callable | None

    def run(
        self, inputs: Mapping[str, np.ndarray], outputs: Sequence[str]
    ) -> dict[str, np.ndarray]:
        """The output ports named by ``outputs``, from the bound input ports ``inputs``."""

    def failure(self, exc: Exception) -> RunError:
        """What an exception raised by ``binding`` is reported as."""

    def begin_run(self, context: RunContext) -> None:
        """Called on every session before each request."""

    def forget(self, session_id: str) -> None:
        """A conversation session was reset or closed: drop anything kept for it."""


class Session:
    """The defaults of :class:`ComponentSession`: no contract, no fast binding, runs on
    whatever arrays it gets, keeps nothing between requests."""

    executor = "session"
    host_only = False
    contract: str | None = None
    binding: Callable | None = None
    component = "?"

    def run(self, inputs, outputs):  # pragma: no cover - every session type defines it
        raise NotImplementedError

    def failure(self, exc: Exception) -> RunError:
        return RunError(
            "C86",
            f"component {self.component!r} failed ({self.executor}): "
            f"{str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}",
        )

    def begin_run(self, context: RunContext) -> None:
        return None

    def forget(self, session_id: str) -> None:
        return None


class BindingCopy(Session):
    """A ``binding`` component without a contract: each output port copies the input port of
    the same name."""

    executor = "binding"

    def __init__(self, component: str):
        self.component = component

    def run(self, inputs, outputs):
        missing = [port for port in outputs if port not in inputs]
        if missing:
            raise RunError(
                "H84",
                f"binding component {self.component!r} has no input for output port(s) "
                f"{', '.join(missing)}",
            )
        return {port: inputs[port] for port in outputs}
