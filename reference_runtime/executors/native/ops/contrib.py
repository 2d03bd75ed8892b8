"""Native kernels: the onnxruntime contrib ops that decoder exports use (see the registry module
for the kernel conventions).

The definitions are onnxruntime's (docs/ContribOperators.md); where that text leaves a detail
open, these kernels do what the onnxruntime CPU kernels do, and tests/test_native_contrib.py
checks them against onnxruntime. Reduced-precision inputs (float16, bfloat16) are computed in
float32 and rounded once at the end, as the onnxruntime CPU kernels do.

* ``SimplifiedLayerNormalization`` (RMS norm) lives in the default ONNX domain in onnxruntime
  (version 1), not in com.microsoft, and is registered there; everything else is com.microsoft
  version 1.
* ``GroupQueryAttention``: the plain and packed-QKV forms with a full-length (dynamic or shared
  buffer) float KV cache, per-batch ``seqlens_k``, causal or bidirectional attention,
  ``local_window_size``, ``scale``, ``softcap``, rotary embedding (``do_rotary`` with
  ``cos_cache``/``sin_cache``, ``rotary_interleaved``, partial rotary, ``position_ids``),
  ``attention_bias``, ``head_sink`` and ``smooth_softmax``. Quantized KV caches, the windowed
  cache (``sliding_window_cache``), ``qk_output``, per-head Q/K norms and ``query_seqlens`` are
  refused at load.
* ``MatMulNBits``: 4-bit weights (``bits`` other than 4 and prepacked weights are refused), with
  or without zero points (packed uint8 or unpacked float), optional bias.
* ``RotaryEmbedding``: 3D (BSD) and 4D (BNSH) inputs, interleaved or half-split, partial
  rotary (``rotary_embedding_dim`` with ``num_heads``), scalar-offset or per-token position ids.
"""

from __future__ import annotations

import math

from ..registry import MS_DOMAIN, Unsupported, op


def _compute_dtype(xp, dtype):
    """float32 for float32/float16/bfloat16, float64 for float64."""
    return xp.float64 if dtype == xp.float64 else xp.float32


def _given(node, index: int) -> bool:
    inputs = node.proto.input
    return index < len(inputs) and bool(inputs[index])


# ------------------------------------------------------------------ normalizations


def _skip_norm(node, x, skip, gamma, beta, bias, simplified: bool):
    xp = node.xp
    ct = _compute_dtype(xp, x.dtype)
    eps = node.attr("epsilon", 1e-12)
    total = x.astype(ct) + skip.astype(ct)
    if bias is not None:
        total = total + bias.astype(ct)
    if simplified:
        mean = xp.zeros(total.shape[:-1] + (1,), dtype=ct)
        inv_std = 1.0 / xp.sqrt(xp.mean(total * total, axis=-1, keepdims=True) + eps)
        y = total * inv_std * gamma.astype(ct)
    else:
        mean = xp.mean(total, axis=-1, keepdims=True)
        centred = total - mean
        inv_std = 1.0 / xp.sqrt(xp.mean(centred * centred, axis=-1, keepdims=True) + eps)
        y = centred * inv_std * gamma.astype(ct)
        if beta is not None:
            y = y + beta.astype(ct)
    outputs = (
        y.astype(x.dtype),
        mean.astype(xp.float32),
        inv_std.astype(xp.float32),
        total.astype(x.dtype),
    )
    return outputs[: node.n_outputs]


@op("SkipLayerNormalization", since=1, domain=MS_DOMAIN)
def skip_layer_normalization(node, x, skip, gamma, beta=None, bias=None):
    """LayerNorm(input + skip (+ bias)) * gamma (+ beta); outputs: output, mean, inv_std_var,
    input_skip_bias_sum (the last three optional; mean and inv_std_var are float32, shaped like
    the input with a last dimension of 1)."""
    return _skip_norm(node, x, skip, gamma, beta, bias, simplified=False)


@op("SkipSimplifiedLayerNormalization", since=1, domain=MS_DOMAIN)
def skip_simplified_layer_normalization(node, x, skip, gamma, bias=None):
    """RMSNorm(input + skip (+ bias)) * gamma; the same four outputs as SkipLayerNormalization,
    with mean all zeros (as onnxruntime's CPU kernel leaves it)."""
    return _skip_norm(node, x, skip, gamma, None, bias, simplified=True)


def _check_simplified(node) -> None:
    stash = node.attr("stash_type", 1)
    if stash != 1:
        raise Unsupported(f"SimplifiedLayerNormalization with stash_type={stash} (only 1, float)")


@op("SimplifiedLayerNormalization", since=1, domain="", check=_check_simplified)
def simplified_layer_normalization(node, x, scale):
    """RMS normalization over dimensions axis..rank-1: Y = X / sqrt(mean(X^2) + epsilon) * scale.
    Y has the scale's dtype; inv_std_var is float32 with the normalized dimensions kept as 1."""
    xp = node.xp
    ct = _compute_dtype(xp, x.dtype)
    axis = node.attr("axis", -1)
    axis = axis + x.ndim if axis < 0 else axis
    axes = tuple(range(axis, x.ndim))
    eps = node.attr("epsilon", 1e-5)
    xc = x.astype(ct)
    inv_std = 1.0 / xp.sqrt(xp.mean(xc * xc, axis=axes, keepdims=True) + eps)
    y = (xc * inv_std * scale.astype(ct)).astype(scale.dtype)
    return (y, inv_std.astype(xp.float32))[: node.n_outputs]


# ------------------------------------------------------------------ MatMulNBits


def _check_matmul_nbits(node) -> None:
    for name in ("K", "N", "block_size"):
        if node.attr(name) is None:
            raise Unsupported(f"MatMulNBits without the required attribute {name!r}")
    bits = node.attr("bits", 4)
    if bits != 4:
        raise Unsupported(f"MatMulNBits with bits={bits} (only 4-bit weights are implemented)")
    block = node.attr("block_size")
    if block < 16 or block & (block - 1):
        raise Unsupported(f"MatMulNBits with block_size={block} (must be a power of 2, >= 16)")
    prepacked = node.attr("weight_prepacked", 0)
    if prepacked:
        raise Unsupported(f"MatMulNBits with weight_prepacked={prepacked} (an EP-specific layout)")
    if _given(node, 4):
        raise Unsupported("MatMulNBits with the deprecated g_idx input")


def _unpack_4bit(xp, packed, rows: int):
    """uint8 bytes -> 4-bit values, low nibble first: (rows, n) -> (rows, 2n)."""
    packed = packed.reshape(rows, -1)
    return xp.stack([packed & 0x0F, packed >> 4], axis=-1).reshape(rows, -1)


@op("MatMulNBits", since=1, domain=MS_DOMAIN, check=_check_matmul_nbits)
def matmul_nbits(node, a, b, scales, zero_points=None, g_idx=None, bias=None):
    """Y = A @ dequantize(B) (+ bias): B is (N, k_blocks, block_size / 2) uint8, two 4-bit values
    per byte, low nibble first, along K; each block of block_size values along K has a scale and
    a zero point (packed uint8 two per byte, unpacked in A's dtype, or 8 when absent)."""
    xp = node.xp
    K, N, block = node.attr("K"), node.attr("N"), node.attr("block_size")
    k_blocks = -(-K // block)
    ct = _compute_dtype(xp, a.dtype)
    if a.shape[-1] != K:
        raise ValueError(f"A has {a.shape[-1]} columns, the attribute K is {K}")
    if b.size == 0:  # an omitted projection: zeros (plus the bias)
        y = xp.zeros(a.shape[:-1] + (N,), dtype=ct)
    else:
        q = _unpack_4bit(xp, b, N).reshape(N, k_blocks, block).astype(ct)
        scale = scales.reshape(N, k_blocks).astype(ct)
        if zero_points is None:
            zero = xp.full((N, k_blocks), 8, dtype=ct)
        elif zero_points.dtype == xp.uint8:
            zero = _unpack_4bit(xp, zero_points, N)[:, :k_blocks].astype(ct)
        else:
            zero = zero_points.reshape(N, k_blocks).astype(ct)
        weight = ((q - zero[..., None]) * scale[..., None]).reshape(N, k_blocks * block)[:, :K]
        y = xp.matmul(a.astype(ct), weight.T)
    if bias is not None:
        y = y + bias.astype(ct)
    return y.astype(a.dtype)


# ------------------------------------------------------------------ rotary embedding


def _rotate(xp, x, cos, sin, interleaved: bool):
    """Rotary embedding of x (batch, seq, heads, head_size) with cos/sin (batch, seq, rot / 2);
    the dimensions past rot are left as they are."""
    half = cos.shape[-1]
    rot = 2 * half
    c = cos[:, :, None, :]
    s = sin[:, :, None, :]
    if interleaved:
        even, odd = x[..., 0:rot:2], x[..., 1:rot:2]
        rotated = xp.stack([even * c - odd * s, even * s + odd * c], axis=-1)
        rotated = rotated.reshape(x.shape[:-1] + (rot,))
    else:
        first, second = x[..., :half], x[..., half:rot]
        rotated = xp.concatenate([first * c - second * s, first * s + second * c], axis=-1)
    if rot < x.shape[-1]:
        rotated = xp.concatenate([rotated, x[..., rot:]], axis=-1)
    return rotated


def _check_rotary(node) -> None:
    if node.attr("is_packed_batching", 0):
        raise Unsupported("RotaryEmbedding with is_packed_batching=1 (ragged batches)")
    scale = node.attr("scale", 1.0)
    if scale != 1.0:
        raise Unsupported(f"RotaryEmbedding with scale={scale} (only 1.0)")
    if node.attr("rotary_embedding_dim", 0) > 0 and node.attr("num_heads", 0) <= 0:
        raise Unsupported("RotaryEmbedding with rotary_embedding_dim but without num_heads")


@op("RotaryEmbedding", since=1, domain=MS_DOMAIN, check=_check_rotary)
def rotary_embedding(node, x, position_ids, cos_cache, sin_cache):
    """RoPE on a 3D (batch, seq, hidden) or 4D (batch, heads, seq, head_size) input. The head
    size is hidden / num_heads, or 2 * cos_cache.shape[1] when num_heads is 0; rotary_embedding_dim
    (default: the head size) must be 2 * cos_cache.shape[1]. position_ids is (batch, seq), or one
    element: the position of the first token, the others following it."""
    xp = node.xp
    ct = _compute_dtype(xp, x.dtype)
    half = cos_cache.shape[1]
    num_heads = node.attr("num_heads", 0)
    if x.ndim == 4:
        batch, _, seq, head_size = x.shape
        xs = x.transpose(0, 2, 1, 3)
    elif x.ndim == 3:
        batch, seq, hidden = x.shape
        head_size = hidden // num_heads if num_heads > 0 else 2 * half
        if hidden % head_size:
            raise ValueError(f"hidden size {hidden} is not a multiple of the head size {head_size}")
        xs = x.reshape(batch, seq, hidden // head_size, head_size)
    else:
        raise ValueError(f"RotaryEmbedding input must be 3D or 4D, got shape {x.shape}")
    rot = node.attr("rotary_embedding_dim", 0) or head_size
    if 2 * half != rot or rot > head_size:
        raise ValueError(
            f"cos_cache dimension 1 is {half}, expected rotary_embedding_dim / 2 = {rot // 2} "
            f"(head size {head_size})"
        )
    if position_ids.size == 1:
        pos = position_ids.reshape(-1)[:1] + xp.arange(seq, dtype=position_ids.dtype)
        pos = xp.broadcast_to(pos[None, :], (batch, seq))
    elif position_ids.shape == (batch, seq):
        pos = position_ids
    else:
        raise ValueError(f"position_ids has shape {position_ids.shape}, expected ({batch}, {seq})")
    cos = cos_cache[pos].astype(ct)
    sin = sin_cache[pos].astype(ct)
    y = _rotate(xp, xs.astype(ct), cos, sin, bool(node.attr("interleaved", 0)))
    y = y.transpose(0, 2, 1, 3) if x.ndim == 4 else y.reshape(x.shape)
    return y.astype(x.dtype)


# ------------------------------------------------------------------ GroupQueryAttention

_GQA_INPUTS_REFUSED = {
    12: "k_scale (a quantized KV cache)",
    13: "v_scale (a quantized KV cache)",
    14: "q_norm_weight (per-head Q/K RMS norms)",
    15: "k_norm_weight (per-head Q/K RMS norms)",
    16: "query_seqlens (right-padded query chunks)",
}


def _check_gqa(node) -> None:
    heads, kv_heads = node.attr("num_heads"), node.attr("kv_num_heads")
    if not heads or not kv_heads or heads % kv_heads:
        raise Unsupported(
            f"GroupQueryAttention with num_heads={heads}, kv_num_heads={kv_heads} (num_heads must "
            "be a positive multiple of kv_num_heads)"
        )
    for name in ("k_quant_type", "v_quant_type"):
        value = node.attr(name, "NONE")
        if value != "NONE":
            raise Unsupported(f"GroupQueryAttention with {name}={value!r} (a quantized KV cache)")
    if node.attr("kv_cache_bit_width") is not None:
        raise Unsupported("GroupQueryAttention with kv_cache_bit_width (a quantized KV cache)")
    if node.attr("sliding_window_cache", 0):
        raise Unsupported("GroupQueryAttention with sliding_window_cache=1 (a windowed KV cache)")
    if node.attr("qk_output", 0):
        raise Unsupported("GroupQueryAttention with qk_output (the output_qk output)")
    causal = node.attr("causal", 1)
    if causal not in (0, 1):
        raise Unsupported(f"GroupQueryAttention with causal={causal}")
    window = node.attr("local_window_size", -1)
    if window == 0 or window < -1 or (window > 0 and not causal):
        raise Unsupported(f"GroupQueryAttention with local_window_size={window}, causal={causal}")
    for index, what in _GQA_INPUTS_REFUSED.items():
        if _given(node, index):
            raise Unsupported(f"GroupQueryAttention with the input {what}")
    if node.attr("do_rotary", 0) and not (_given(node, 7) and _given(node, 8)):
        raise Unsupported("GroupQueryAttention with do_rotary=1 but no cos_cache/sin_cache")


@op("GroupQueryAttention", since=1, domain=MS_DOMAIN, check=_check_gqa)
def group_query_attention(
    node, query, key=None, value=None, past_key=None, past_value=None, seqlens_k=None,
    total_sequence_length=None, cos_cache=None, sin_cache=None, position_ids=None,
    attention_bias=None, head_sink=None, *_refused,
):  # fmt: skip
    """Grouped-query attention over past + new tokens with a BNSH KV cache.

    For batch entry b, T = seqlens_k[b] + 1 tokens are in the cache after the step; the chunk's
    Q = min(S, T) leading rows are new tokens at absolute positions P = T - Q onwards (rows past
    Q are right padding). present holds past rows [0, P) and then the new rows; its length is
    max(past length, total_sequence_length) and rows past what was written are zeros. Query row i
    attends to keys [0, min(P + i + 1, T)) (all T without causal), cut to the last
    local_window_size positions. Scores are scaled, soft-capped, biased, and soft-maxed (with the
    head sink, or a zero sink for smooth_softmax, in the denominator); rows with no key are 0.
    """
    xp = node.xp
    n_heads, kv_heads = node.attr("num_heads"), node.attr("kv_num_heads")
    dtype = query.dtype
    ct = xp.float32
    batch, seq, width = query.shape
    if key is None:
        head = width // (n_heads + 2 * kv_heads)
        q = query[..., : n_heads * head]
        k = query[..., n_heads * head : (n_heads + kv_heads) * head]
        v = query[..., (n_heads + kv_heads) * head :]
    else:
        head = width // n_heads
        q, k, v = query, key, value
    q = q.reshape(batch, seq, n_heads, head).astype(ct)
    k = k.reshape(batch, seq, kv_heads, head).astype(ct)
    v = v.reshape(batch, seq, kv_heads, head).astype(dtype)
    for name, cache in (("past_key", past_key), ("past_value", past_value)):
        if cache is not None and cache.dtype != dtype:
            raise ValueError(f"{name} has dtype {cache.dtype}, the query {dtype}")

    total = int(total_sequence_length.reshape(-1).tolist()[0])
    lengths = [int(t) + 1 for t in seqlens_k.reshape(-1).tolist()]
    if len(lengths) != batch:
        raise ValueError(f"seqlens_k has {len(lengths)} elements for a batch of {batch}")
    past_len = past_key.shape[2] if past_key is not None else 0
    if total > past_len and total != past_len + seq:
        raise ValueError(
            f"total_sequence_length {total} must equal past length {past_len} + sequence length "
            f"{seq} (a growing cache) or be at most the past length (a shared buffer)"
        )
    cache_len = max(past_len, total)
    new_rows = [min(seq, t) for t in lengths]
    starts = [t - n for t, n in zip(lengths, new_rows, strict=True)]
    for b, (start, t) in enumerate(zip(starts, lengths, strict=True)):
        if t > total or start > past_len:
            raise ValueError(
                f"batch entry {b}: seqlens_k + 1 = {t} with total_sequence_length {total} and "
                f"{past_len} past rows"
            )

    if node.attr("do_rotary", 0):
        if position_ids is None:
            pos = xp.asarray(starts, dtype=xp.int64)[:, None] + xp.arange(seq, dtype=xp.int64)
        elif seq == total:  # the first prompt: onnxruntime reads only position_ids[0, 0]
            pos = position_ids.reshape(-1)[:1] + xp.arange(seq, dtype=position_ids.dtype)
            pos = xp.broadcast_to(pos[None, :], (batch, seq))
        else:
            pos = position_ids.reshape(batch, seq)
        cos = cos_cache[pos].astype(ct)
        sin = sin_cache[pos].astype(ct)
        interleaved = bool(node.attr("rotary_interleaved", 0))
        q = _rotate(xp, q, cos, sin, interleaved).astype(dtype).astype(ct)
        k = _rotate(xp, k, cos, sin, interleaved)
    k = k.astype(dtype)

    present_k = xp.zeros((batch, kv_heads, cache_len, head), dtype=dtype)
    present_v = xp.zeros((batch, kv_heads, cache_len, head), dtype=dtype)
    for b, start in enumerate(starts):
        if start:
            present_k[b, :, :start] = past_key[b, :, :start]
            present_v[b, :, :start] = past_value[b, :, :start]
        n = min(seq, cache_len - start)
        present_k[b, :, start : start + n] = k[b, :n].transpose(1, 0, 2)
        present_v[b, :, start : start + n] = v[b, :n].transpose(1, 0, 2)

    keys_len = max(lengths)
    keys = present_k[:, :, :keys_len].astype(ct)
    values = present_v[:, :, :keys_len].astype(ct)
    group = n_heads // kv_heads
    if group > 1:
        keys = xp.repeat(keys, group, axis=1)
        values = xp.repeat(values, group, axis=1)
    scale = node.attr("scale", 0.0) or 1.0 / math.sqrt(head)
    scores = xp.matmul(q.transpose(0, 2, 1, 3), keys.transpose(0, 1, 3, 2)) * ct(scale)
    softcap = node.attr("softcap", 0.0)
    if softcap > 0:
        scores = ct(softcap) * xp.tanh(scores / ct(softcap))
    if attention_bias is not None:
        scores = scores + attention_bias[..., :keys_len].astype(ct)

    j = xp.arange(keys_len)[None, None, :]
    first = xp.asarray(starts, dtype=xp.int64)[:, None, None] + xp.arange(seq)[None, :, None]
    ends = xp.asarray(lengths, dtype=xp.int64)[:, None, None]
    if node.attr("causal", 1):
        ends = xp.minimum(first + 1, ends)
    allowed = j < ends  # (batch, seq, keys)
    window = node.attr("local_window_size", -1)
    if window > 0:
        allowed = allowed & (j > first - window)
    allowed = allowed[:, None]  # (batch, 1, seq, keys)
    masked = xp.where(allowed, scores, ct(-xp.inf))
    peak = xp.max(masked, axis=-1, keepdims=True)
    sink = None
    if head_sink is not None:
        sink = head_sink.astype(ct).reshape(1, n_heads, 1, 1)
    elif node.attr("smooth_softmax", -1) == 1:
        sink = xp.zeros((1, n_heads, 1, 1), dtype=ct)
    if sink is not None:
        peak = xp.maximum(peak, sink)
    peak = xp.where(xp.isfinite(peak), peak, ct(0))
    weights = xp.where(allowed, xp.exp(masked - peak), ct(0))
    denom = xp.sum(weights, axis=-1, keepdims=True)
    if sink is not None:
        denom = denom + xp.exp(sink - peak)
    probs = weights / xp.where(denom > 0, denom, ct(1))
    out = xp.matmul(probs, values).transpose(0, 2, 1, 3).reshape(batch, seq, n_heads * head)
    return out.astype(dtype), present_k, present_v
