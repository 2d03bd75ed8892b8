"""Arrays at the interpreter's boundaries: dtypes, shape symbols and contract checks.

Values are numpy arrays on the host (device arrays belong to executors). Every value crossing
a boundary the user can observe (an invoke port, an emit, a carried update, a final output) is
checked against its contract: dtype, rank, fixed dimensions and shape symbols.

Symbols are opaque names. The *package scope* lives for one run; each invoke gets a fresh
*component scope*; symbols on the varying axis of growing/bounded cells are *dynamic* and never
bind in the package scope.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..arrays import dtype_name, numpy_dtype
from ..errors import RunError
from ..package.model import RequestExpandedLayout, TensorContract


class Symbols:
    """A symbol scope: name -> extent, with a conflicting rebind as an error."""

    def __init__(self, dynamic: frozenset[str] = frozenset()):
        self.bound: dict[str, int] = {}
        self.dynamic = dynamic

    def copy(self) -> Symbols:
        out = Symbols(self.dynamic)
        out.bound = dict(self.bound)
        return out

    def resolve(self, dim) -> int | None:
        if isinstance(dim, int):
            return dim
        return self.bound.get(dim)


class Checker:
    """A contract compiled for fast checks on the hot path (one per contract, reused)."""

    __slots__ = ("contract", "dtype", "rank", "axes", "request_axis", "factor")

    def __init__(self, contract: TensorContract):
        self.contract = contract
        self.dtype = numpy_dtype(contract.dtype)
        self.rank = contract.rank
        self.request_axis = contract.request_axis
        layout = contract.batch_layout
        self.factor = layout.factor if isinstance(layout, RequestExpandedLayout) else 1
        shape = contract.shape if contract.shape is not None else ()
        self.axes = tuple(enumerate(shape))

    def __call__(self, name, value, symbols: Symbols, where, free_axes=()) -> None:
        if value.dtype != self.dtype:
            raise RunError(
                "H84",
                f"{_where(where)}: value {name!r} has dtype {dtype_name(value)}, expected "
                f"{dtypes.canonical(self.contract.dtype)}",
                hint="Produce the value in the contract's dtype (the runtime never converts).",
            )
        shape = value.shape
        if len(shape) != self.rank:
            raise RunError(
                "H84",
                f"{_where(where)}: value {name!r} has rank {len(shape)} (shape {list(shape)}), "
                f"expected rank {self.rank}",
                hint="Produce a value of the declared rank.",
            )
        bound = symbols.bound
        for axis, dim in self.axes:
            if free_axes and axis in free_axes:
                continue
            extent = shape[axis]
            if dim.__class__ is int:
                if extent != dim:
                    raise RunError(
                        "H84",
                        f"{_where(where)}: value {name!r} axis {axis} is {extent}, expected {dim} "
                        f"(shape {list(shape)})",
                        hint="Produce a value with the declared fixed dimensions.",
                    )
                continue
            if dim in symbols.dynamic:
                continue
            if axis == self.request_axis and self.factor > 1:
                if extent % self.factor:
                    raise RunError(
                        "H84",
                        f"{_where(where)}: value {name!r} axis {axis} ({extent}) is not a "
                        f"multiple of the expansion factor {self.factor}",
                    )
                extent //= self.factor
            previous = bound.get(dim)
            if previous is None:
                bound[dim] = extent
            elif previous != extent:
                raise RunError(
                    "H84",
                    f"{_where(where)}: value {name!r} axis {axis} binds symbol {dim!r} to "
                    f"{extent}, but it is already {previous}",
                    hint="Values that share a symbol must agree on its extent.",
                )


def _where(where) -> str:
    """Locations are built only when an error is reported (``where`` may be a callable)."""
    return where() if callable(where) else where


def checker(contract: TensorContract) -> Checker:
    """The contract's compiled checker, built once and kept on the (immutable) contract."""
    found = contract.__dict__.get("_checker")
    if found is None:
        found = Checker(contract)
        object.__setattr__(contract, "_checker", found)
    return found


def check(
    name: str,
    value: np.ndarray,
    contract: TensorContract,
    symbols: Symbols,
    where,
    *,
    free_axes: tuple[int, ...] = (),
) -> None:
    """Check ``value`` against ``contract``, binding symbols in ``symbols``.

    ``free_axes``: axes whose extent is not compared (an appended chunk's growing axis).
    Raises :class:`RunError` (H84) naming the value, the boundary and the broken fact.
    """
    checker(contract)(name, value, symbols, where, free_axes)


def scalar_int(value: np.ndarray, what: str, code: str) -> int:
    """One integer element (shape [] or [1])."""
    if value.size != 1 or value.dtype.kind not in "iu":
        raise RunError(
            code,
            f"{what} must hold exactly one integer, got {dtype_name(value)} of shape "
            f"{list(value.shape)}",
        )
    return int(value.reshape(-1)[0])
