"""Dtype names of the format, their aliases, and their ONNX element types.

One table, read by the validator (port checks against graphs) and later by executors.
"""

from __future__ import annotations

from onnx import TensorProto

# alias -> canonical name
ALIASES = {
    "fp32": "float32",
    "fp16": "float16",
    "bf16": "bfloat16",
    "fp8_e4m3fn": "float8_e4m3fn",
    "fp8_e5m2": "float8_e5m2",
    "fp8_e4m3": "float8_e4m3",
}

# Every dtype name a workflow tensor may carry (the format's tensor vocabulary, aliases
# included). `string` is a name of the vocabulary but never a workflow tensor.
TENSOR_DTYPES = frozenset(
    {
        "float32", "fp32", "float16", "fp16", "bfloat16", "bf16",
        "float8_e4m3fn", "fp8_e4m3fn", "float8_e4m3", "fp8_e4m3", "float8_e5m2", "fp8_e5m2",
        "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool",
    }
)  # fmt: skip

# canonical name -> ONNX element type
ONNX_ELEM_TYPE = {
    "float32": TensorProto.FLOAT,
    "float16": TensorProto.FLOAT16,
    "bfloat16": TensorProto.BFLOAT16,
    "float8_e4m3fn": TensorProto.FLOAT8E4M3FN,
    "float8_e5m2": TensorProto.FLOAT8E5M2,
    "int64": TensorProto.INT64,
    "int32": TensorProto.INT32,
    "int16": TensorProto.INT16,
    "int8": TensorProto.INT8,
    "uint64": TensorProto.UINT64,
    "uint32": TensorProto.UINT32,
    "uint16": TensorProto.UINT16,
    "uint8": TensorProto.UINT8,
    "bool": TensorProto.BOOL,
    "string": TensorProto.STRING,
}

FROM_ONNX = {v: k for k, v in ONNX_ELEM_TYPE.items()}

INTEGER = frozenset({"int64", "int32", "int16", "int8", "uint64", "uint32", "uint16", "uint8"})
FLOATING = frozenset({"float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"})

INTEGER_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}


def canonical(dtype: str) -> str:
    """``fp16`` -> ``float16``; canonical names map to themselves."""
    return ALIASES.get(dtype, dtype)


def onnx_dtype_name(elem_type: int) -> str:
    """The format's name for an ONNX element type, or ONNX's own name when the format has none."""
    if elem_type in FROM_ONNX:
        return FROM_ONNX[elem_type]
    return TensorProto.DataType.Name(elem_type).lower()
