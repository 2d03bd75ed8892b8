"""Native kernels: indexing (see the registry module for the kernel conventions).

Index tensors may hold negative values (counting from the back) wherever the spec allows it;
they are normalised first and out-of-range indices are an error, as the spec says.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ..registry import Unsupported, op

# Up to this many index values, NumPy indices are range-checked as a Python list: for tiny
# index tensors (the common case in control graphs) that is several times cheaper than two
# array reductions.
_SMALL = 32


def _axis(axis: int, rank: int) -> int:
    """A possibly negative axis in [-rank, rank) as a non-negative one."""
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def _indices(xp, indices, dim: int, what: str):
    """Index values in [-dim, dim) as int64 in [0, dim); anything else is an error."""
    indices = indices.astype(xp.int64, copy=False)
    if indices.size:
        if xp is np and indices.size <= _SMALL:
            values = indices.ravel().tolist()
            low, high = min(values), max(values)
        else:
            low, high = int(indices.min()), int(indices.max())
        if low < -dim or high >= dim:
            raise IndexError(f"{what}: an index is out of range for a dimension of size {dim}")
        if low < 0:
            indices = xp.where(indices < 0, indices + dim, indices)
    return indices


def _within(indices, data, axis: int, what: str) -> None:
    """Off ``axis``, indices may be smaller than data (the leading block is addressed and the
    output takes indices' shape), never larger."""
    if indices.shape != data.shape and not _fits(indices.shape, data.shape, axis):
        raise ValueError(f"{what}: indices {indices.shape} exceed data {data.shape}")


@functools.lru_cache(maxsize=256)
def _fits(indices: tuple, data: tuple, axis: int) -> bool:
    return all(i == axis or n <= d for i, (n, d) in enumerate(zip(indices, data, strict=True)))


def _positions(xp, shape: tuple, axis: int) -> tuple:
    """Per axis of ``shape`` other than ``axis``, the positions along it shaped to broadcast
    (None at ``axis``)."""
    rank = len(shape)
    index = []
    for d, n in enumerate(shape):
        if d == axis:
            index.append(None)
            continue
        shape_d = [1] * rank
        shape_d[d] = n
        index.append(xp.arange(n, dtype=xp.int64).reshape(shape_d))
    return tuple(index)


@functools.lru_cache(maxsize=256)
def _host_positions(shape: tuple, axis: int) -> tuple:
    """:func:`_positions` on NumPy, cached by shape (read-only: they are only read, as
    indices)."""
    index = _positions(np, shape, axis)
    for positions in index:
        if positions is not None:
            positions.flags.writeable = False
    return index


def _along_axis(xp, picks, axis: int) -> tuple:
    """The advanced index that addresses ``picks`` along ``axis`` and, on every other axis,
    the position itself: ``a[index]`` is take_along_axis, ``a[index] = v`` put_along_axis (on
    the leading ``picks.shape`` block of ``a`` where ``a`` is larger off the axis)."""
    shape = picks.shape
    index = list(_host_positions(shape, axis) if xp is np else _positions(xp, shape, axis))
    index[axis] = picks
    return tuple(index)


# ---------------------------------------------------------------- gathering


def _prepare_gather(node, constants):
    """On NumPy, ``take`` with its default ``mode="raise"`` is exactly Gather for integer
    indices: negatives count from the back, anything out of range raises (then the kernel
    itself reports it)."""
    if node.xp is not np:
        return None
    axis_attr = node.attr("axis", 0)

    def kernel(node, data, indices):
        if indices.dtype.kind == "i" and -data.ndim <= axis_attr < data.ndim:
            try:
                return data.take(indices, axis=axis_attr)
            except IndexError:
                pass
        return gather(node, data, indices)

    return kernel


@op("Gather", since=(1, 11, 13), prepare=_prepare_gather)
def gather(node, data, indices):
    xp = node.xp
    axis = _axis(node.attr("axis", 0), data.ndim)
    dim = data.shape[axis]
    if indices.ndim == 0:  # one index: the axis drops out
        i = int(indices)
        if not -dim <= i < dim:
            raise IndexError(f"Gather: an index is out of range for a dimension of size {dim}")
        return data[(slice(None),) * axis + (i,)].copy()
    return xp.take(data, _indices(xp, indices, dim, "Gather"), axis=axis)


def _prepare_gather_elements(node, constants):
    """On NumPy, indices exactly as large as data off the axis: advanced indexing counts
    negatives from the back and raises for anything out of range (then the kernel itself
    reports it), so the indices need no separate pass. Along an axis of size 1 (a decode
    step's one new position, spread over the whole cache) every index is 0 or -1 and the
    result is the data broadcast to the indices' shape."""
    if node.xp is not np:
        return None
    axis_attr = node.attr("axis", 0)

    def kernel(node, data, indices):
        rank = data.ndim
        if indices.ndim == rank and -rank <= axis_attr < rank and indices.dtype.kind == "i":
            axis = axis_attr + rank if axis_attr < 0 else axis_attr
            shape, wanted = data.shape, indices.shape
            if shape[:axis] == wanted[:axis] and shape[axis + 1 :] == wanted[axis + 1 :]:
                if indices.size == 0:
                    return data[_along_axis(np, indices, axis)]
                if shape[axis] == 1:
                    # All zeros (the usual case) is one cheap count; else the bounds.
                    if not np.count_nonzero(indices) or (
                        np.minimum.reduce(indices, axis=None) >= -1
                        and np.maximum.reduce(indices, axis=None) <= 0
                    ):
                        out = np.empty(wanted, dtype=data.dtype)
                        out[...] = data  # broadcasts along the axis
                        return out
                else:
                    try:
                        return data[_along_axis(np, indices, axis)]
                    except IndexError:
                        pass
        return gather_elements(node, data, indices)

    return kernel


@op("GatherElements", since=(11, 13), prepare=_prepare_gather_elements)
def gather_elements(node, data, indices):
    xp = node.xp
    axis = _axis(node.attr("axis", 0), data.ndim)
    if indices.ndim != data.ndim:
        raise ValueError("GatherElements: data and indices must have the same rank")
    _within(indices, data, axis, "GatherElements")
    picks = _indices(xp, indices, data.shape[axis], "GatherElements")
    return data[_along_axis(xp, picks, axis)]


def _check_gather_nd(node) -> None:
    if node.attr("batch_dims", 0) < 0:
        raise Unsupported("GatherND with negative batch_dims")


@op("GatherND", since=(11, 12, 13), check=_check_gather_nd)
def gather_nd(node, data, indices):
    # out[b..., i...] = data[b..., *indices[b..., i..., :]] with b the leading batch_dims dims.
    xp = node.xp
    b = node.attr("batch_dims", 0)
    k = indices.shape[-1]
    if b + k > data.ndim or data.shape[:b] != indices.shape[:b]:
        raise ValueError(f"GatherND: indices {indices.shape} do not fit data {data.shape}")
    batch = math.prod(data.shape[:b])
    flat_data = data.reshape(batch, *data.shape[b:])
    flat_idx = indices.reshape(batch, math.prod(indices.shape[b:-1]), k)
    coords = [_indices(xp, flat_idx[..., j], data.shape[b + j], "GatherND") for j in range(k)]
    rows = xp.arange(batch, dtype=xp.int64)[:, None]
    picked = flat_data[(rows, *coords)]
    return picked.reshape(*indices.shape[:-1], *data.shape[b + k :])


# ---------------------------------------------------------------- scattering

_REDUCTIONS = ("none", "add", "mul", "max", "min")


def _check_scatter(node) -> None:
    reduction = node.attr("reduction", "none")
    if reduction not in _REDUCTIONS:
        raise Unsupported(f"{node.op_type} reduction {reduction!r}")


def _combine(xp, reduction: str, old, new):
    if reduction == "add":
        return old + new
    if reduction == "mul":
        return old * new
    if reduction == "max":
        return xp.maximum(old, new)
    if reduction == "min":
        return xp.minimum(old, new)
    return new


def _scatter_rows(xp, out, rows, updates, reduction: str):
    """out[rows[i]] = combine(out[rows[i]], updates[i]) for i in order, in place on the 2-D
    ``out``. Duplicate rows are applied one after another (in index order), in as many
    vectorised rounds as the largest number of repeats of one row."""
    n = rows.shape[0]
    if n == 0:
        return out
    position = xp.arange(n, dtype=xp.int64)
    order = xp.argsort(rows * n + position)  # by row, then by position: unique keys
    sorted_rows = rows[order]
    first = xp.concatenate([xp.ones(1, dtype=bool), sorted_rows[1:] != sorted_rows[:-1]])
    group = xp.cumsum(first) - 1
    starts = xp.flatnonzero(first)
    repeat = xp.empty(n, dtype=xp.int64)
    repeat[order] = position - starts[group]  # how many earlier updates hit the same row
    for r in range(int(repeat.max()) + 1):
        chosen = repeat == r
        target = rows[chosen]
        out[target] = _combine(xp, reduction, out[target], updates[chosen])
    return out


def _linear(xp, index_columns, dims, n: int):
    """Row-major linear index of ``n`` coordinates (one column per dim) into shape ``dims``."""
    linear = xp.zeros(n, dtype=xp.int64)
    for column, dim in zip(index_columns, dims, strict=True):
        linear = linear * dim + column
    return linear


def _small_linear(coordinates: list, dims: tuple) -> list[int]:
    """:func:`_linear` of a few coordinates given as Python lists (one per index, each
    possibly negative), range-checked like :func:`_indices`."""
    rows = []
    for coordinate in coordinates:
        linear = 0
        for c, dim in zip(coordinate, dims, strict=True):
            if not -dim <= c < dim:
                raise IndexError(
                    f"ScatterND: an index is out of range for a dimension of size {dim}"
                )
            linear = linear * dim + (c + dim if c < 0 else c)
        rows.append(linear)
    return rows


@op("ScatterElements", since=(11, 13, 16, 18), check=_check_scatter)
def scatter_elements(node, data, indices, updates):
    # out[..., indices[i, j, ...], ...] (indices replacing the axis coordinate) = updates[...]
    xp = node.xp
    axis = _axis(node.attr("axis", 0), data.ndim)
    if indices.shape != updates.shape or indices.ndim != data.ndim:
        raise ValueError("ScatterElements: indices and updates must match, with data's rank")
    _within(indices, data, axis, "ScatterElements")
    out = data.copy()
    if indices.size == 0:
        return out
    picks = _indices(xp, indices, data.shape[axis], "ScatterElements")
    reduction = node.attr("reduction", "none")
    if reduction == "none":  # duplicates are unspecified by ONNX: the last write wins here
        out[_along_axis(xp, picks, axis)] = updates
        return out
    coords = list(xp.indices(indices.shape, dtype=xp.int64))
    coords[axis] = picks
    rows = _linear(xp, [c.reshape(-1) for c in coords], data.shape, indices.size)
    flat = out.reshape(-1, 1)
    _scatter_rows(xp, flat, rows, updates.reshape(-1, 1), reduction)
    return flat.reshape(data.shape)


@op("Scatter", since=(9, 11))
def scatter(node, data, indices, updates):
    """The deprecated Scatter: ScatterElements without reduction."""
    return scatter_elements(node, data, indices, updates)


@op("ScatterND", since=(11, 13, 16, 18), check=_check_scatter)
def scatter_nd(node, data, indices, updates):
    # out[*indices[i..., :]] = updates[i...], each index addressing a slice of data.
    xp = node.xp
    k = indices.shape[-1]
    if k > data.ndim or updates.shape != indices.shape[:-1] + data.shape[k:]:
        raise ValueError(
            f"ScatterND: data {data.shape}, indices {indices.shape}, updates {updates.shape}"
        )
    out = data.copy()
    if updates.size == 0:
        return out
    flat_idx = indices.reshape(math.prod(indices.shape[:-1]), k)
    if xp is np and indices.size <= _SMALL:
        rows = np.asarray(_small_linear(flat_idx.tolist(), data.shape[:k]), dtype=np.int64)
    else:
        columns = [_indices(xp, flat_idx[:, j], data.shape[j], "ScatterND") for j in range(k)]
        rows = _linear(xp, columns, data.shape[:k], flat_idx.shape[0])
    table = out.reshape(math.prod(data.shape[:k]), -1)
    reduction = node.attr("reduction", "none")
    if reduction == "none":  # duplicates are unspecified by ONNX: the last write wins here
        table[rows] = updates.reshape(rows.shape[0], -1)
    else:
        _scatter_rows(xp, table, rows, updates.reshape(rows.shape[0], -1), reduction)
    return table.reshape(data.shape)


# ---------------------------------------------------------------- building from indices


@op("OneHot", since=(9, 11, 28))
def one_hot(node, indices, depth, values):
    xp = node.xp
    depth = int(depth.reshape(-1)[0].item())
    axis = node.attr("axis", -1)
    rank = indices.ndim + 1
    axis = _axis(axis, rank)
    idx = indices.astype(xp.int64)  # the spec casts non-integer indices to int64
    # In [-depth, depth), negatives counting from the back; anything else: all off.
    if not (xp is np and idx.size <= _SMALL and min(idx.ravel().tolist(), default=0) >= 0):
        idx = xp.where(idx < 0, idx + depth, idx)
    shape = [1] * rank
    shape[axis] = depth
    expanded = idx.reshape(idx.shape[:axis] + (1,) + idx.shape[axis:])
    hit = expanded == xp.arange(depth, dtype=xp.int64).reshape(shape)
    return values[hit.astype(xp.intp)]  # values[1] where hit, values[0] elsewhere


@op("Trilu", since=(14,))
def trilu(node, x, k=None):
    xp = node.xp
    k = 0 if k is None else int(k.reshape(-1)[0].item())
    n, m = x.shape[-2:]
    offset = xp.arange(m, dtype=xp.int64)[None, :] - xp.arange(n, dtype=xp.int64)[:, None]
    keep = offset >= k if node.attr("upper", 1) else offset <= k
    return xp.where(keep, x, xp.zeros((), dtype=x.dtype))


@op("CumSum", since=(11, 14))
def cumsum(node, x, axis):
    xp = node.xp
    axis = _axis(int(axis.reshape(-1)[0].item()), x.ndim)
    reverse = node.attr("reverse", 0)
    if reverse:
        x = xp.flip(x, axis)
    out = x.cumsum(axis=axis, dtype=x.dtype)
    if node.attr("exclusive", 0):
        # Shift by one along the axis: out[0] = 0, out[i] = sum(x[:i]).
        head = [slice(None)] * x.ndim
        head[axis] = slice(0, 1)
        body = [slice(None)] * x.ndim
        body[axis] = slice(0, -1)
        out = xp.concatenate([xp.zeros_like(x[tuple(head)]), out[tuple(body)]], axis=axis)
    if reverse:
        out = xp.flip(out, axis)
    return out


# ---------------------------------------------------------------- ordering and searching


@op("TopK", since=(1, 10, 11, 24))
def top_k(node, x, k=None):
    # k: an attribute in opset 1, an input from 10 on. Ties go to the lower index, like ONNX.
    xp = node.xp
    k = node.attr("k") if k is None else int(k.reshape(-1)[0].item())
    axis = _axis(node.attr("axis", -1), x.ndim)
    n = x.shape[axis]
    if not 0 <= k <= n:
        raise ValueError(f"TopK: k={k} for an axis of size {n}")
    along = (slice(None),) * axis
    if node.attr("largest", 1):
        # A stable ascending sort of the reversed axis, read backwards: descending values,
        # equal values in ascending index order.
        backwards = (*along, slice(None, None, -1))
        order = xp.argsort(x[backwards], axis=axis, kind="stable")
        order = (n - 1) - order[(*along, slice(n - 1, n - 1 - k if k < n else None, -1))]
    else:
        order = xp.argsort(x, axis=axis, kind="stable")[(*along, slice(0, k))]
    order = order.astype(xp.int64, copy=False)
    # sorted=0 leaves the order unspecified, so sorted results conform too.
    return x[_along_axis(xp, order, axis)], order


def _arg_extreme(node, x, pick: str):
    xp = node.xp
    axis = _axis(node.attr("axis", 0), x.ndim)
    if node.attr("select_last_index", 0):
        index = (x.shape[axis] - 1) - getattr(xp.flip(x, axis), pick)(axis=axis)
    else:
        index = getattr(x, pick)(axis=axis)
    index = index.astype(xp.int64, copy=False)
    if node.attr("keepdims", 1):
        return index.reshape(index.shape[:axis] + (1,) + index.shape[axis:])
    return index


@op("ArgMax", since=(1, 11, 12, 13))
def arg_max(node, x):
    return _arg_extreme(node, x, "argmax")


@op("ArgMin", since=(1, 11, 12, 13))
def arg_min(node, x):
    return _arg_extreme(node, x, "argmin")


@op("NonZero", since=(9, 13))
def non_zero(node, x):
    xp = node.xp
    if x.ndim == 0:  # shape (0, 1) or (0, 0): no coordinates to give
        return xp.zeros((0, int(bool(x.item()))), dtype=xp.int64)
    return xp.stack(xp.nonzero(x)).astype(xp.int64)


@op("Compress", since=(9, 11, 28))
def compress(node, x, condition):
    xp = node.xp
    axis = node.attr("axis")
    if axis is None:
        x, axis = x.reshape(-1), 0
    axis = _axis(axis, x.ndim)
    chosen = xp.flatnonzero(condition)
    if chosen.size and int(chosen[-1]) >= x.shape[axis]:
        raise IndexError("Compress: condition selects beyond the axis")
    return xp.take(x, chosen, axis=axis)
