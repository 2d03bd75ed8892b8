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

import dataclasses
from pathlib import Path

from ...errors import PackageError, UsageError
from .abi import GENAI_CONFIG, DecoderABI, package_shape, read_abi
from .document import (
    CONTRACT_VERSION,
    DECODE_CONTRACT,
    POLICY_CONTRACT,
    lower_abi,
    to_yaml,
)
from .speculative import DRAFT_FOLDER, lower_with_draft, pairing_problems

BARE_SHAPES = ("model_io", "genai_config")


def lower(path, draft=None) -> str:
    """The canonical workflow document (YAML text) of the bare decoder at ``path``; with
    ``draft`` (a bare decoder folder), the document that decodes it speculatively with that
    draft, which it names under ``draft/`` (``speculative.py``)."""
    root = Path(path)
    shape = package_shape(root)
    if shape not in BARE_SHAPES:
        raise ValueError(f"{root} is not a bare decoder package (it is {shape!r})")
    target = read_abi(root, shape)
    if draft is None:
        return to_yaml(lower_abi(target))
    abi = read_draft(root, Path(draft))
    problems = pairing_problems(target, abi)
    if problems:
        raise PackageError(root, problems)
    return to_yaml(lower_with_draft(target, abi))


def check_draft_folder(draft) -> Path:
    """The draft folder, or a usage error naming what it is instead of a bare decoder."""
    folder = Path(draft)
    if not folder.is_dir():
        raise UsageError(
            f"draft {str(draft)!r} is not a folder",
            hint="Pass the draft decoder's folder (genai_config.json, or model.io metadata).",
        )
    shape = package_shape(folder)
    if shape not in BARE_SHAPES:
        what = (
            "a workflow package"
            if shape == "authored"
            else "neither an onnxruntime-genai folder nor a model.io package"
        )
        raise UsageError(
            f"draft {str(draft)!r} is {what}, not a bare decoder",
            hint="Pass a bare decoder folder as the draft (genai_config.json, or metadata whose "
            "model.io describes the decoder); a workflow declares its own proposer in its "
            "speculative section.",
        )
    return folder


def read_draft(root: Path, draft: Path) -> DecoderABI:
    """The draft's ABI; what refuses it is reported for the target ``root``, each location
    under ``draft`` (the draft folder's document)."""
    folder = check_draft_folder(draft)
    try:
        return read_abi(folder, package_shape(folder))
    except PackageError as refused:
        raise PackageError(
            root,
            [
                dataclasses.replace(
                    v, path=("draft", *v.path), message=f"the draft ({folder}): {v.message}"
                )
                for v in refused.violations
            ],
        ) from None


__all__ = [
    "BARE_SHAPES",
    "CONTRACT_VERSION",
    "DRAFT_FOLDER",
    "DECODE_CONTRACT",
    "GENAI_CONFIG",
    "POLICY_CONTRACT",
    "DecoderABI",
    "lower",
    "package_shape",
    "read_abi",
]
