"""The preprocessing operations this runtime implements, as the loader checks them: an
operation of the format's open vocabulary outside this table, or a parameter it does not read,
is refused at load as unsupported (H93). ``executors/preprocess.py`` runs the programs."""

from __future__ import annotations

# op -> parameters it reads (any other parameter set on the transform is refused)
IMAGE_OPS: dict[str, frozenset[str]] = {
    "decode": frozenset(),
    "decode_rgb": frozenset(),
    "convert_rgb": frozenset(),
    "resize": frozenset({"size", "interpolation", "mode"}),
    "rescale": frozenset({"scale"}),
    "normalize": frozenset({"mean", "std"}),
    "emit_original_size": frozenset(),
    "emit_transformed_size": frozenset(),
}
AUDIO_OPS: dict[str, frozenset[str]] = {
    "decode": frozenset(),
    "resample": frozenset({"sample_rate"}),
    "downmix": frozenset({"channels"}),
    "rescale": frozenset({"scale"}),
    "zero_mean_unit_variance": frozenset({"epsilon"}),
    "pad": frozenset({"target_length", "pad_value", "mode"}),
    "trim": frozenset({"target_length"}),
    "emit_valid_samples": frozenset(),
    "emit_sample_lengths": frozenset(),
}
INTERPOLATIONS = ("nearest", "bilinear", "bicubic")
RESIZE_MODES = ("stretch",)
PAD_MODES = ("right", "left")
# fields of a transform that are structure, not parameters
_STRUCTURAL = frozenset({"op", "inputs", "outputs"})


def transform_parameters(transform) -> list[str]:
    """The parameters a transform sets (fields other than op/inputs/outputs that are not None)."""
    return [
        name
        for name in type(transform).__dataclass_fields__
        if name not in _STRUCTURAL
        and not name.startswith("_")
        and getattr(transform, name) is not None
    ]


def unsupported(kind: str, transform) -> str | None:
    """Why this runtime cannot run ``transform`` of a ``kind`` program, or None."""
    ops = IMAGE_OPS if kind == "image" else AUDIO_OPS
    if transform.op not in ops:
        return f"operation {transform.op!r} is not implemented (implemented: {', '.join(ops)})"
    extra = [p for p in transform_parameters(transform) if p not in ops[transform.op]]
    if extra:
        return f"operation {transform.op!r} does not take {', '.join(extra)} here"
    if transform.op == "resize":
        if transform.size is None:
            return "resize needs `size` (an edge length or {width, height})"
        if transform.interpolation not in (None, *INTERPOLATIONS):
            return (
                f"resize interpolation {transform.interpolation!r} is not one of {INTERPOLATIONS}"
            )
        if transform.mode not in (None, *RESIZE_MODES):
            return f"resize mode {transform.mode!r} is not implemented (only {RESIZE_MODES})"
    if transform.op == "rescale" and transform.scale is None:
        return "rescale needs `scale`"
    if transform.op == "normalize" and (transform.mean is None or transform.std is None):
        return "normalize needs `mean` and `std`"
    if transform.op == "resample" and transform.sample_rate is None:
        return "resample needs `sample_rate`"
    if transform.op in ("pad", "trim") and transform.target_length is None:
        return f"{transform.op} needs `target_length`"
    if transform.op == "pad" and transform.mode not in (None, *PAD_MODES):
        return f"pad mode {transform.mode!r} is not one of {PAD_MODES}"
    return None
