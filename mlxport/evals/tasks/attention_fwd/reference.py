import mlx.core as mx


def _causal_mask(Tq: int, Tk: int) -> mx.array:
    # Bottom-right aligned, as mx.fast.scaled_dot_product_attention(mask="causal"): query i
    # is the (Tk - Tq + i)-th position, so it sees keys j <= i + Tk - Tq.
    qi = mx.arange(Tq)[:, None] + (Tk - Tq)
    kj = mx.arange(Tk)[None, :]
    return kj <= qi


def reference(q, k, v, scale=0.125, causal=False):
    out_dtype = q.dtype
    q, k, v = (a.astype(mx.float32) for a in (q, k, v))
    s = (q * scale) @ k.swapaxes(-1, -2)
    if causal:
        s = mx.where(_causal_mask(q.shape[-2], k.shape[-2]), s, -mx.inf)
    p = mx.softmax(s, axis=-1)
    return (p @ v).astype(out_dtype)


def native(q, k, v, scale=0.125, causal=False):
    return mx.fast.scaled_dot_product_attention(
        q, k, v, scale=scale, mask="causal" if causal else None
    )


def naive(q, k, v, scale=0.125, causal=False):
    # The composed form a user writes without a fused kernel, in the input dtype.
    s = (q * scale) @ k.swapaxes(-1, -2)
    if causal:
        s = mx.where(_causal_mask(q.shape[-2], k.shape[-2]), s, mx.array(-mx.inf, s.dtype))
    return mx.softmax(s, axis=-1, precise=True) @ v
