"""Native kernels: nn (see the registry module for the kernel conventions).

Precision: matrix products and the normalizations accumulate float16/bfloat16 in float32 and
cast the result back to the ONNX output dtype. Softmax, LogSoftmax and the elementwise steps of
Attention run in the input dtype itself, as their ONNX definitions (and function bodies) do, so a
graph and its expanded function body agree. float32 and float64 run in their own precision.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes
from ..registry import Unsupported, op

_low_precision = dtypes.low_precision


def _work(node, x):
    """``x`` widened to the dtype it is computed in (float16/bfloat16 -> float32)."""
    return x.astype(node.xp.float32) if _low_precision(x.dtype) else x


def _axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def _scalar(x, value):
    """``value`` as a scalar of ``x``'s dtype (so no wider dtype creeps in)."""
    return x.dtype.type(value)


# ------------------------------------------------------------------ Softmax, LogSoftmax, Hardmax


def _softmax(xp, x, axis):
    e = xp.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _log_softmax(xp, x, axis):
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - xp.log(xp.exp(shifted).sum(axis=axis, keepdims=True))


def _hardmax(xp, x, axis):
    """One-hot of the first maximum along ``axis``."""
    first = xp.expand_dims(xp.argmax(x, axis=axis), axis)
    index = xp.arange(x.shape[axis]).reshape((-1,) + (1,) * (x.ndim - 1 - axis))
    return index == first


def _per_axis(node, x, fn):
    """Opset 13 on: ``fn`` along the single axis ``axis`` (default -1)."""
    if x.size == 0:
        return x
    y = fn(node.xp, x, _axis(node.attr("axis", -1), x.ndim))
    return y.astype(x.dtype, copy=False)


def _coerced(node, x, fn):
    """Before opset 13: ``x`` coerced to 2-D [a0*..*ak-1, ak*..*an-1] at ``axis`` (default 1),
    ``fn`` along the second dimension, the result reshaped back."""
    if x.size == 0:
        return x
    axis = _axis(node.attr("axis", 1), x.ndim)
    flat = x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))
    return fn(node.xp, flat, 1).reshape(x.shape).astype(x.dtype, copy=False)


@op("Softmax", since=(1, 11))
def softmax_v1(node, x):
    return _coerced(node, x, _softmax)


def _prepare_softmax(node, constants):
    """On NumPy, float32/float64: the same steps as :func:`_softmax` (the reductions the
    ndarray methods call), without the Python around them."""
    if node.xp is not np:
        return None
    axis_attr = node.attr("axis", -1)
    wide = (np.dtype(np.float32), np.dtype(np.float64))

    def kernel(node, x):
        if x.dtype not in wide or not x.size or not -x.ndim <= axis_attr < x.ndim:
            return softmax(node, x)
        axis = axis_attr + x.ndim if axis_attr < 0 else axis_attr
        e = np.exp(x - np.maximum.reduce(x, axis=axis, keepdims=True))
        return e / np.add.reduce(e, axis=axis, keepdims=True)

    return kernel


@op("Softmax", since=13, prepare=_prepare_softmax)
def softmax(node, x):
    return _per_axis(node, x, _softmax)


@op("LogSoftmax", since=(1, 11))
def log_softmax_v1(node, x):
    return _coerced(node, x, _log_softmax)


@op("LogSoftmax", since=13)
def log_softmax(node, x):
    return _per_axis(node, x, _log_softmax)


@op("Hardmax", since=(1, 11))
def hardmax_v1(node, x):
    return _coerced(node, x, _hardmax)


@op("Hardmax", since=13)
def hardmax(node, x):
    return _per_axis(node, x, _hardmax)


# ------------------------------------------------------------------ MatMul, Gemm, Einsum


def _matmul(node, a, b):
    """a @ b in ``a``'s dtype, accumulated in float32 for float16/bfloat16."""
    return node.xp.matmul(_work(node, a), _work(node, b)).astype(a.dtype, copy=False)


def _prepare_matmul(node, constants):
    """Operands of one dtype computed in that dtype go straight to ``xp.matmul``."""

    def kernel(node, a, b):
        dtype = a.dtype
        if dtype is b.dtype and (dtype.itemsize != 2 or not _low_precision(dtype)):
            return a @ b  # xp.matmul, without the call through the module
        return _matmul(node, a, b)

    return kernel


@op("MatMul", since=(1, 9, 13), prepare=_prepare_matmul)
def matmul(node, a, b):
    return _matmul(node, a, b)


def _prepare_gemm(node, constants):
    """alpha = beta = 1 with operands of one dtype computed in that dtype: the product (and
    the sum with C) straight away, the transpositions decided once."""
    if node.attr("alpha", 1.0) != 1.0 or node.attr("beta", 1.0) != 1.0:
        return None
    product = node.xp.matmul
    trans_a, trans_b = node.attr("transA", 0), node.attr("transB", 0)

    def kernel(node, a, b, c=None):
        dtype = a.dtype
        if (
            dtype is not b.dtype
            or _low_precision(dtype)
            or (c is not None and c.dtype is not dtype)
        ):
            return gemm(node, a, b, c)
        y = product(a.T if trans_a else a, b.T if trans_b else b)
        return y if c is None else y + c

    return kernel


@op("Gemm", since=(1, 6, 7, 9, 11, 13), prepare=_prepare_gemm)
def gemm(node, a, b, c=None):
    """Y = alpha * A' @ B' + beta * C; A' and B' optionally transposed, C broadcast."""
    dtype = a.dtype
    a, b = _work(node, a), _work(node, b)
    a = a.T if node.attr("transA", 0) else a
    b = b.T if node.attr("transB", 0) else b
    y = node.xp.matmul(a, b)
    alpha, beta = node.attr("alpha", 1.0), node.attr("beta", 1.0)
    if alpha != 1.0:
        y = y * _coefficient(y, alpha)
    if c is not None:
        c = _work(node, c)
        y = y + (c if beta == 1.0 else c * _coefficient(c, beta))
    return y.astype(dtype, copy=False)


def _coefficient(x, value):
    """A float attribute as a multiplier of ``x``: a scalar of its dtype for floats, a Python
    float for the integer types (which ONNX defines there too; cast back at the end)."""
    return value if x.dtype.kind in "iu" else _scalar(x, value)


@op("Einsum", since=(12, 28))
def einsum(node, *inputs):
    y = node.xp.einsum(node.attr("equation"), *[_work(node, x) for x in inputs])
    return node.xp.asarray(y).astype(inputs[0].dtype, copy=False)


# ------------------------------------------------------------------ normalizations


def _check_stash_type(node) -> None:
    if node.attr("stash_type", 1) != 1:
        raise Unsupported(f"{node.op_type} with stash_type {node.attr('stash_type')} (only 1)")


def _stash(node, x):
    """LayerNormalization/RMSNormalization compute in float32 (stash_type 1), float64 in its own
    precision."""
    return x if x.dtype == node.xp.float64 else x.astype(node.xp.float32)


@op("LayerNormalization", since=17, check=_check_stash_type)
def layer_normalization(node, x, scale, bias=None):
    """Normalize over the axes from ``axis`` on; outputs Y, Mean and InvStdDev (float32)."""
    xp = node.xp
    axes = tuple(range(_axis(node.attr("axis", -1), x.ndim), x.ndim))
    w = _stash(node, x)
    mean = xp.mean(w, axis=axes, keepdims=True)
    centred = w - mean
    variance = xp.mean(centred * centred, axis=axes, keepdims=True)
    inv_std = 1 / xp.sqrt(variance + _scalar(w, node.attr("epsilon", 1e-5)))
    y = centred * inv_std * scale.astype(w.dtype)
    if bias is not None:
        y = y + bias.astype(w.dtype)
    f32 = xp.float32
    return y.astype(x.dtype), mean.astype(f32, copy=False), inv_std.astype(f32, copy=False)


@op("RMSNormalization", since=23, check=_check_stash_type)
def rms_normalization(node, x, scale):
    """Y = X / sqrt(mean(X^2 over the axes from ``axis`` on) + epsilon) * scale."""
    xp = node.xp
    axes = tuple(range(_axis(node.attr("axis", -1), x.ndim), x.ndim))
    w = _stash(node, x)
    mean_square = xp.mean(w * w, axis=axes, keepdims=True)
    y = w / xp.sqrt(mean_square + _scalar(w, node.attr("epsilon", 1e-5)))
    return (y * scale.astype(w.dtype)).astype(scale.dtype)


@op("MeanVarianceNormalization", since=(9, 13))
def mean_variance_normalization(node, x):
    """(X - E[X]) / (sqrt(E[X^2] - E[X]^2) + 1e-9) over ``axes`` (default [0, 2, 3])."""
    xp = node.xp
    axes = tuple(_axis(a, x.ndim) for a in node.attr("axes", [0, 2, 3]))
    w = _work(node, x)
    mean = xp.mean(w, axis=axes, keepdims=True)
    variance = xp.mean(w * w, axis=axes, keepdims=True) - mean * mean
    y = (w - mean) / (xp.sqrt(variance) + _scalar(w, 1e-9))
    return y.astype(x.dtype, copy=False)


def _per_channel(v, x):
    """A per-channel (C,) vector shaped to broadcast against (N, C, D1, ..., Dn)."""
    return v.reshape((-1,) + (1,) * (x.ndim - 2))


@op("InstanceNormalization", since=(1, 6, 22))
def instance_normalization(node, x, scale, bias):
    """Normalize every (n, c) over the spatial axes, then scale and shift per channel."""
    xp = node.xp
    axes = tuple(range(2, x.ndim))
    w = _work(node, x)
    mean = xp.mean(w, axis=axes, keepdims=True)
    variance = xp.var(w, axis=axes, keepdims=True)
    normal = (w - mean) / xp.sqrt(variance + _scalar(w, node.attr("epsilon", 1e-5)))
    scale, bias = _per_channel(scale, x), _per_channel(bias, x)
    y = normal * scale.astype(w.dtype) + bias.astype(w.dtype)
    return y.astype(x.dtype, copy=False)


def _check_batch_normalization(node) -> None:
    if node.attr("training_mode", 0):
        raise Unsupported("BatchNormalization with training_mode=1 (inference only)")
    if node.opset < 7 and not node.attr("is_test", 0):
        raise Unsupported("BatchNormalization with is_test=0 (training; inference only)")
    if any(node.proto.output[1:]):
        raise Unsupported("BatchNormalization's training outputs (inference only)")


@op("BatchNormalization", since=(1, 6, 7, 9, 14, 15), check=_check_batch_normalization)
def batch_normalization(node, x, scale, bias, mean, var):
    """Inference: (X - mean) / sqrt(var + epsilon) * scale + B, per channel (axis 1); before
    opset 9 ``spatial=0`` gives per-activation statistics of shape (C, D1, ..., Dn)."""
    xp = node.xp
    w = _work(node, x)
    stats = [_work(node, v) for v in (scale, bias, mean, var)]
    if scale.ndim == 1:
        stats = [_per_channel(v, x) for v in stats]
    scale, bias, mean, var = (v.astype(w.dtype, copy=False) for v in stats)
    y = (w - mean) / xp.sqrt(var + _scalar(w, node.attr("epsilon", 1e-5))) * scale + bias
    return y.astype(x.dtype, copy=False)


def _check_dropout(node) -> None:
    if node.opset < 7 and not node.attr("is_test", 0):
        raise Unsupported("Dropout with is_test=0 (random training dropout; inference only)")
    if len(node.proto.input) > 2 and node.proto.input[2]:
        # Its value is only known at run time, and true asks for random dropout.
        raise Unsupported("Dropout with a training_mode input (training dropout; inference only)")


@op("Dropout", since=(1, 6, 7, 10, 12, 13, 22), check=_check_dropout)
def dropout(node, data, ratio=None):
    """Inference: the identity, and a mask of ones (bool from opset 10, data's dtype before)."""
    if node.n_outputs < 2:
        return data
    xp = node.xp
    return data, xp.ones(data.shape, dtype=xp.bool_ if node.opset >= 10 else data.dtype)


# ------------------------------------------------------------------ RotaryEmbedding


@op("RotaryEmbedding", since=23)
def rotary_embedding(node, x, cos_cache, sin_cache, position_ids=None):
    """Rotate pairs of each head's first ``rotary_embedding_dim`` features (default: all) by
    the cached angles: halves (x[:d/2], x[d/2:]) or, ``interleaved``, (x[0::2], x[1::2])."""
    xp = node.xp
    if x.ndim == 4:  # (batch, heads, seq, head) -> (batch, seq, heads, head)
        t = xp.transpose(_work(node, x), (0, 2, 1, 3))
    else:  # (batch, seq, heads * head) -> (batch, seq, heads, head)
        heads = node.attr("num_heads")
        t = _work(node, x).reshape(x.shape[0], x.shape[1], heads, x.shape[2] // heads)
    rot = node.attr("rotary_embedding_dim", 0) or t.shape[3]
    if position_ids is not None:
        cos_cache, sin_cache = cos_cache[position_ids], sin_cache[position_ids]
    cos = _work(node, cos_cache)[:, :, None, :]  # (batch, seq, 1, rot / 2)
    sin = _work(node, sin_cache)[:, :, None, :]
    part, rest = t[..., :rot], t[..., rot:]
    if node.attr("interleaved", 0):
        x1, x2 = part[..., 0::2], part[..., 1::2]
    else:
        x1, x2 = part[..., : rot // 2], part[..., rot // 2 :]
    real = cos * x1 - sin * x2
    imag = sin * x1 + cos * x2
    if node.attr("interleaved", 0):
        rotated = xp.stack([real, imag], axis=-1).reshape(part.shape)
    else:
        rotated = xp.concatenate([real, imag], axis=-1)
    y = xp.concatenate([rotated, rest], axis=-1)
    y = xp.transpose(y, (0, 2, 1, 3)) if x.ndim == 4 else y.reshape(x.shape)
    return y.astype(x.dtype)


# ------------------------------------------------------------------ Attention


def _check_attention(node) -> None:
    mode = node.attr("qk_matmul_output_mode", 0)
    if mode not in (0, 1, 2, 3):
        raise Unsupported(f"Attention with qk_matmul_output_mode={mode}")
    precision = node.attr("softmax_precision")
    if precision is not None and precision not in dtypes.NUMPY:
        raise Unsupported(f"Attention with softmax_precision={precision}")


def _heads(xp, x, n):
    """(batch, seq, n * size) -> (batch, n, seq, size)."""
    return xp.transpose(x.reshape(x.shape[0], x.shape[1], n, x.shape[2] // n), (0, 2, 1, 3))


def _allowed(node, q_len, kv_len, past_len, nonpad):
    """The boolean (.., q, kv) positions that causality, the sliding window (opset 25) and
    ``nonpad_kv_seqlen`` (opset 24) allow, or None when none of them applies. A query at index
    i sits at position p = i + offset, offset = past length, nonpad - q_len per batch, or 0."""
    xp = node.xp
    causal = node.attr("is_causal", 0)
    left, right = node.attr("left_window_size", -1), node.attr("right_window_size", -1)
    if not causal and left < 0 and right < 0 and nonpad is None:
        return None
    j = xp.arange(kv_len).reshape(1, kv_len)
    p = xp.arange(q_len).reshape(q_len, 1)
    if past_len:
        p = p + past_len
    elif nonpad is not None:
        p = p + (nonpad.reshape(-1, 1, 1, 1).astype(xp.int64) - q_len)  # (batch, 1, q, 1)
    distance = p - j  # how far key j lies behind the query: (q, kv) or (batch, 1, q, kv)
    allowed = xp.ones(distance.shape, dtype=xp.bool_)
    if causal:
        allowed &= distance >= 0
    if left >= 0:
        allowed &= distance <= left
    if right >= 0:
        allowed &= -distance <= right
    if nonpad is not None:
        allowed &= j < nonpad.reshape(-1, 1, 1, 1)
    return allowed


def _mask_bias(node, attn_mask, kv_len, dtype):
    """``attn_mask`` as an additive bias: bool True -> 0, False -> -inf; numbers as they are.
    A mask shorter than the keys is padded with -inf (masked)."""
    xp = node.xp
    inf = dtype.type(math.inf)
    if attn_mask.dtype == xp.bool_:
        bias = xp.where(attn_mask, dtype.type(0), -inf)
    else:
        bias = attn_mask.astype(dtype)
    pad = kv_len - bias.shape[-1]
    if pad > 0:
        filler = xp.full(bias.shape[:-1] + (pad,), -inf, dtype=dtype)
        bias = xp.concatenate([bias, filler], axis=-1)
    return bias


@op("Attention", since=(23, 24, 25), check=_check_attention)
def attention(node, q, k, v, attn_mask=None, past_key=None, past_value=None, nonpad=None):
    """softmax(softcap(Q K^T * scale) + bias) V over 4-D (batch, heads, seq, size) or 3-D
    (batch, seq, heads * size) inputs; K/V heads are repeated for grouped-query attention;
    past_key/past_value are prepended to K/V (and returned as present_key/present_value).
    A query row that no key may attend gives zeros (not NaN).

    Like the op's function body, every step runs in Q's dtype (the matrix products accumulate
    in float32 for 16-bit floats and are rounded back), and the softmax in
    ``softmax_precision`` when given."""
    xp = node.xp
    dtype = q.dtype
    three_d = q.ndim == 3
    if three_d:
        q = _heads(xp, q, node.attr("q_num_heads"))
        k = _heads(xp, k, node.attr("kv_num_heads"))
        v = _heads(xp, v, node.attr("kv_num_heads"))
    past_len = 0
    if past_key is not None:
        past_len = past_key.shape[2]
        k = xp.concatenate([past_key, k], axis=2)
        v = xp.concatenate([past_value, v], axis=2)
    present_key, present_value = k, v
    q_len, kv_len = q.shape[2], k.shape[2]

    bias = xp.zeros((q_len, kv_len), dtype=dtype)
    if attn_mask is not None:
        bias = bias + _mask_bias(node, attn_mask, kv_len, dtype)
    allowed = _allowed(node, q_len, kv_len, past_len, nonpad)
    if allowed is not None:
        bias = bias + xp.where(allowed, dtype.type(0), dtype.type(-math.inf))

    if q.shape[1] != k.shape[1]:  # grouped-query: KV head h serves query heads h*g .. h*g+g-1
        group = q.shape[1] // k.shape[1]
        k, v = xp.repeat(k, group, axis=1), xp.repeat(v, group, axis=1)

    scale = node.attr("scale")
    root = dtype.type(math.sqrt(1 / math.sqrt(q.shape[3]) if scale is None else scale))
    scores = _matmul(node, q * root, xp.swapaxes(k * root, -1, -2))
    mode = node.attr("qk_matmul_output_mode", 0)
    qk = scores  # mode 0: the raw product
    softcap = node.attr("softcap", 0.0)
    if softcap > 0:
        cap = dtype.type(softcap)
        scores = cap * xp.tanh(scores / cap)
    if mode == 1:
        qk = scores
    scores = scores + bias
    if mode == 2:
        qk = scores

    precision = node.attr("softmax_precision")
    if precision is not None:
        scores = scores.astype(dtypes.NUMPY[precision])
    top = xp.max(scores, axis=-1, keepdims=True)
    top = xp.where(top == -math.inf, scores.dtype.type(0), top)
    e = xp.exp(scores - top)
    total = xp.sum(e, axis=-1, keepdims=True)
    probs = e / xp.where(total == 0, total.dtype.type(1), total)
    no_key = xp.max(bias, axis=-1, keepdims=True) == -math.inf
    probs = xp.where(no_key, probs.dtype.type(0), probs).astype(dtype, copy=False)
    if mode == 3:
        qk = probs

    y = _matmul(node, probs, v)
    if three_d:
        y = xp.transpose(y, (0, 2, 1, 3)).reshape(y.shape[0], q_len, -1)
    return y, present_key, present_value, qk.astype(dtype, copy=False)
