"""Deliberate faults, for proving that the conformance suite catches them.

Setting ``REFERENCE_RUNTIME_FAULT`` to one of ``FAULTS`` makes the runtime misbehave in exactly
that way; unset (always, outside the suite's own meta-test) nothing changes. Each fault is a
plausible runtime bug; tests/test_conformance_faults.py asserts that certification fails for
every one of them, with a case that explains why.
"""

from __future__ import annotations

import os

FAULTS = {
    "emit_off_by_one": "per-row emits drop the last entry of every chunk they publish",
    "skip_inactive_merge": "inactive rows are not merged back after a loop body",
    "predicate_after_body": "the loop predicate is tested after the body instead of before",
    "session_not_saved": "session-scoped cells are not stored after a run",
    "native_falls_back_to_ort": "executor='native' silently runs ONNX Runtime",
    "wrong_default_broadcast": "literal defaults are not broadcast to the bound batch",
}
ENVIRONMENT_VARIABLE = "REFERENCE_RUNTIME_FAULT"


def active(fault: str) -> bool:
    return os.environ.get(ENVIRONMENT_VARIABLE) == fault
