"""Values and where they are visible: the scope chain of the step walk.

A :class:`Scope` holds the values defined in one scope and sees its parents'. :class:`Names`
checks definitions and reads against the chain: a value is defined once (D29), read only where
it is visible (D29), and an optional input only inside a branch on its presence flag (B13).
Before the walk it notes every definition site of the steps (:meth:`Names.collect`), so that a
read can say whether its value is defined later, in a scope that has ended, or nowhere.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass

from ...errors import DocPath, format_location
from ..model import BranchStep, InvokeStep, LoopStep, SharedLayout
from ..visit import StepAt, step_parts
from .context import Ctx, VType, mismatch

BOOL_SCALAR = VType("bool", 0, (), SharedLayout(kind="shared"))


@dataclass
class Def:
    name: str
    vtype: VType
    path: DocPath
    origin: str  # input | presence | invoke | cell | iteration | phi
    guard: str | None = None  # the present_as flag that guards an optional input


class Scope:
    def __init__(self, parent: Scope | None = None, label: str = "workflow"):
        self.parent = parent
        self.label = label
        self.defs: dict[str, Def] = {}

    def lookup(self, name: str) -> Def | None:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.defs:
                return scope.defs[name]
            scope = scope.parent
        return None

    def names(self) -> list[str]:
        out: list[str] = []
        scope: Scope | None = self
        while scope is not None:
            out += list(scope.defs)
            scope = scope.parent
        return out


class Names:
    """Definitions and reads of workflow values, checked against the scope chain."""

    def __init__(self, ctx: Ctx):
        self.ctx = ctx
        self.ever: dict[str, Def] = {}  # every value defined so far, by name (the first)
        self.later: dict[str, DocPath] = {}  # every definition site of the steps, by name
        self.carriers: dict[str, DocPath] = {}  # the first loop carrying each cell
        self.setup_of: list[tuple[DocPath, set[str]]] = []  # loops whose setup is being walked

    # ------------------------------------------------------------------ definitions

    def declare(self, scope: Scope, d: Def) -> None:
        """Bind a global value (a workflow input or a presence flag), unchecked."""
        scope.defs[d.name] = d
        self.ever[d.name] = d

    def define(self, scope: Scope, d: Def) -> None:
        previous = scope.lookup(d.name)
        if previous is not None:
            self.ctx.add(
                "D29",
                d.path,
                f"value {d.name!r} is defined twice (first at {format_location(previous.path)}); "
                "workflow values are single-assignment",
                "Give the second definition a new name and read that name afterwards.",
            )
            return
        scope.defs[d.name] = d
        self.ever.setdefault(d.name, d)

    # ------------------------------------------------------------------ reads

    def use(self, scope: Scope, name: str, path: DocPath, guards: frozenset) -> Def | None:
        d = scope.lookup(name)
        if d is None:
            self.ctx.add("D29", path, self.undefined_message(name), self.hint(scope, name))
            return None
        if d.guard is not None and d.guard not in guards:
            self.ctx.add(
                "B13",
                path,
                f"optional input {name!r} is read outside a branch on its presence flag "
                f"{d.guard!r}",
            )
        return d

    def undefined_message(self, name: str) -> str:
        if name in self.ever:
            where = format_location(self.ever[name].path)
            return (
                f"{name!r} is not visible here: it is defined at {where}, in a scope that has ended"
            )
        if name in self.ctx.workflow.state:
            return self._cell_message(name)
        if name in self.later:
            return f"{name!r} is read before it is defined (at {format_location(self.later[name])})"
        return f"{name!r} is not defined anywhere in the workflow"

    def _cell_message(self, name: str) -> str:
        for loop_path, cells in reversed(self.setup_of):
            if name in cells:
                return (
                    f"cell {name!r} is not a value in the setup of the loop at "
                    f"{format_location(loop_path)}: setup runs before the carried cells "
                    "are bound (read the cell in the body)"
                )
        where = self.carriers.get(name)
        return f"cell {name!r} is not a value here: no enclosing loop carries it" + (
            f" (the loop at {format_location(where)} does; its final value is visible "
            "after that loop)"
            if where is not None
            else ""
        )

    @staticmethod
    def hint(scope: Scope, name: str) -> str:
        close = difflib.get_close_matches(name, scope.names(), n=1)
        if close:
            return f"did you mean {close[0]!r}? Define the value before this step."
        return "Define the value before this step, in a scope that reaches it."

    # ------------------------------------------------------------------ definition sites

    def collect(self, steps: Iterable[StepAt]) -> None:
        """Note every name the steps define (to tell a late definition from a missing one), in
        the order the values come to be: a loop's carried cells and iteration value after its
        setup and before its body, a branch's phi outputs after its cases."""
        for step, here in steps:
            if isinstance(step, InvokeStep):
                for port, value in step.outputs.items():
                    self.later.setdefault(value, (*here, "outputs", port))
            for part in step_parts(step, here):
                if isinstance(step, LoopStep) and part.key == "steps":
                    self._collect_loop(step, here)
                self.collect(part.children)
            if isinstance(step, BranchStep):
                for name in step.outputs:
                    self.later.setdefault(name, (*here, "outputs", name))

    def _collect_loop(self, step: LoopStep, here: DocPath) -> None:
        for carry in step.carried:
            self.carriers.setdefault(carry.cell, here)
        if step.iteration is not None:
            self.later.setdefault(step.iteration.value, (*here, "iteration", "value"))


def check_type(ctx: Ctx, code, path, actual: Def, expected: VType, what: str) -> None:
    """Report ``actual`` under ``code`` when its type does not fit ``expected``."""
    why = mismatch(actual.vtype, expected)
    if why:
        ctx.add(code, path, f"{what}: value {actual.name!r} is {actual.vtype.describe()} ({why})")
