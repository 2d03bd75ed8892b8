"""Declared preprocessing programs (``preprocessing.image`` / ``preprocessing.audio``).

A program is an ordered list of ``transforms`` and a list of ``outputs``. Each transform
applies its ``op`` to a value and produces a value; values are named and local to the program:

- a transform reads the values its ``inputs`` names, or, without ``inputs``, the value the
  previous transform produced (the first one reads the encoded bytes);
- it names what it produces with ``outputs``, or, without ``outputs``, its product is named
  after its ``op`` (``resize``, ``normalize``...); a later product of the same name replaces
  an earlier one;
- ``emit_*`` operations record a fact about the value they read (an image's size, a clip's
  length) without changing the stream: the next transform still reads what came before.

Each output binding then publishes the program value ``source`` as the workflow value ``name``,
in the binding's ``dtype``, with leading axes of extent 1 added up to its contract's rank. Image
values of content ``pixels`` are delivered channels first (``[channels, height, width]``).

The operations this runtime implements are listed in ``package/preprocessing.py`` with the
parameters each reads; any other operation of the format's vocabulary, or a parameter
value outside what is listed, is refused when the package is loaded (H93), never guessed.
"""

from __future__ import annotations

import io
import wave
from dataclasses import dataclass

import numpy as np

from ..arrays import numpy_dtype


@dataclass
class Audio:
    samples: np.ndarray  # float32 [channels, samples]
    rate: int


class ProgramError(Exception):
    """A program could not run on this input (bad bytes, a missing value)."""


def run_program(kind: str, program, encoded: bytes) -> dict[str, np.ndarray]:
    """Run ``program`` on ``encoded`` bytes: workflow value name -> array."""
    values: dict[str, object] = {}
    previous: object = encoded
    for i, t in enumerate(program.transforms):
        if t.inputs:
            missing = [n for n in t.inputs if n not in values]
            if missing:
                raise ProgramError(f"transform {i} ({t.op}) reads {missing[0]!r}, not produced yet")
            source = values[t.inputs[0]]
        else:
            source = previous
        try:
            product = (_image_op if kind == "image" else _audio_op)(t, source)
        except ProgramError:
            raise
        except Exception as exc:  # a decoder or numeric failure on this input
            raise ProgramError(f"transform {i} ({t.op}) failed: {exc}") from exc
        for name in t.outputs or (t.op,):
            values[name] = product
        if not t.op.startswith("emit_"):
            previous = product
    out: dict[str, np.ndarray] = {}
    for binding in program.outputs:
        if binding.source not in values:
            raise ProgramError(f"output {binding.name!r} reads {binding.source!r}, never produced")
        out[binding.name] = _deliver(values[binding.source], binding)
    return out


def _deliver(value, binding) -> np.ndarray:
    if isinstance(value, Audio):
        array = value.samples
    elif hasattr(value, "mode") and hasattr(value, "size"):  # a Pillow image
        array = np.asarray(value)
    else:
        array = np.asarray(value)
    if binding.content == "pixels" and array.ndim == 3:
        array = np.transpose(array, (2, 0, 1))  # HWC -> CHW
    elif binding.content == "pixels" and array.ndim == 2:
        array = array[None]
    rank = binding.contract.rank if binding.contract is not None else array.ndim
    while array.ndim < rank:
        array = array[None]
    return np.ascontiguousarray(array.astype(numpy_dtype(binding.dtype)))


def _as_float(value) -> np.ndarray:
    return np.asarray(value, dtype=np.float32)


def _image_op(t, value):
    from PIL import Image

    op = t.op
    if op in ("decode", "decode_rgb"):
        if not isinstance(value, bytes | bytearray):
            raise ProgramError(f"{op} reads encoded bytes")
        image = Image.open(io.BytesIO(value))
        image.load()
        return image.convert("RGB") if op == "decode_rgb" else image
    if op == "convert_rgb":
        return value.convert("RGB")
    if op == "resize":
        size = t.size
        width, height = (size, size) if isinstance(size, int) else (size["width"], size["height"])
        filters = {"nearest": Image.NEAREST, "bilinear": Image.BILINEAR, "bicubic": Image.BICUBIC}
        if not hasattr(value, "resize"):
            raise ProgramError("resize reads an image (resize before rescale/normalize)")
        return value.resize((width, height), filters[t.interpolation or "bilinear"])
    if op in ("emit_original_size", "emit_transformed_size"):
        if hasattr(value, "size") and hasattr(value, "mode"):
            width, height = value.size
        else:
            height, width = np.asarray(value).shape[:2]
        return np.array([height, width], dtype=np.int64)
    array = _as_float(value)
    if op == "rescale":
        return array * np.float32(t.scale)
    if op == "normalize":
        mean = np.asarray(t.mean, dtype=np.float32)
        std = np.asarray(t.std, dtype=np.float32)
        return (array - mean) / std
    raise ProgramError(f"operation {op!r} is not implemented")


def _audio_op(t, value):
    op = t.op
    if op == "decode":
        if not isinstance(value, bytes | bytearray):
            raise ProgramError("decode reads encoded bytes")
        with wave.open(io.BytesIO(value)) as reader:
            if reader.getsampwidth() != 2:
                raise ProgramError("only 16-bit PCM WAV can be decoded")
            frames = reader.readframes(reader.getnframes())
            channels = reader.getnchannels()
            rate = reader.getframerate()
        samples = np.frombuffer(frames, dtype="<i2").astype(np.float32) / 32768.0
        return Audio(samples.reshape(-1, channels).T.copy(), rate)
    if not isinstance(value, Audio):
        raise ProgramError(f"{op} reads decoded audio")
    x = value.samples
    if op == "resample":
        n = max(1, round(x.shape[-1] * t.sample_rate / value.rate))
        grid = np.linspace(0, x.shape[-1] - 1, n)
        resampled = np.stack([np.interp(grid, np.arange(x.shape[-1]), ch) for ch in x])
        return Audio(resampled.astype(np.float32), t.sample_rate)
    if op == "downmix":
        mono = x.mean(axis=0, keepdims=True)
        return Audio(np.repeat(mono, t.channels or 1, axis=0).astype(np.float32), value.rate)
    if op == "rescale":
        return Audio(x * np.float32(t.scale), value.rate)
    if op == "zero_mean_unit_variance":
        eps = 1e-7 if t.epsilon is None else t.epsilon
        mean = x.mean(axis=-1, keepdims=True)
        var = x.var(axis=-1, keepdims=True)
        return Audio(((x - mean) / np.sqrt(var + eps)).astype(np.float32), value.rate)
    if op == "pad":
        missing = t.target_length - x.shape[-1]
        if missing <= 0:
            return value
        fill = np.full((x.shape[0], missing), t.pad_value or 0.0, dtype=np.float32)
        joined = (fill, x) if t.mode == "left" else (x, fill)
        return Audio(np.concatenate(joined, axis=-1), value.rate)
    if op == "trim":
        return Audio(x[..., : t.target_length].copy(), value.rate)
    if op in ("emit_valid_samples", "emit_sample_lengths"):
        return np.array([x.shape[-1]], dtype=np.int64)
    raise ProgramError(f"operation {op!r} is not implemented")
