import mlx.core as mx


def reference(x: mx.array, weight: mx.array, bias: mx.array, *, eps: float) -> mx.array:
    """LayerNorm over the last axis (biased variance) with weight and bias, in float32,
    rounded to x.dtype once."""
    v = x.astype(mx.float32)
    mean = mx.mean(v, axis=-1, keepdims=True)
    d = v - mean
    var = mx.mean(d * d, axis=-1, keepdims=True)
    y = d * mx.rsqrt(var + eps) * weight.astype(mx.float32) + bias.astype(mx.float32)
    return y.astype(x.dtype)


def native(x: mx.array, weight: mx.array, bias: mx.array, *, eps: float) -> mx.array:
    return mx.fast.layer_norm(x, weight, bias, eps)


def naive(x: mx.array, weight: mx.array, bias: mx.array, *, eps: float) -> mx.array:
    # Composed ops in the input dtype, as a model file writes it without mx.fast.
    mean = mx.mean(x, axis=-1, keepdims=True)
    var = mx.var(x, axis=-1, keepdims=True)
    return (x - mean) * mx.rsqrt(var + eps) * weight + bias
