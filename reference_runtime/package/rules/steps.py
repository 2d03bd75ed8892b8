"""D rules: steps, SSA visibility and invoke ports.

One walk over the steps in document order, with a scope chain that mirrors the format's
visibility rules (docs/format.md, "Values and scopes (SSA)"):

- workflow inputs and ``present_as`` flags are global;
- invoke outputs are visible from the next step on, in the current scope;
- a loop's ``setup`` runs in the enclosing scope; its body is a child scope where the carried
  cells and the iteration value are visible; body values never leave the loop; after the loop
  each carried cell name holds its final value;
- each branch case is a child scope; only phi outputs leave it;
- a ``sequence`` does not open a scope.

This module drives the walk (:class:`Walk`); each kind of step is checked by its own module:
``invokes``, ``loops``, ``branches``, ``emits``. Definitions and reads go through
``scope.Names``. The walk records what later rule families need (``flow.Flow``): invocation
counts, emits, loops and the components they invoke, the features that derive capabilities,
and the root scope.
"""

from __future__ import annotations

from collections.abc import Iterable

from ...errors import DocPath, format_location
from ..model import BranchStep, EmitStep, InvokeStep, LoopStep, SequenceStep
from ..visit import StepAt, child_steps_with_paths, steps_with_paths
from .branches import check_branch
from .context import Ctx, VType
from .emits import check_emit, check_per_row_outputs
from .flow import Flow, LoopInfo
from .invokes import check_invoke
from .loops import check_loop
from .scope import BOOL_SCALAR, Def, Names, Scope

STEPS: DocPath = ("pipeline", "workflow", "steps")


class Walk:
    """The state of one walk: the scope bookkeeping, the enclosing loops, what it records."""

    def __init__(self, ctx: Ctx):
        self.ctx = ctx
        self.wf = ctx.workflow
        self.flow = Flow(root=Scope())
        self.names = Names(ctx)
        self.loop_stack: list[LoopInfo] = []  # the loops around the step being walked
        self.per_row_outputs: dict[str, DocPath] = {}  # outputs with per-row emits, first site

    def run(self) -> Flow:
        self.define_inputs()
        self.names.collect(steps_with_paths(self.wf.steps, STEPS))
        self.visit(steps_with_paths(self.wf.steps, STEPS), self.flow.root, frozenset())
        check_per_row_outputs(self)
        return self.flow

    def define_inputs(self) -> None:
        """The workflow inputs, then their presence flags (B12: a flag is a fresh name)."""
        root, names = self.flow.root, self.names
        base = ("pipeline", "workflow", "inputs")
        for name, inp in self.wf.inputs.items():
            names.declare(root, Def(name, VType.of_contract(inp.contract), (*base, name), "input"))
        for name, inp in self.wf.inputs.items():
            flag = inp.present_as
            if not flag:
                continue
            path = (*base, name, "present_as")
            if flag in root.defs:
                self.ctx.add(
                    "B12",
                    path,
                    f"present_as name {flag!r} clashes with another value "
                    f"({format_location(root.defs[flag].path)})",
                )
                continue
            root.defs[name].guard = flag
            names.declare(root, Def(flag, BOOL_SCALAR, path, "presence"))

    def visit(self, steps: Iterable[StepAt], scope: Scope, guards: frozenset) -> None:
        """Check ``steps`` in order, in ``scope``; ``guards`` are the presence flags known true."""
        for step, here in steps:
            self.step(step, scope, here, guards)

    def step(self, step, scope: Scope, here: DocPath, guards: frozenset) -> None:
        if isinstance(step, InvokeStep):
            check_invoke(self, step, scope, here, guards)
        elif isinstance(step, LoopStep):
            check_loop(self, step, scope, here, guards)
        elif isinstance(step, BranchStep):
            check_branch(self, step, scope, here, guards)
        elif isinstance(step, EmitStep):
            check_emit(self, step, scope, here, guards)
        elif isinstance(step, SequenceStep):
            self.visit(child_steps_with_paths(step, here), scope, guards)


def check(ctx: Ctx) -> None:
    if ctx.workflow is None:
        return
    ctx.flow = Walk(ctx).run()
