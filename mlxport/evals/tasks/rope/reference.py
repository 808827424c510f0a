import mlx.core as mx


def _angles(T: int, D: int, offset: int, base: float) -> mx.array:
    # theta[t, i] = (offset + t) * base^(-2i/D), i < D/2, in float32.
    inv_freq = mx.power(
        mx.array(base, mx.float32), -mx.arange(0, D // 2, dtype=mx.float32) * (2.0 / D)
    )
    pos = mx.arange(T, dtype=mx.float32) + offset
    return pos[:, None] * inv_freq[None, :]


def reference(x: mx.array, *, offset: int, base: float) -> mx.array:
    """Rotary embedding, non-traditional layout (rotate halves), over all D features of
    x [B, H, T, D], positions offset..offset+T-1; computed in float32, rounded once."""
    T, D = x.shape[-2], x.shape[-1]
    theta = _angles(T, D, offset, base)
    cos, sin = mx.cos(theta), mx.sin(theta)
    v = x.astype(mx.float32)
    x1, x2 = v[..., : D // 2], v[..., D // 2 :]
    y = mx.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)
    return y.astype(x.dtype)


def native(x: mx.array, *, offset: int, base: float) -> mx.array:
    return mx.fast.rope(x, x.shape[-1], traditional=False, base=base, scale=1.0, offset=offset)


def naive(x: mx.array, *, offset: int, base: float) -> mx.array:
    # What a model file writes without mx.fast: cos/sin tables cast to x.dtype, then
    # rotate_half composed from slices and a concatenate, in the input dtype.
    T, D = x.shape[-2], x.shape[-1]
    theta = _angles(T, D, offset, base)
    cos, sin = mx.cos(theta).astype(x.dtype), mx.sin(theta).astype(x.dtype)
    cos = mx.concatenate([cos, cos], axis=-1)
    sin = mx.concatenate([sin, sin], axis=-1)
    x1, x2 = x[..., : D // 2], x[..., D // 2 :]
    rotated = mx.concatenate([-x2, x1], axis=-1)
    return x * cos + rotated * sin
