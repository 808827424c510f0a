import math

import mlx.core as mx
import mlx.nn as nn

_C = math.sqrt(2.0 / math.pi)


def reference(x: mx.array) -> mx.array:
    """GELU with the tanh approximation, evaluated in float32 and rounded to x.dtype once."""
    v = x.astype(mx.float32)
    y = 0.5 * v * (1.0 + mx.tanh(_C * (v + 0.044715 * v * v * v)))
    return y.astype(x.dtype)


def native(x: mx.array) -> mx.array:
    # mlx.nn.gelu_approx is the tanh form, fused by mx.compile (shapeless).
    return nn.gelu_approx(x)


def naive(x: mx.array) -> mx.array:
    # The formula written out in the input dtype, one MLX op per term.
    return 0.5 * x * (1 + mx.tanh(_C * (x + 0.044715 * x**3)))
