import mlx.core as mx


def reference(x: mx.array) -> mx.array:
    """Inclusive prefix sum along the last axis, accumulated in float32, rounded once."""
    return mx.cumsum(x.astype(mx.float32), axis=-1).astype(x.dtype)


def native(x: mx.array) -> mx.array:
    # mx.cumsum accumulates in the input dtype: on float16/bfloat16 rows of a few thousand
    # elements it loses whole units (bfloat16 stalls once the sum's ulp exceeds the terms),
    # so the strongest correct native path scans in float32.
    if x.dtype == mx.float32:
        return mx.cumsum(x, axis=-1)
    return mx.cumsum(x.astype(mx.float32), axis=-1).astype(x.dtype)


def naive(x: mx.array) -> mx.array:
    # Without a scan primitive: a matmul with an upper-triangular matrix of ones
    # (O(C^2) work), accumulated in float32 as a careful user would.
    C = x.shape[-1]
    tri = mx.triu(mx.ones((C, C), dtype=mx.float32))
    return (x.astype(mx.float32) @ tri).astype(x.dtype)
