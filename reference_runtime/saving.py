"""Writing a run's outputs to files (``run --out``): the command line's job, not what a run
returns (results.py), so certification, which judges what runs return, does not judge it."""

from __future__ import annotations

import numpy as np

from .results import RunResult


def media_suffix(output) -> str | None:
    """``.wav`` for an audio output that declares its media, ``.png`` for an image output,
    else None (saved as ``.npy`` only)."""
    if output.role == "audio" and output.media is not None:
        return ".wav"
    if output.role == "image":
        return ".png"
    return None


def _file_stem(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in name) or "output"


def save_outputs(result: RunResult, workflow, folder) -> dict:
    """Write every output of ``result`` under ``folder``: ``NAME.npy`` (a per-row output:
    ``NAME.row<R>.npy`` for each row that published something), plus ``.wav`` for declared
    audio media and ``.png`` for images (one file per batch row). Returns output name ->
    the files written (None for a row that published nothing)."""
    from pathlib import Path

    folder = Path(folder)
    written: dict = {}
    for name, value in result.outputs.items():
        declared = workflow.outputs.get(name)
        stem = _file_stem(name)
        rows = value if isinstance(value, list) else [value]
        files: list = []
        for r, row in enumerate(rows):
            if row is None:
                files.append(None)
                continue
            row_stem = f"{stem}.row{r}" if isinstance(value, list) else stem
            array = np.asarray(row)
            path = folder / f"{row_stem}.npy"
            np.save(path, array, allow_pickle=False)
            files.append(path.name)
            suffix = media_suffix(declared) if declared is not None else None
            if suffix == ".wav":
                files += _save_wav(array, declared, folder, row_stem)
            elif suffix == ".png":
                files += _save_png(array, declared, folder, row_stem)
        written[name] = files
    return written


def _media_rows(array: np.ndarray, trailing: int) -> list[np.ndarray]:
    """The items of ``array`` of rank ``trailing`` (leading axes are batch rows)."""
    if array.ndim <= trailing:
        return [array]
    return list(array.reshape(-1, *array.shape[array.ndim - trailing :]))


def _numbered(stem: str, index: int, count: int, suffix: str) -> str:
    return f"{stem}{suffix}" if count == 1 else f"{stem}.{index}{suffix}"


def _save_wav(array: np.ndarray, output, folder, stem: str) -> list[str]:
    """16-bit PCM WAV at the media's sample rate: float samples in [-1, 1] (clipped), or
    int16 samples as they are; ``[..., channels, samples]`` (channel-first, as the format's
    audio outputs are)."""
    import wave

    media = output.media
    rate = media.sample_rate_hz or media.source_sample_rate_hz
    if not rate or array.dtype.kind not in "fi" or array.size == 0:
        return []
    channels = media.channels or 1
    items = _media_rows(array, 2) if array.ndim >= 2 and array.shape[-2] == channels else [array]
    written = []
    for i, item in enumerate(items):
        frames = item.reshape(1, -1) if item.ndim == 1 else item.reshape(item.shape[0], -1)
        if frames.dtype.kind == "f":
            pcm = (np.clip(frames, -1.0, 1.0) * 32767).round().astype("<i2")
        else:
            pcm = np.clip(frames, -32768, 32767).astype("<i2")
        name = _numbered(stem, i, len(items), ".wav")
        with wave.open(str(folder / name), "wb") as out:
            out.setnchannels(pcm.shape[0])
            out.setsampwidth(2)
            out.setframerate(int(rate))
            out.writeframes(np.ascontiguousarray(pcm.T).tobytes())
        written.append(name)
    return written


_SCALE = {"zero_to_one": (0.0, 255.0), "negative_one_to_one": (1.0, 127.5), "zero_to_255": (0, 1)}


def _save_png(array: np.ndarray, output, folder, stem: str) -> list[str]:
    """8-bit PNG per image: ``[..., C, H, W]`` (C in 1, 3, 4; read first), ``[..., H, W, C]``
    or ``[H, W]``, scaled from the output's ``value_range`` (floats without one: [0, 1])."""
    from PIL import Image

    if array.ndim < 2 or array.size == 0 or array.dtype.kind not in "fiub":
        return []
    if array.ndim >= 3 and array.shape[-3] in (1, 3, 4):  # channel-first, as ONNX lays out
        array = np.moveaxis(array, -3, -1)
    planar = array.ndim == 2 or array.shape[-1] not in (1, 3, 4)
    items = _media_rows(array, 2 if planar else 3)
    offset, scale = _SCALE.get(
        output.value_range or ("zero_to_one" if array.dtype.kind == "f" else "zero_to_255")
    )
    written = []
    for i, item in enumerate(items):
        pixels = np.clip((item.astype(np.float64) + offset) * scale, 0, 255).round()
        pixels = pixels.astype(np.uint8)
        if pixels.ndim == 3 and pixels.shape[-1] == 1:
            pixels = pixels[..., 0]
        name = _numbered(stem, i, len(items), ".png")
        Image.fromarray(pixels).save(folder / name)
        written.append(name)
    return written
