"""Semantic validation: one small module per rule family, run in dependency order.

``files`` loads the graphs the step rules compare ports against; ``steps`` walks the steps
(checking each kind in ``invokes``, ``loops``, ``branches`` and ``emits``, values and their
scopes in ``scope``) and records the value flow (``flow``) that the state, speculative, adapter
and admission rules read. ``catalogue`` is the rule table; ``enforcement`` finds where each
rule is enforced, for the generated ``docs/rules.md``.
"""

from __future__ import annotations

from . import (
    adapters,
    admission,
    batching,
    components,
    files,
    inputs,
    speculative,
    state,
    steps,
)
from .context import Ctx

CHECKS = (
    files.check,
    inputs.check,
    components.check,
    steps.check,
    components.check_after_steps,
    state.check,
    speculative.check,
    adapters.check,
    batching.check,
    admission.check,
)


def run_rules(ctx: Ctx) -> None:
    for check in CHECKS:
        check(ctx)
