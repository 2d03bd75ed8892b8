"""The component seam: an executor loads a component once and runs it many times.

The interpreter and the engine see every component through :class:`ComponentSession` and use
nothing else of it. :class:`Session` gives the members a session does not need their defaults;
every session type of the runtime derives from it.

Sessions are shared by every run of an engine, including runs on other threads, so they keep
no per-request state: what a request tells them (its adapter selection, whether rows stop on
end ids, its conversation session) is the :class:`RunContext` that ``current_run()`` returns
while the request runs (a context variable, so each thread sees its own request), and what a
session must remember within one run lives in that context's ``state``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from ..errors import RunError


@dataclass(frozen=True)
class RunContext:
    """What sessions are told about the request that is running."""

    stop_on_eos: bool = True  # whether rows stop on end tokens
    session_id: str | None = None  # the conversation session, if any
    adapters: object | None = None  # the request's adapter selection (parameter overlays)
    # what a session remembers within this run, under a key of its own
    state: dict = field(default_factory=dict, compare=False, repr=False)


_CURRENT: ContextVar[RunContext | None] = ContextVar("reference_runtime_run", default=None)


@contextlib.contextmanager
def running(context: RunContext) -> Iterator[RunContext]:
    """Make ``context`` the current run's for the calling thread while the block runs."""
    token = _CURRENT.set(context)
    try:
        yield context
    finally:
        _CURRENT.reset(token)


def current_run() -> RunContext:
    """The context of the request running on this thread; a session run outside any request
    (a component run on its own) gets a fresh default one."""
    context = _CURRENT.get()
    return RunContext() if context is None else context


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
