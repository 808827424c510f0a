import mlx.core as mx


def reference(x: mx.array, weight: mx.array, *, eps: float) -> mx.array:
    """RMSNorm over the last axis, computed in float32 and rounded to x.dtype once."""
    v = x.astype(mx.float32)
    r = mx.rsqrt(mx.mean(v * v, axis=-1, keepdims=True) + eps)
    return (v * r * weight.astype(mx.float32)).astype(x.dtype)


def native(x: mx.array, weight: mx.array, *, eps: float) -> mx.array:
    return mx.fast.rms_norm(x, weight, eps)


def naive(x: mx.array, weight: mx.array, *, eps: float) -> mx.array:
    # Composed ops in the input dtype, as a model file writes it without mx.fast.
    return x * mx.rsqrt(mx.mean(mx.square(x), axis=-1, keepdims=True) + eps) * weight
