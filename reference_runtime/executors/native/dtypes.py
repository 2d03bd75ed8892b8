"""ONNX element types <-> array dtypes, explicit and faithful: every type maps to exactly one
dtype and back; types without a faithful array dtype are refused at load."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from onnx import TensorProto

NUMPY = {
    TensorProto.FLOAT: np.dtype(np.float32),
    TensorProto.DOUBLE: np.dtype(np.float64),
    TensorProto.FLOAT16: np.dtype(np.float16),
    TensorProto.BFLOAT16: np.dtype(ml_dtypes.bfloat16),
    TensorProto.INT8: np.dtype(np.int8),
    TensorProto.INT16: np.dtype(np.int16),
    TensorProto.INT32: np.dtype(np.int32),
    TensorProto.INT64: np.dtype(np.int64),
    TensorProto.UINT8: np.dtype(np.uint8),
    TensorProto.UINT16: np.dtype(np.uint16),
    TensorProto.UINT32: np.dtype(np.uint32),
    TensorProto.UINT64: np.dtype(np.uint64),
    TensorProto.BOOL: np.dtype(np.bool_),
}
# CuPy has no bfloat16 (nor any ml_dtypes type).
CUDA_UNSUPPORTED = {TensorProto.BFLOAT16}
ONNX_OF = {v: k for k, v in NUMPY.items()}
BFLOAT16 = NUMPY[TensorProto.BFLOAT16]


def low_precision(dtype) -> bool:
    """float16 or bfloat16: the dtypes computed in float32 and rounded back."""
    return dtype.itemsize == 2 and (dtype.kind == "f" or dtype == BFLOAT16)


def name(elem_type: int) -> str:
    return TensorProto.DataType.Name(elem_type).lower()


def to_numpy(elem_type: int) -> np.dtype:
    return NUMPY[elem_type]
