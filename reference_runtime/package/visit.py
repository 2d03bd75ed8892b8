"""Walking the step tree of a workflow: the one place that knows how steps nest.

A ``sequence`` holds its ``steps``; a ``loop`` its ``setup`` steps, then its body ``steps``; a
``branch`` its ``cases``, then its ``default`` (each case, and the default, is **one** step).
Every walker over steps goes through :func:`step_parts` (or the helpers built on it), so none
can forget a loop's setup or a branch's default. Paths are document paths
(``("pipeline", "workflow", "steps", 0, "setup", 1)``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import NamedTuple

from ..errors import DocPath
from .model import Step

StepAt = tuple[Step, DocPath]


class Part(NamedTuple):
    """One place in a step that holds nested steps: its key and the steps there, with paths."""

    key: str  # steps | setup | cases | default
    children: tuple[StepAt, ...]


def steps_with_paths(steps: Iterable[Step], path: DocPath) -> Iterator[StepAt]:
    """The items of a list of steps at ``path``, each with its own path."""
    for i, step in enumerate(steps):
        yield step, (*path, i)


def step_parts(step: Step, path: DocPath = ()) -> tuple[Part, ...]:
    """The parts of ``step`` (at ``path``) that hold nested steps, in document order: a
    sequence's ``steps``; a loop's ``setup`` then ``steps`` (both always present); a branch's
    ``cases`` then ``default`` (both always present, the default empty when there is none)."""
    kind = step.kind
    if kind == "sequence":
        return (Part("steps", tuple(steps_with_paths(step.steps, (*path, "steps")))),)
    if kind == "loop":
        return (
            Part("setup", tuple(steps_with_paths(step.setup, (*path, "setup")))),
            Part("steps", tuple(steps_with_paths(step.steps, (*path, "steps")))),
        )
    if kind == "branch":
        cases = tuple((arm, (*path, "cases", key)) for key, arm in step.cases.items())
        default = ((step.default, (*path, "default")),) if step.default is not None else ()
        return (Part("cases", cases), Part("default", default))
    return ()


def child_steps_with_paths(step: Step, path: DocPath) -> Iterator[StepAt]:
    """The steps nested directly in ``step``, with their paths: a sequence's steps, a loop's
    setup then body, a branch's cases then its default."""
    for part in step_parts(step, path):
        yield from part.children


def child_steps(step: Step) -> tuple[Step, ...]:
    """The steps nested directly in ``step``: a sequence's steps, a loop's setup then body, a
    branch's cases then its default."""
    return tuple(child for child, _ in child_steps_with_paths(step, ()))


def all_steps_with_paths(steps: Iterable[Step], path: DocPath) -> Iterator[StepAt]:
    """Every step, nested ones included, with its path, in document order (a step before its
    children)."""
    for step, here in steps_with_paths(steps, path):
        yield step, here
        yield from _descendants(step, here)


def _descendants(step: Step, path: DocPath) -> Iterator[StepAt]:
    for child, child_path in child_steps_with_paths(step, path):
        yield child, child_path
        yield from _descendants(child, child_path)


def all_steps(steps: Iterable[Step]) -> Iterator[Step]:
    """Every step, nested ones included, in document order (a step before its children)."""
    for step, _ in all_steps_with_paths(steps, ()):
        yield step


def invocations(steps: Iterable[Step], component: str) -> Iterator:
    """The invoke steps of ``component`` anywhere in ``steps`` (document order)."""
    for step in all_steps(steps):
        if step.kind == "invoke" and step.component == component:
            yield step
