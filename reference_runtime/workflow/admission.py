"""KV admission: the bytes of KV a request needs, bounded before any component runs
(docs/runtime.md, "KV admission").

The *KV* of a request is every state cell that belongs to a service group of
``serving.state_service`` (its runtime-managed KV cache, rollback and recurrent state: whatever
kind the group is). A cell's bytes are its dtype's size times the product of its extents, each
bounded from the package and the bound request alone:

- the request axis of its contract: the request's rows (times the factor of a
  ``request_expanded`` layout);
- the axis its recurrence grows along (``growing`` / ``bounded``): the request's token
  positions ``S`` = the prompt's width (a session turn's prompt is the whole conversation, so
  the stored conversation counts) plus the request's new-token bound (the largest value of the
  input whose runtime role is ``max_output_tokens`` or ``max_iterations``), capped by the
  recurrence's ``max`` where that names an input (a literal or request value); a ``bounded``
  cell whose ``max`` names an input counts that ``max`` (it may hold that many positions
  whatever the request);
- any other axis: its fixed extent, or the extent the request's inputs bound its symbol to.

The estimate is the sum over those cells; a cell none of whose extents depends on the request
counts its fixed size. A package whose KV cannot be bounded this way (a cell without a shape,
a dtype without a byte size, a sequence axis with no new-token bound, a symbol no input
declares) cannot take a budget: ``Engine.from_dir(kv_budget_bytes=...)`` refuses it (``H114``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..arrays import numpy_dtype
from ..errors import RunError, UsageError
from ..package.model import (
    BoundedRecurrence,
    GrowingRecurrence,
    RequestExpandedLayout,
    RuntimeRole,
)

BOUND_ROLES = ("max_output_tokens", "max_iterations")


def check_budget(budget) -> int | None:
    """``kv_budget_bytes`` as given to ``Engine.from_dir``: None (no budget) or an integer >= 0
    (never a bool or a float); anything else is refused (``H114``)."""
    if budget is None:
        return None
    integer = isinstance(budget, int | np.integer) and not isinstance(budget, bool | np.bool_)
    if not integer or int(budget) < 0:
        raise UsageError(
            f"kv_budget_bytes={budget!r} is not a whole number of bytes >= 0",
            code="H114",
            hint="Pass kv_budget_bytes as an integer >= 0 (bytes), or None for no budget.",
        )
    return int(budget)


@dataclass(frozen=True)
class _Cell:
    name: str
    itemsize: int
    dims: tuple  # int | str per axis
    request_axis: int | None
    factor: int
    sequence_axis: int | None  # the recurrence axis (growing / bounded)
    maximum: str | None  # the recurrence's max
    bounded: bool


class KvEstimator:
    """The KV bytes a bound request needs (an upper bound), for one workflow (and its package's
    ``speculative`` section, if any)."""

    def __init__(self, workflow, speculative=None):
        # the cells a speculative block verifies into and rolls back: K + 1 positions a step
        self.speculative_width = speculative.max_proposal_width if speculative else None
        self.speculative_cells = set()
        for entry in speculative.rollback_state if speculative else ():
            if entry in workflow.state:
                self.speculative_cells.add(entry)
            else:
                self.speculative_cells.update(
                    c for c, v in workflow.state.items() if v.service_group == entry
                )
        self.prompt_inputs = [
            name
            for name, inp in workflow.inputs.items()
            if isinstance(inp.role, RuntimeRole) and inp.role.role == "prompt_tokens"
        ]
        self.bound_inputs = [
            name
            for name, inp in workflow.inputs.items()
            if isinstance(inp.role, RuntimeRole) and inp.role.role in BOUND_ROLES
        ]
        self.cells: list[_Cell] = []
        self.problems: list[str] = []  # why the KV cannot be bounded (empty: it can)
        declared = {
            d
            for inp in workflow.inputs.values()
            for d in (inp.contract.shape or ())
            if isinstance(d, str)
        }
        for name, cell in workflow.state.items():
            if cell.service_group is None:
                continue
            contract = cell.contract
            try:
                itemsize = numpy_dtype(contract.dtype).itemsize
            except KeyError:
                self.problems.append(f"cell {name!r}: dtype {contract.dtype} has no byte size")
                continue
            dims = tuple(contract.shape) if contract.shape is not None else None
            if dims is None and contract.rank != 0:
                self.problems.append(f"cell {name!r} declares a rank but no shape")
                continue
            rec = cell.recurrence
            axis = rec.axis if isinstance(rec, GrowingRecurrence | BoundedRecurrence) else None
            maximum = getattr(rec, "max", None)
            maximum = maximum if maximum in workflow.inputs else None
            layout = contract.batch_layout
            factor = layout.factor if isinstance(layout, RequestExpandedLayout) else 1
            request_axis = contract.request_axis
            if axis is not None and not self.bound_inputs and maximum is None:
                self.problems.append(
                    f"cell {name!r} grows along axis {axis}, but no input bounds the new "
                    "tokens (role max_output_tokens or max_iterations) and its recurrence's "
                    "max is not an input"
                )
                continue
            for i, d in enumerate(dims or ()):
                if isinstance(d, str) and i not in (axis, request_axis) and d not in declared:
                    self.problems.append(
                        f"cell {name!r}: symbol {d!r} (axis {i}) is bound by no workflow input"
                    )
            self.cells.append(
                _Cell(
                    name,
                    itemsize,
                    dims or (),
                    request_axis,
                    factor,
                    axis,
                    maximum,
                    isinstance(rec, BoundedRecurrence),
                )
            )

    def positions(self, bound) -> tuple[int, int]:
        """``(W, M)``: the prompt's width and the request's new-token bound."""
        width = 0
        for name in self.prompt_inputs:
            value = bound.values.get(name)
            if value is not None and np.ndim(value) > 0:
                width = max(width, int(np.shape(value)[-1]))
        new = 0
        for name in self.bound_inputs:
            value = bound.values.get(name)
            if value is not None and np.size(value):
                new = max(new, int(np.max(np.asarray(value))))
        return width, max(new, 0)

    def needed(self, bound) -> tuple[int, dict[str, int]]:
        """(total bytes, cell -> bytes) for a bound request."""
        width, new = self.positions(bound)
        rows = bound.batch if bound.batch is not None else 1
        per_cell = {}
        for cell in self.cells:
            count = cell.itemsize
            for i, d in enumerate(cell.dims):
                if i == cell.sequence_axis and cell.name in self.speculative_cells:
                    # the speculative block's capacity: a step feeds K + 1 positions, and rows
                    # that commit fewer than another keep masked slots (docs/speculative.md)
                    extent = width + 1 + (self.speculative_width + 1) * new
                elif i == cell.sequence_axis:
                    extent = width + new
                    if cell.maximum is not None:
                        limit = int(np.max(np.asarray(bound.values[cell.maximum])))
                        extent = limit if cell.bounded else min(extent, limit)
                elif i == cell.request_axis and not isinstance(d, int):
                    resolved = bound.symbols.resolve(d)
                    extent = resolved if resolved is not None else rows * cell.factor
                else:
                    extent = bound.symbols.resolve(d)
                    if extent is None:
                        raise RunError(
                            "H114",
                            f"KV admission cannot size cell {cell.name!r}: symbol {d!r} "
                            f"(axis {i}) is bound by no input of this request",
                            hint=f"Supply the input that binds {d!r}, or run without "
                            "kv_budget_bytes.",
                        )
                count *= max(int(extent), 0)
            per_cell[cell.name] = count
        return sum(per_cell.values()), per_cell
