"""Deliberate faults, injected into the reference runtime from outside, to prove that the
conformance suite catches plausible runtime bugs (``tests/test_conformance_faults.py``,
``tools/fault_kill_count.py``).

Nothing in ``reference_runtime`` knows about them: each fault replaces one function of the
runtime for the duration of a ``with injected(fault):`` block (``unittest.mock.patch``). The
functions are those the plain interpreter calls, so faults are certified under the
``reference:plain`` / ``reference:native:plain`` runtimes (``Engine.from_dir(...,
compiled=False)``).
"""

from __future__ import annotations

import contextlib
from unittest import mock

import numpy as np

from reference_runtime import executors
from reference_runtime.executors.ort import OrtExecutor
from reference_runtime.sessions import SessionStore
from reference_runtime.workflow import cells
from reference_runtime.workflow.inputs import InputBinder
from reference_runtime.workflow.interpreter import Interpreter
from reference_runtime.workflow.outputs import OutputStore

FAULTS = {
    "emit_off_by_one": "per-row emits drop the last entry of every chunk they publish",
    "skip_inactive_merge": "inactive rows are not merged back after a loop body",
    "predicate_after_body": "the loop predicate is tested after the body instead of before",
    "session_not_saved": "session-scoped cells are not stored after a run",
    "native_falls_back_to_ort": "executor='native' silently runs ONNX Runtime",
    "wrong_default_broadcast": "literal defaults are not broadcast to the bound batch",
}


def _off_by_one(original):
    def publish_row(self, step, streams, r, chunk, chunk_axis, where):
        cut = chunk_axis if chunk_axis is not None else chunk.ndim - 1
        chunk = np.take(chunk, np.arange(max(0, chunk.shape[cut] - 1)), axis=cut)
        return original(self, step, streams, r, chunk, chunk_axis, where)

    return publish_row


def _predicate_after_body(original):
    def predicate(self, step, frame, where, index):
        return None if index == 0 else original(self, step, frame, where, index)

    return predicate


def _native_runs_ort(original):
    def onnx_executor(executor, device, counters):
        if executor == "native":
            return OrtExecutor(device, counters)
        return original(executor, device, counters)

    return onnx_executor


def _unbroadcast(contract, symbols):
    if contract.rank == 0:
        return ()
    return tuple(d if isinstance(d, int) else 1 for d in contract.shape)


@contextlib.contextmanager
def injected(fault: str | None):
    """Run the block with ``fault`` injected (``None``: no fault)."""
    patches = []
    if fault == "emit_off_by_one":
        replaced = _off_by_one(OutputStore.publish_row)
        patches.append(mock.patch.object(OutputStore, "publish_row", replaced))
    elif fault == "skip_inactive_merge":
        keep = lambda name, cell, old, new, mask, where: new  # noqa: E731
        patches.append(mock.patch.object(cells, "merge_inactive", keep))
    elif fault == "predicate_after_body":
        replaced = _predicate_after_body(Interpreter.predicate)
        patches.append(mock.patch.object(Interpreter, "predicate", replaced))
    elif fault == "session_not_saved":
        patches.append(mock.patch.object(SessionStore, "save", lambda self, sid, values: None))
    elif fault == "native_falls_back_to_ort":
        replaced = _native_runs_ort(executors.onnx_executor)
        patches.append(mock.patch.object(executors, "onnx_executor", replaced))
    elif fault == "wrong_default_broadcast":
        patches.append(mock.patch.object(InputBinder, "resolved_shape", staticmethod(_unbroadcast)))
    elif fault is not None:
        raise KeyError(f"unknown fault {fault!r} (known: {', '.join(FAULTS)})")
    with contextlib.ExitStack() as stack:
        for patch in patches:
            stack.enter_context(patch)
        yield
