"""Bare decoders through the one interpreter: lowering at load.

A legacy ``model.io`` package or an onnxruntime-genai ``genai_config.json`` folder has no
workflow of its own. :func:`lower` derives one from the decoder's declared ABI (a pure
function: the same package gives byte-identical YAML on every run and machine), and the engine
validates it with the ordinary loader, exactly as if an author had written it. Nothing is ever
written into the package. A ``model.io`` document is read through the typed model of the format;
what cannot be lowered is refused with H91, what this runtime does not implement with H93
(docs/lowering.md lists both).
"""

from __future__ import annotations

from pathlib import Path

from .abi import GENAI_CONFIG, DecoderABI, package_shape, read_abi
from .document import (
    CONTRACT_VERSION,
    DECODE_CONTRACT,
    POLICY_CONTRACT,
    lower_abi,
    to_yaml,
)

BARE_SHAPES = ("model_io", "genai_config")


def lower(path) -> str:
    """The canonical workflow document (YAML text) of the bare decoder at ``path``."""
    root = Path(path)
    shape = package_shape(root)
    if shape not in BARE_SHAPES:
        raise ValueError(f"{root} is not a bare decoder package (it is {shape!r})")
    return to_yaml(lower_abi(read_abi(root, shape)))


__all__ = [
    "BARE_SHAPES",
    "CONTRACT_VERSION",
    "DECODE_CONTRACT",
    "GENAI_CONFIG",
    "POLICY_CONTRACT",
    "DecoderABI",
    "lower",
    "package_shape",
    "read_abi",
]
