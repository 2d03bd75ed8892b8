"""Walking the step tree of a workflow (the nested steps of sequences, loops and branches)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from .model import Step


def child_steps(step: Step) -> tuple[Step, ...]:
    """The steps nested directly in ``step``: a sequence's steps, a loop's setup then body, a
    branch's cases then its default."""
    kind = step.kind
    if kind == "sequence":
        return step.steps
    if kind == "loop":
        return (*step.setup, *step.steps)
    if kind == "branch":
        return (*step.cases.values(), *((step.default,) if step.default is not None else ()))
    return ()


def all_steps(steps: Iterable[Step]) -> Iterator[Step]:
    """Every step, nested ones included, in document order (a step before its children)."""
    for step in steps:
        yield step
        yield from all_steps(child_steps(step))


def invocations(steps: Iterable[Step], component: str) -> Iterator:
    """The invoke steps of ``component`` anywhere in ``steps`` (document order)."""
    for step in all_steps(steps):
        if step.kind == "invoke" and step.component == component:
            yield step
