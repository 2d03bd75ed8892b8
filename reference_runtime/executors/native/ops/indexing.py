"""Native kernels: indexing (see the registry module for the kernel conventions).

Index tensors may hold negative values (counting from the back) wherever the spec allows it;
they are normalised first and out-of-range indices are an error, as the spec says.
"""

from __future__ import annotations

import math

from ..registry import Unsupported, op


def _axis(axis: int, rank: int) -> int:
    """A possibly negative axis in [-rank, rank) as a non-negative one."""
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def _indices(xp, indices, dim: int, what: str):
    """Index values in [-dim, dim) as int64 in [0, dim); anything else is an error."""
    indices = indices.astype(xp.int64, copy=False)
    if indices.size:
        low, high = int(indices.min()), int(indices.max())
        if low < -dim or high >= dim:
            raise IndexError(f"{what}: an index is out of range for a dimension of size {dim}")
        if low < 0:
            indices = xp.where(indices < 0, indices + dim, indices)
    return indices


def _within(indices, data, axis: int, what: str) -> None:
    """Off ``axis``, indices may be smaller than data (the leading block is addressed and the
    output takes indices' shape), never larger."""
    for i, (n, d) in enumerate(zip(indices.shape, data.shape, strict=True)):
        if i != axis and n > d:
            raise ValueError(f"{what}: indices {indices.shape} exceed data {data.shape}")


def _along_axis(xp, picks, axis: int) -> tuple:
    """The advanced index that addresses ``picks`` along ``axis`` and, on every other axis,
    the position itself: ``a[index]`` is take_along_axis, ``a[index] = v`` put_along_axis (on
    the leading ``picks.shape`` block of ``a`` where ``a`` is larger off the axis)."""
    rank = picks.ndim
    index = []
    for d, n in enumerate(picks.shape):
        if d == axis:
            index.append(picks)
        else:
            shape = [1] * rank
            shape[d] = n
            index.append(xp.arange(n, dtype=xp.int64).reshape(shape))
    return tuple(index)


# ---------------------------------------------------------------- gathering


@op("Gather", since=(1, 11, 13))
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


@op("GatherElements", since=(11, 13))
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
    idx = xp.where(idx < 0, idx + depth, idx)  # in [-depth, depth); anything else: all off
    shape = [1] * rank
    shape[axis] = depth
    hit = xp.expand_dims(idx, axis) == xp.arange(depth, dtype=xp.int64).reshape(shape)
    return xp.where(hit, values[1], values[0])


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


def _arg_extreme(node, x, pick):
    xp = node.xp
    axis = _axis(node.attr("axis", 0), x.ndim)
    if node.attr("select_last_index", 0):
        index = (x.shape[axis] - 1) - pick(xp.flip(x, axis), axis=axis)
    else:
        index = pick(x, axis=axis)
    index = index.astype(xp.int64)
    return xp.expand_dims(index, axis) if node.attr("keepdims", 1) else index


@op("ArgMax", since=(1, 11, 12, 13))
def arg_max(node, x):
    return _arg_extreme(node, x, node.xp.argmax)


@op("ArgMin", since=(1, 11, 12, 13))
def arg_min(node, x):
    return _arg_extreme(node, x, node.xp.argmin)


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
