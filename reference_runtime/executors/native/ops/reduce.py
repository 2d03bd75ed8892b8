"""Native kernels: reduce (see the registry module for the kernel conventions).

Every Reduce* op is ``post(reduce(pre(x), axes))``. Axes come from the ``axes`` attribute
(older opsets) or the optional ``axes`` input (ReduceSum from 13, the others from 18). Empty
axes mean "all axes", unless ``noop_with_empty_axes`` is set: then nothing is reduced and only
the elementwise steps run (ReduceSumSquare squares, ReduceLogSum takes the log, ...).

float16 and bfloat16 are accumulated in float32 and cast back to the input dtype.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..registry import op

_low_precision = dtypes.low_precision


def _work(node, x):
    """The array to compute with: float16/bfloat16 widened to float32."""
    return x.astype(node.xp.float32) if _low_precision(x.dtype) else x


def _decode_axes(axes_input) -> tuple[int, ...]:
    return tuple(int(a) for a in axes_input.reshape(-1).tolist())


class _Resolved(tuple):
    """Axes already resolved by :func:`_axes` for the input's rank (sorted, non-negative)."""


def _axes(node, x, axes_input):
    """The axes to reduce as a tuple: ``()`` means no reduction at all. ``axes_input`` is the
    axes input, or those axes already decoded (a tuple) when they are a constant, or already
    resolved for ``x``'s rank."""
    if axes_input.__class__ is _Resolved:
        return axes_input
    if axes_input is not None:
        axes = axes_input if axes_input.__class__ is tuple else _decode_axes(axes_input)
    else:
        axes = list(node.attr("axes", []) or [])
    if not axes:
        return () if node.attr("noop_with_empty_axes", 0) else tuple(range(x.ndim))
    return tuple(sorted({a + x.ndim if a < 0 else a for a in axes}))


def _keepdims(node) -> bool:
    return bool(node.attr("keepdims", 1))


def _empty(node, x, axes, value):
    """The result of reducing an empty set: ``value`` everywhere, in the right shape."""
    keep = _keepdims(node)
    shape = tuple((1 if keep else None) if i in axes else n for i, n in enumerate(x.shape))
    return node.xp.full(tuple(n for n in shape if n is not None), value, dtype=x.dtype)


def _squeeze(node, y, axes):
    if not axes or _keepdims(node):
        return y
    return y.reshape([n for i, n in enumerate(y.shape) if i not in axes])


def _sum(node, x, axes):
    """Sum over ``axes`` keeping dims, in ``x``'s dtype (no int promotion)."""
    if node.xp is np:  # what ndarray.sum calls, without its Python wrapper
        return np.add.reduce(x, axis=axes, dtype=x.dtype, keepdims=True)
    return x.sum(axis=axes, keepdims=True, dtype=x.dtype)


def _finish(node, y, axes, dtype):
    return _squeeze(node, y, axes).astype(dtype, copy=False)


# ------------------------------------------------------------------ the reductions

V_SUM = (1, 11, 13)
V18 = (1, 11, 13, 18)
V_MAXMIN = (1, 11, 12, 13, 18, 20)
V_LOG = (1, 11, 13, 18)  # 28 only narrows the types


def reduction(op_type: str, since, fast=None):
    """Register a Reduce* kernel ``fn(node, data, axes=None)``; a constant axes input is
    decoded once, when the plan is compiled, and handed to ``fn`` as a tuple.

    ``fast(data, axes)``, given, is the reduction itself on NumPy for a non-empty ``data`` of a
    dtype computed as it is (not float16/bfloat16, which are widened) and a non-empty set of
    axes, with the dims kept: what ``fn`` computes there, without the steps that do nothing
    for it. It may return None to leave the input to ``fn``."""

    def register(fn):
        def prepare(node, constants):
            if 1 not in constants:
                return None
            axes = _decode_axes(constants[1])
            resolved: dict[int, _Resolved] = {}  # per input rank
            direct = fast if node.xp is np else None
            keepdims = _keepdims(node)

            def kernel(node, data, _axes_input):
                found = resolved.get(data.ndim)
                if found is None:
                    found = resolved[data.ndim] = _Resolved(_axes(node, data, axes))
                if direct is not None and found and data.size and not _low_precision(data.dtype):
                    y = direct(data, found)
                    if y is not None:
                        return y if keepdims else _squeeze(node, y, found)
                return fn(node, data, found)

            return kernel

        return op(op_type, since=since, prepare=prepare)(fn)

    return register


@reduction("ReduceSum", V_SUM)
def reduce_sum(node, data, axes=None):
    axes = _axes(node, data, axes)
    if not axes:
        return data
    return _finish(node, _sum(node, _work(node, data), axes), axes, data.dtype)


@reduction("ReduceSumSquare", V18)
def reduce_sum_square(node, data, axes=None):
    axes = _axes(node, data, axes)
    x = _work(node, data)
    x = x * x
    if not axes:
        return x.astype(data.dtype, copy=False)
    return _finish(node, _sum(node, x, axes), axes, data.dtype)


@reduction("ReduceL1", V18)
def reduce_l1(node, data, axes=None):
    axes = _axes(node, data, axes)
    x = node.xp.abs(_work(node, data))
    if not axes:
        return x.astype(data.dtype, copy=False)
    return _finish(node, _sum(node, x, axes), axes, data.dtype)


@reduction("ReduceL2", V18)
def reduce_l2(node, data, axes=None):
    xp = node.xp
    axes = _axes(node, data, axes)
    x = _work(node, data)
    if data.dtype.kind in "iu":  # sqrt of an integer sum, truncated back to the int type
        x = x.astype(xp.float64)
    x = x * x
    y = _sum(node, x, axes) if axes else x
    return _finish(node, xp.sqrt(y), axes, data.dtype)


def _fast_mean(data, axes):
    if data.dtype.kind != "f":  # integers: a mean in float64, truncated back
        return None
    count = 1
    for a in axes:
        count *= data.shape[a]
    return np.add.reduce(data, axis=axes, dtype=data.dtype, keepdims=True) / data.dtype.type(count)


@reduction("ReduceMean", V18, fast=_fast_mean)
def reduce_mean(node, data, axes=None):
    xp = node.xp
    axes = _axes(node, data, axes)
    if not axes:
        return data
    x = _work(node, data)
    if data.dtype.kind in "iub":
        x = x.astype(xp.float64)  # integer mean, truncated back to the int type
    count = 1
    for a in axes:
        count *= data.shape[a]
    if count == 0:
        return _empty(node, data, axes, float("nan"))
    return _finish(node, _sum(node, x, axes) / x.dtype.type(count), axes, data.dtype)


@reduction("ReduceProd", V18)
def reduce_prod(node, data, axes=None):
    axes = _axes(node, data, axes)
    if not axes:
        return data
    x = _work(node, data)
    y = x.prod(axis=axes, keepdims=True, dtype=x.dtype)
    return _finish(node, y, axes, data.dtype)


def _lowest(node, dtype):
    xp = node.xp
    if dtype.kind == "b":
        return False
    if dtype.kind in "iu":
        return xp.iinfo(dtype).min
    return float("-inf")


def _highest(node, dtype):
    xp = node.xp
    if dtype.kind == "b":
        return True
    if dtype.kind in "iu":
        return xp.iinfo(dtype).max
    return float("inf")


def _fast_max(data, axes):
    return np.maximum.reduce(data, axis=axes, keepdims=True)


@reduction("ReduceMax", V_MAXMIN, fast=_fast_max)
def reduce_max(node, data, axes=None):
    axes = _axes(node, data, axes)
    if not axes:
        return data
    if data.size == 0:
        return _empty(node, data, axes, _lowest(node, data.dtype))
    x = _work(node, data)
    if node.xp is np:  # what ndarray.max calls, without its Python wrapper
        y = np.maximum.reduce(x, axis=axes, keepdims=True)
    else:
        y = x.max(axis=axes, keepdims=True)
    return _finish(node, y, axes, data.dtype)


@reduction("ReduceMin", V_MAXMIN)
def reduce_min(node, data, axes=None):
    axes = _axes(node, data, axes)
    if not axes:
        return data
    if data.size == 0:
        return _empty(node, data, axes, _highest(node, data.dtype))
    x = _work(node, data)
    if node.xp is np:  # what ndarray.min calls, without its Python wrapper
        y = np.minimum.reduce(x, axis=axes, keepdims=True)
    else:
        y = x.min(axis=axes, keepdims=True)
    return _finish(node, y, axes, data.dtype)


@reduction("ReduceLogSum", V_LOG)
def reduce_log_sum(node, data, axes=None):
    xp = node.xp
    axes = _axes(node, data, axes)
    if data.size == 0:
        return _empty(node, data, axes, float("-inf"))
    x = _work(node, data)
    y = _sum(node, x, axes) if axes else x
    return _finish(node, xp.log(y), axes, data.dtype)


@reduction("ReduceLogSumExp", V_LOG)
def reduce_log_sum_exp(node, data, axes=None):
    xp = node.xp
    axes = _axes(node, data, axes)
    if data.size == 0:
        return _empty(node, data, axes, float("-inf"))
    x = _work(node, data)
    if not axes:
        return xp.log(xp.exp(x)).astype(data.dtype, copy=False)
    # Shift by the largest finite value so exp cannot overflow.
    finite = xp.where(xp.isfinite(x), x, x.dtype.type(-xp.inf))
    top = xp.max(finite, axis=axes, keepdims=True)
    top = xp.where(xp.isfinite(top), top, x.dtype.type(0))
    y = xp.log(_sum(node, xp.exp(x - top), axes)) + top
    return _finish(node, y, axes, data.dtype)
