"""What a run returns: its outputs, and per row the tokens and why the row stopped (finish
reasons are real, never a constant: docs/format.md, decisions)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .package.model import EmitStep, LoopStep
from .package.visit import child_steps

# codes of a workflow's declared `finish_reasons` output (int64 per row); the token-policy
# contract writes them
# 0: the row generated nothing because its bound was 0 (``max_new_tokens=0``): ``length``
FINISH_CODES = {0: "length", 1: "stop", 2: "length", 3: "context_length"}


@dataclass(frozen=True)
class RunResult:
    """What a run published.

    ``outputs[name]`` is an array for a dense output, or a list with one entry per row (``None``
    where the row published nothing) for a per-row output. ``tokens`` and ``finish_reasons``
    are per row, from the output whose role is ``tokens`` (``None`` when there is none).
    """

    outputs: dict
    tokens: list[list[int]] | None = None
    finish_reasons: list[str] | None = None
    events: dict = field(default_factory=dict)
    text: list[str] | None = None  # per row, decoded by the package's tokenizer when it has one


@dataclass(frozen=True)
class ServedResult:
    """One request of ``Engine.serve``, yielded when it finishes: its position among the
    submitted requests (``index``), its ``arrival`` step, the step it was ``admitted`` at, the
    step after which it ``finished``, the ``slot`` it held and its :class:`RunResult` (one
    row)."""

    index: int
    arrival: int
    admitted: int
    finished: int
    slot: int
    result: RunResult

    def to_json(self) -> dict:
        return {
            "index": self.index,
            "arrival": self.arrival,
            "admitted": self.admitted,
            "finished": self.finished,
            "slot": self.slot,
            "tokens": self.result.tokens[0] if self.result.tokens else None,
            "finish_reason": self.result.finish_reasons[0] if self.result.finish_reasons else None,
        }


class TokenReader:
    """Reads the tokens output (the one whose role is ``tokens``) of a workflow's runs."""

    def __init__(self, workflow):
        self.workflow = workflow
        self.output = next((n for n, o in workflow.outputs.items() if o.role == "tokens"), None)
        # the innermost loop whose body emits into the tokens output (None when no loop does)
        self.loop = _loop_emitting(workflow.steps, self.output) if self.output else None

    def tokens(self, outputs: dict, frame) -> tuple[list | None, list | None]:
        """``(tokens per row, finish reasons per row)``, or ``(None, None)`` without a tokens
        output."""
        name = self.output
        if name is None:
            return None, None
        value = outputs.get(name)
        if value is None:
            rows = frame.outputs.batch or 1
            tokens = [[] for _ in range(rows)]
        elif isinstance(value, list):
            tokens = [[] if row is None else row.reshape(-1).astype(int).tolist() for row in value]
        else:
            array = np.asarray(value)
            axis = self.workflow.outputs[name].contract.request_axis or 0
            if array.ndim == 0:
                tokens = [[int(array)]]
            else:
                array = np.moveaxis(array, axis, 0)
                tokens = [row.reshape(-1).astype(int).tolist() for row in array]
        return tokens, self.finish_reasons(len(tokens), frame, outputs)

    def finish_reasons(self, rows: int, frame, outputs: dict) -> list[str]:
        """Per row: from the workflow's ``finish_reasons`` output where it declares one (codes
        1 stop, 2 length, 3 context_length), else ``length`` if the row was active for every
        iteration the loop allowed and ``stop`` if the loop predicate ended it earlier (or no
        loop publishes the tokens)."""
        declared = outputs.get("finish_reasons")
        if isinstance(declared, np.ndarray) and declared.dtype.kind in "iu":
            codes = declared.reshape(-1).tolist()
            if len(codes) == rows:
                return [FINISH_CODES.get(int(c), "length") for c in codes]
        report = frame.loop_reports.get(id(self.loop)) if self.loop is not None else None
        if report is None:
            return ["stop"] * rows
        counts = report.active_iterations
        if counts.size == 1:
            counts = np.repeat(counts, rows)
        return [
            "length" if r < counts.size and counts[r] >= report.limit else "stop"
            for r in range(rows)
        ]


def _loop_emitting(steps, output: str, loop=None):
    """The innermost loop whose body emits into ``output`` (None when no loop does)."""
    for step in steps:
        if isinstance(step, EmitStep) and step.output == output and loop is not None:
            return loop
        inner = step if isinstance(step, LoopStep) else loop
        found = _loop_emitting(child_steps(step), output, inner)
        if found is not None:
            return found
    return None


# ------------------------------------------------------------------ saving outputs


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
