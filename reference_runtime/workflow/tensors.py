"""Arrays at the interpreter's boundaries: dtypes, shape symbols and contract checks.

Values are numpy arrays on the host (device arrays belong to executors). Every value crossing
a boundary the user can observe (an invoke port, an emit, a carried update, a final output) is
checked against its contract: dtype, rank, fixed dimensions and shape symbols.

Symbols are opaque names. The *package scope* lives for one run; each invoke gets a fresh
*component scope*; symbols on the varying axis of growing/bounded cells are *dynamic* and never
bind in the package scope.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from .. import dtypes
from ..errors import RunError
from ..package.model import RequestExpandedLayout, TensorContract

NUMPY_DTYPE = {
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "int64": np.dtype(np.int64),
    "int32": np.dtype(np.int32),
    "int16": np.dtype(np.int16),
    "int8": np.dtype(np.int8),
    "uint64": np.dtype(np.uint64),
    "uint32": np.dtype(np.uint32),
    "uint16": np.dtype(np.uint16),
    "uint8": np.dtype(np.uint8),
    "bool": np.dtype(np.bool_),
}
FORMAT_DTYPE = {v: k for k, v in NUMPY_DTYPE.items()}


def numpy_dtype(dtype: str) -> np.dtype:
    return NUMPY_DTYPE[dtypes.canonical(dtype)]


def dtype_name(array: np.ndarray) -> str:
    return FORMAT_DTYPE.get(array.dtype, str(array.dtype))


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


def check(
    name: str,
    value: np.ndarray,
    contract: TensorContract,
    symbols: Symbols,
    where: str,
    *,
    free_axes: tuple[int, ...] = (),
) -> None:
    """Check ``value`` against ``contract``, binding symbols in ``symbols``.

    ``free_axes``: axes whose extent is not compared (an appended chunk's growing axis).
    Raises :class:`RunError` (H84) naming the value, the boundary and the broken fact.
    """
    want = dtypes.canonical(contract.dtype)
    have = dtype_name(value)
    if have != want:
        raise RunError(
            "H84",
            f"{where}: value {name!r} has dtype {have}, expected {want}",
            hint="Produce the value in the contract's dtype (the runtime never converts).",
        )
    if value.ndim != contract.rank:
        raise RunError(
            "H84",
            f"{where}: value {name!r} has rank {value.ndim} (shape {list(value.shape)}), "
            f"expected rank {contract.rank}",
            hint="Produce a value of the declared rank.",
        )
    if contract.shape is None:
        return
    request_axis = contract.request_axis
    factor = (
        contract.batch_layout.factor
        if isinstance(contract.batch_layout, RequestExpandedLayout)
        else 1
    )
    for axis, dim in enumerate(contract.shape):
        if axis in free_axes:
            continue
        extent = int(value.shape[axis])
        if isinstance(dim, int):
            if extent != dim:
                raise RunError(
                    "H84",
                    f"{where}: value {name!r} axis {axis} is {extent}, expected {dim} "
                    f"(shape {list(value.shape)})",
                    hint="Produce a value with the declared fixed dimensions.",
                )
            continue
        if dim in symbols.dynamic:
            continue
        if axis == request_axis and factor > 1:
            if extent % factor:
                raise RunError(
                    "H84",
                    f"{where}: value {name!r} axis {axis} ({extent}) is not a multiple of the "
                    f"expansion factor {factor}",
                )
            extent //= factor
        bound = symbols.bound.get(dim)
        if bound is None:
            symbols.bound[dim] = extent
        elif bound != extent:
            raise RunError(
                "H84",
                f"{where}: value {name!r} axis {axis} binds symbol {dim!r} to {extent}, but it "
                f"is already {bound}",
                hint="Values that share a symbol must agree on its extent.",
            )


def scalar_int(value: np.ndarray, what: str, code: str) -> int:
    """One integer element (shape [] or [1])."""
    if value.size != 1 or value.dtype.kind not in "iu":
        raise RunError(
            code,
            f"{what} must hold exactly one integer, got {dtype_name(value)} of shape "
            f"{list(value.shape)}",
        )
    return int(value.reshape(-1)[0])
