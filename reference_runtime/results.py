"""What a run returns: its outputs, and per row the tokens and why the row stopped (finish
reasons are real, never a constant: docs/format.md, decisions)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .package.model import EmitStep, LoopStep
from .package.visit import child_steps

# codes of a workflow's declared `finish_reasons` output (int64 per row); the token-policy
# contract writes them
# 0: the row generated nothing because its bound was 0 (``max_new_tokens=0``): ``length``
FINISH_CODES = {0: "length", 1: "stop", 2: "length", 3: "context_length"}


@dataclass(frozen=True)
class RunResult:
    """What a run published.

    ``outputs[name]`` is an array for a dense output, or a list with one entry per row (``None``
    where the row published nothing) for a per-row output. ``tokens`` and ``finish_reasons``
    are per row, from the output whose role is ``tokens`` (``None`` when there is none).
    """

    outputs: dict
    tokens: list[list[int]] | None = None
    finish_reasons: list[str] | None = None
    events: dict = field(default_factory=dict)
    text: list[str] | None = None  # per row, decoded by the package's tokenizer when it has one


@dataclass(frozen=True)
class ServedResult:
    """One request of ``Engine.serve``, yielded when it finishes: its position among the
    submitted requests (``index``), its ``arrival`` step, the step it was ``admitted`` at, the
    step after which it ``finished``, the ``slot`` it held and its :class:`RunResult` (one
    row)."""

    index: int
    arrival: int
    admitted: int
    finished: int
    slot: int
    result: RunResult


class TokenReader:
    """Reads the tokens output (the one whose role is ``tokens``) of a workflow's runs."""

    def __init__(self, workflow):
        self.workflow = workflow
        self.output = next((n for n, o in workflow.outputs.items() if o.role == "tokens"), None)
        # the innermost loop whose body emits into the tokens output (None when no loop does)
        self.loop = _loop_emitting(workflow.steps, self.output) if self.output else None

    def tokens(self, outputs: dict, frame) -> tuple[list | None, list | None]:
        """``(tokens per row, finish reasons per row)``, or ``(None, None)`` without a tokens
        output."""
        name = self.output
        if name is None:
            return None, None
        value = outputs.get(name)
        if value is None:
            rows = frame.outputs.batch or 1
            tokens = [[] for _ in range(rows)]
        elif isinstance(value, list):
            tokens = [[] if row is None else row.reshape(-1).astype(int).tolist() for row in value]
        else:
            array = np.asarray(value)
            axis = self.workflow.outputs[name].contract.request_axis or 0
            if array.ndim == 0:
                tokens = [[int(array)]]
            else:
                array = np.moveaxis(array, axis, 0)
                tokens = [row.reshape(-1).astype(int).tolist() for row in array]
        return tokens, self.finish_reasons(len(tokens), frame, outputs)

    def finish_reasons(self, rows: int, frame, outputs: dict) -> list[str]:
        """Per row: from the workflow's ``finish_reasons`` output where it declares one (codes
        1 stop, 2 length, 3 context_length), else ``length`` if the row was active for every
        iteration the loop allowed and ``stop`` if the loop predicate ended it earlier (or no
        loop publishes the tokens)."""
        declared = outputs.get("finish_reasons")
        if isinstance(declared, np.ndarray) and declared.dtype.kind in "iu":
            codes = declared.reshape(-1).tolist()
            if len(codes) == rows:
                return [FINISH_CODES.get(int(c), "length") for c in codes]
        report = frame.loop_reports.get(id(self.loop)) if self.loop is not None else None
        if report is None:
            return ["stop"] * rows
        counts = report.active_iterations
        if counts.size == 1:
            counts = np.repeat(counts, rows)
        return [
            "length" if r < counts.size and counts[r] >= report.limit else "stop"
            for r in range(rows)
        ]


def _loop_emitting(steps, output: str, loop=None):
    """The innermost loop whose body emits into ``output`` (None when no loop does)."""
    for step in steps:
        if isinstance(step, EmitStep) and step.output == output and loop is not None:
            return loop
        inner = step if isinstance(step, LoopStep) else loop
        found = _loop_emitting(child_steps(step), output, inner)
        if found is not None:
            return found
    return None
