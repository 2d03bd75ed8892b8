"""Arrays at the runtime's boundaries: the format's dtypes as array dtypes, and the one way a
device value reaches the host (counted)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from . import dtypes

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


def to_host(value, counters=None) -> np.ndarray:
    """A value the host must read (a loop predicate or bound, a branch key, an emit, a scatter
    destination). Device arrays (CuPy) are copied, and each copy is counted as a
    ``device_to_host`` materialisation; host arrays pass through untouched."""
    if isinstance(value, np.ndarray):
        return value
    if counters is not None:
        counters.add("materialisations", "device_to_host")
    return value.get()
