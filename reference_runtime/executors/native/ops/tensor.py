"""Native kernels: tensor (see the registry module for the kernel conventions).

Shapes, axes, pads and slice bounds are read into Python ints (``.tolist()``); the data itself
stays in the array module ``node.xp``.
"""

from __future__ import annotations

import math

from .. import dtypes
from ..registry import Unsupported, op


def _axis(axis: int, rank: int) -> int:
    """A possibly negative axis in [-rank, rank) as a non-negative one."""
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def _ints(value) -> list[int]:
    """A shape/axes/indices tensor (or attribute list) as Python ints."""
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return [int(v) for v in value]
    values = value.reshape(-1).tolist()
    return values if value.dtype.kind in "iu" else [int(v) for v in values]


def _scalar(value):
    """The single element of a scalar (or one-element) tensor as a Python number."""
    return value.item() if value.size == 1 else value.reshape(-1)[0].item()


# ---------------------------------------------------------------- shapes


def _prepare_shape(node, constants):
    start, end, xp = node.attr("start", 0), node.attr("end", None), node.xp
    int64 = xp.int64

    def kernel(node, x):
        return xp.asarray(x.shape[start:end], dtype=int64)

    return kernel


@op("Shape", since=(1, 13, 15, 19, 21, 23, 24, 25), prepare=_prepare_shape)
def shape(node, x):
    # Python slicing is exactly the spec's start/end rule: negatives count from the back,
    # out-of-range values clamp, start > end gives an empty shape.
    dims = x.shape[node.attr("start", 0) : node.attr("end", None)]
    return node.xp.asarray(dims, dtype=node.xp.int64)


@op("Size", since=(1, 13, 19, 21, 23, 24, 25))
def size(node, x):
    return node.xp.asarray(x.size, dtype=node.xp.int64)


def _reshape_dims(in_shape: tuple, shape: list[int], allowzero: int) -> list[int]:
    dims = list(shape)
    if not allowzero:
        for i, d in enumerate(dims):
            if d == 0:
                if i >= len(in_shape):
                    raise ValueError(
                        f"Reshape: dim {i} is 0 but the input has rank {len(in_shape)}"
                    )
                dims[i] = in_shape[i]
    if dims.count(-1) > 1:
        raise ValueError("Reshape: at most one dimension may be -1")
    if -1 in dims:
        known = math.prod(d for d in dims if d != -1)
        total = math.prod(in_shape)
        if known == 0 or total % known:
            raise ValueError(f"Reshape: cannot infer -1 reshaping {in_shape} to {shape}")
        dims[dims.index(-1)] = total // known
    if math.prod(dims) != math.prod(in_shape):
        raise ValueError(f"Reshape: cannot reshape {tuple(in_shape)} to {shape}")
    return dims


def _prepare_reshape(node, constants):
    if 1 not in constants:
        return None
    dims, allowzero = _ints(constants[1]), node.attr("allowzero", 0)
    return _per_shape(lambda shape: _reshape_dims(shape, dims, allowzero))


@op("Reshape", since=(5, 13, 14, 19, 21, 23, 24, 25), prepare=_prepare_reshape)
def reshape(node, x, shape):
    return x.reshape(_reshape_dims(x.shape, _ints(shape), node.attr("allowzero", 0)))


@op("Flatten", since=(1, 9, 11, 13, 21, 23, 24, 25))
def flatten(node, x):
    axis = node.attr("axis", 1)
    axis = axis + x.ndim if axis < 0 else axis
    if not 0 <= axis <= x.ndim:
        raise ValueError(f"Flatten: axis {node.attr('axis', 1)} is out of range for rank {x.ndim}")
    return x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))


def _squeezed(x, axes: frozenset[int]):
    """``x`` without the dims ``axes`` (non-negative), which must be 1."""
    shape = x.shape
    for a in axes:
        if shape[a] != 1:
            raise ValueError(f"Squeeze: dim {a} of shape {shape} is not 1")
    return x.reshape([d for i, d in enumerate(shape) if i not in axes])


def _per_rank(normalise):
    """``normalise(rank)`` memoised per input rank (a node's constant axes resolve the same way
    for every input of one rank)."""
    cache: dict[int, object] = {}

    def get(rank: int):
        found = cache.get(rank)
        if found is None:
            found = cache[rank] = normalise(rank)
        return found

    return get


def _per_shape(target, limit: int = 64):
    """The kernel of a reshaping op whose parameters are constants: ``x`` reshaped to
    ``target(shape)``, memoised per input shape for the few shapes one node sees (a node fed
    ever new shapes starts over past ``limit``)."""
    cache: dict[tuple, tuple] = {}

    def reshaped(node, x, *_parameters):
        shape = x.shape
        found = cache.get(shape)
        if found is None:
            if len(cache) >= limit:
                cache.clear()
            found = cache[shape] = tuple(target(shape))
        return x.reshape(found)

    return reshaped


def _prepare_squeeze(node, constants):
    if 1 not in constants:
        return None
    axes = _ints(constants[1])
    resolved = _per_rank(lambda rank: frozenset(_axis(a, rank) for a in axes))

    def target(shape):
        dims = resolved(len(shape))
        for a in dims:
            if shape[a] != 1:
                raise ValueError(f"Squeeze: dim {a} of shape {shape} is not 1")
        return [d for i, d in enumerate(shape) if i not in dims]

    return _per_shape(target)


@op("Squeeze", since=(1, 11, 13, 21, 23, 24, 25), prepare=_prepare_squeeze)
def squeeze(node, x, axes=None):
    # axes: an attribute before opset 13, an optional input from 13 on.
    axes = _ints(axes) if axes is not None else node.attr("axes")
    if axes is None:
        return x.reshape([d for d in x.shape if d != 1])
    return _squeezed(x, frozenset(_axis(a, x.ndim) for a in axes))


def _unsqueeze_positions(rank: int, axes: list[int]) -> list[int]:
    """Where the new dims of an Unsqueeze of a rank-``rank`` input go, in increasing order
    (axes index the output and may be negative)."""
    out_rank = rank + len(axes)
    positions = sorted({_axis(a, out_rank) for a in axes})
    if len(positions) != len(axes):
        raise ValueError("Unsqueeze: repeated axes")
    return positions


def _unsqueezed(x, positions: list[int]):
    shape = list(x.shape)
    for p in positions:
        shape.insert(p, 1)
    return x.reshape(shape)


def _prepare_unsqueeze(node, constants):
    if 1 not in constants:
        return None
    axes = _ints(constants[1])
    positions = _per_rank(lambda rank: _unsqueeze_positions(rank, axes))

    def target(shape):
        out = list(shape)
        for p in positions(len(shape)):
            out.insert(p, 1)
        return out

    return _per_shape(target)


@op("Unsqueeze", since=(1, 11, 13, 21, 23, 24, 25), prepare=_prepare_unsqueeze)
def unsqueeze(node, x, axes=None):
    # axes: an attribute before opset 13, an input from 13 on; they index the output.
    axes = _ints(axes) if axes is not None else node.attr("axes", [])
    return _unsqueezed(x, _unsqueeze_positions(x.ndim, axes))


def _prepare_transpose(node, constants):
    perm = node.attr("perm")
    if perm:
        perm = tuple(perm)

        def kernel(node, x):
            return x.transpose(perm)  # what xp.transpose(x, perm) calls

    else:

        def kernel(node, x):
            return x.transpose()  # reversed dims

    return kernel


@op("Transpose", since=(1, 13, 21, 23, 24, 25), prepare=_prepare_transpose)
def transpose(node, x):
    perm = node.attr("perm") or list(reversed(range(x.ndim)))
    return node.xp.transpose(x, perm)


def _expanded_shape(in_shape: tuple, target: list[int]) -> list[int]:
    """Bidirectional broadcasting: a 1 in either shape takes the other's dim."""
    rank = max(len(in_shape), len(target))
    a = [1] * (rank - len(in_shape)) + list(in_shape)
    b = [1] * (rank - len(target)) + target
    out = []
    for da, db in zip(a, b, strict=True):
        if da != db and 1 not in (da, db):
            raise ValueError(f"Expand: shape {in_shape} does not broadcast to {target}")
        out.append(da if db == 1 else db)
    return out


def _prepare_expand(node, constants):
    """The output shape of each (input shape, target) pair a node sees, computed once."""
    xp, known = node.xp, {}

    def kernel(node, x, shape):
        key = (x.shape, tuple(_ints(shape)))
        out = known.get(key)
        if out is None:
            if len(known) >= 64:
                known.clear()
            out = known[key] = tuple(_expanded_shape(x.shape, list(key[1])))
        result = xp.empty(out, dtype=x.dtype)
        result[...] = x  # broadcasts
        return result

    return kernel


@op("Expand", since=(8, 13), prepare=_prepare_expand)
def expand(node, x, shape):
    result = node.xp.empty(_expanded_shape(x.shape, _ints(shape)), dtype=x.dtype)
    result[...] = x  # broadcasts
    return result


# ---------------------------------------------------------------- joining, splitting, slicing


def _prepare_concat(node, constants):
    axes = _per_rank(lambda rank: _axis(node.attr("axis", 1), rank))
    concatenate = node.xp.concatenate

    def kernel(node, *inputs):
        return concatenate(inputs, axis=axes(inputs[0].ndim))

    return kernel


@op("Concat", since=(1, 4, 11, 13), prepare=_prepare_concat)
def concat(node, *inputs):
    axis = _axis(node.attr("axis", 1), inputs[0].ndim)  # opset 1 defaulted axis to 1
    return node.xp.concatenate(inputs, axis=axis)


@op("Split", since=(1, 2, 11, 13, 18))
def split(node, x, split=None):
    # split: an attribute before opset 13 (also an input in opset 1), an input from 13 on;
    # without it, num_outputs (opset 18) or the number of outputs parts, the last one smaller
    # when the axis does not divide evenly.
    axis = _axis(node.attr("axis", 0), x.ndim)
    dim = x.shape[axis]
    sizes = _ints(split) if split is not None else node.attr("split")
    if not sizes:
        parts = node.attr("num_outputs") or node.n_outputs
        chunk = -(-dim // parts)
        sizes = [chunk] * (parts - 1) + [dim - chunk * (parts - 1)]
    if sum(sizes) != dim or any(s < 0 for s in sizes):
        raise ValueError(f"Split: sizes {sizes} do not add up to dim {dim}")
    results, start = [], 0
    for s in sizes:
        index = [slice(None)] * x.ndim
        index[axis] = slice(start, start + s)
        results.append(x[tuple(index)])
        start += s
    return tuple(results)


def _slice_bounds(start: int, end: int, step: int, dim: int) -> slice:
    """ONNX Slice bounds for one axis as a Python slice: negatives count from the back, then
    starts clamp to [0, dim] (step > 0) or [0, dim-1] (step < 0), ends to [0, dim] or [-1, dim-1]
    (-1 meaning "through index 0")."""
    if step == 0:
        raise ValueError("Slice: steps must not be 0")
    start = start + dim if start < 0 else start
    end = end + dim if end < 0 else end
    if step > 0:
        return slice(min(max(start, 0), dim), min(max(end, 0), dim), step)
    start = min(max(start, 0), dim - 1)
    end = min(max(end, -1), dim - 1)
    return slice(start, None if end < 0 else end, step)


def _slice_parameters(starts, ends, axes, steps):
    starts, ends = _ints(starts), _ints(ends)
    axes = _ints(axes) if axes is not None else list(range(len(starts)))
    steps = _ints(steps) if steps is not None else [1] * len(starts)
    return list(zip(axes, starts, ends, steps, strict=True))


def _prepare_slice(node, constants):
    """Constant starts, ends, axes and steps, all positive: for steps > 0 the ONNX bounds rule
    is exactly Python's slicing rule (negatives count from the back, then clamp), so the
    index is built once per input rank, independent of the dims."""
    given = [i for i in range(1, 5) if i < len(node.proto.input) and node.proto.input[i]]
    if node.opset < 10 or any(i not in constants for i in given):
        return None
    args = [constants.get(i) for i in range(1, 5)]
    parameters = _slice_parameters(*args)
    if any(st <= 0 for _, _, _, st in parameters):
        return None

    def build(rank: int) -> tuple:
        index = [slice(None)] * rank
        for a, s, e, st in parameters:
            index[_axis(a, rank)] = slice(s, e, st)
        return tuple(index)

    index = _per_rank(build)

    def kernel(node, x, *_):
        return x[index(x.ndim)]

    return kernel


@op("Slice", since=(1, 10, 11, 13), prepare=_prepare_slice)
def slice_(node, x, starts=None, ends=None, axes=None, steps=None):
    if starts is None:  # opset 1: starts/ends/axes are attributes, steps are all 1
        starts, ends, axes = node.attr("starts"), node.attr("ends"), node.attr("axes")
    index = [slice(None)] * x.ndim
    for a, s, e, st in _slice_parameters(starts, ends, axes, steps):
        a = _axis(a, x.ndim)
        index[a] = _slice_bounds(s, e, st, x.shape[a])
    return x[tuple(index)]


@op("Tile", since=(6, 13))
def tile(node, x, repeats):
    repeats = _ints(repeats)
    if len(repeats) != x.ndim:
        raise ValueError(f"Tile: {len(repeats)} repeats for rank {x.ndim}")
    return node.xp.tile(x, repeats)


_PAD_MODES = ("constant", "reflect", "edge", "wrap")


def _check_pad(node) -> None:
    mode = node.attr("mode", "constant")
    if mode not in _PAD_MODES:
        raise Unsupported(f"Pad mode {mode!r}")
    if mode == "wrap" and node.opset < 19:
        raise Unsupported("Pad mode 'wrap' before opset 19")


@op("Pad", since=(1, 2, 11, 13, 18, 19, 21, 23, 24, 25), check=_check_pad)
def pad(node, x, pads=None, constant_value=None, axes=None):
    # Before opset 11 pads (opset 1: paddings) and value are attributes; from 11 on, inputs.
    if pads is None:
        pads = node.attr("pads", node.attr("paddings"))
        value = node.attr("value", 0.0)
    else:
        value = 0 if constant_value is None else _scalar(constant_value)
    pads = _ints(pads)
    axes = [_axis(a, x.ndim) for a in _ints(axes)] if axes is not None else list(range(x.ndim))
    if len(pads) != 2 * len(axes):
        raise ValueError(f"Pad: {len(pads)} pads for {len(axes)} axes")
    widths = [(0, 0)] * x.ndim
    for i, a in enumerate(axes):
        widths[a] = (pads[i], pads[i + len(axes)])
    # Negative pads remove elements: crop first, then pad the rest.
    crop = tuple(
        slice(-min(b, 0), d + min(e, 0)) for (b, e), d in zip(widths, x.shape, strict=True)
    )
    x = x[crop]
    widths = [(max(b, 0), max(e, 0)) for b, e in widths]
    mode = node.attr("mode", "constant")
    if mode == "constant":
        return node.xp.pad(x, widths, mode="constant", constant_values=value)
    return node.xp.pad(x, widths, mode=mode)


# ---------------------------------------------------------------- constants, ranges

# The value attributes besides the TENSOR ``value`` and their dtypes (strings and sparse
# tensors are refused).
_LIST_VALUES = {
    "value_float": "float32",
    "value_floats": "float32",
    "value_int": "int64",
    "value_ints": "int64",
}


def _check_tensor_value(node, value) -> None:
    elem = dtypes.ONNX_OF.get(value.dtype)
    if elem is None:
        raise Unsupported(f"{node.op_type} value of dtype {value.dtype}")
    if elem in dtypes.CUDA_UNSUPPORTED and node.xp.__name__ != "numpy":
        raise Unsupported(f"{node.op_type} value of dtype {dtypes.name(elem)} on CUDA")


def _check_constant(node) -> None:
    for name in node.attrs:
        if name != "value" and name not in _LIST_VALUES:
            raise Unsupported(f"Constant attribute {name!r}")
    if len(node.attrs) != 1:
        raise Unsupported(f"Constant needs exactly one value attribute, got {list(node.attrs)}")
    if "value" in node.attrs:
        _check_tensor_value(node, node.attr("value"))


@op("Constant", since=(1, 9, 11, 12, 13, 19, 21, 23, 24, 25), check=_check_constant)
def constant(node):
    ((name, value),) = node.attrs.items()
    if name == "value":
        return node.xp.array(value)  # a copy: nobody downstream may change the attribute
    return node.xp.asarray(value, dtype=_LIST_VALUES[name])


def _check_constant_of_shape(node) -> None:
    value = node.attr("value")
    if value is not None:
        if value.size != 1:
            raise Unsupported("ConstantOfShape value must hold exactly one element")
        _check_tensor_value(node, value)


@op("ConstantOfShape", since=(9, 20, 21, 23, 24, 25), check=_check_constant_of_shape)
def constant_of_shape(node, shape):
    value = node.attr("value")
    if value is None:
        return node.xp.zeros(_ints(shape), dtype=node.xp.float32)
    out = node.xp.empty(_ints(shape), dtype=value.dtype)
    out.fill(value.reshape(-1)[0])
    return out


def _check_range(node) -> None:
    if node.attr("stash_type", 1) not in (1, 11):
        raise Unsupported(f"Range stash_type {node.attr('stash_type')}")


@op("Range", since=(11, 27), check=_check_range)
def range_(node, start, limit, delta):
    xp = node.xp
    dtype = start.dtype
    s, lim, d = _scalar(start), _scalar(limit), _scalar(delta)
    if d == 0:
        raise ValueError("Range: delta must not be 0")
    if dtype.kind in "iu":
        return xp.arange(s, lim, d, dtype=dtype)
    # output[i] = start + i * delta, computed in double (float16/bfloat16 in the stash type,
    # opset 27), then rounded to the output type.
    count = max(math.ceil((lim - s) / d), 0)
    stash_float = dtype.itemsize == 2 and node.attr("stash_type", 1) == 1
    compute = xp.float32 if stash_float else xp.float64
    return (xp.arange(count, dtype=compute) * compute(d) + compute(s)).astype(dtype)
