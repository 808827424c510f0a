import mlx.core as mx

_ROW = 1024


def reference(x: mx.array) -> mx.array:
    # Two-level (blocked) float32 sum: rows of 1024, then the row sums. A single mx.sum on
    # the CPU accumulates almost sequentially and drifts by ~2e-5 relative at N = 1M, which
    # would make the golden less accurate than a tree-reducing GPU kernel.
    x = x.astype(mx.float32).reshape(-1)
    pad = (-x.size) % _ROW
    if pad:
        x = mx.concatenate([x, mx.zeros((pad,), mx.float32)])
    return mx.sum(mx.sum(x.reshape(-1, _ROW), axis=1), keepdims=True)


def native(x: mx.array) -> mx.array:
    # The output is float32, so the native path reduces in float32: mx.sum on a float16
    # input would return float16 (overflowing past 65504 and rounding the result).
    return mx.sum(x.astype(mx.float32), keepdims=True)


def naive(x: mx.array) -> mx.array:
    # A user without a kernel writes the same one-liner: there is no weaker honest path.
    return x.astype(mx.float32).sum().reshape(1)
