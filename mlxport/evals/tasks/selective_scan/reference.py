"""Mamba-1 selective scan forward.

dt[b,l,d]   = softplus(delta[b,l,d]) if delta_softplus else delta[b,l,d]
h[b,d,n]    = exp(dt * A[d,n]) * h[b,d,n] + dt * u[b,l,d] * B[b,l,n]      (h starts at 0)
y[b,l,d]    = sum_n h[b,d,n] * C[b,l,n] + D_skip[d] * u[b,l,d]
"""

import mlx.core as mx


def _softplus(x: mx.array) -> mx.array:
    return mx.logaddexp(x, mx.zeros_like(x))


def _discretise(u, delta, A, B, delta_softplus):
    dt = _softplus(delta) if delta_softplus else delta
    dA = mx.exp(dt[..., None] * A)  # [B, L, D, N]
    dBx = (dt * u)[..., None] * B[:, :, None, :]  # [B, L, D, N]
    return dA, dBx


def reference(u, delta, A, B, C, D_skip, delta_softplus=True):
    # The definition: the recurrence stepped in float32, one timestep at a time.
    out_dtype = u.dtype
    u, delta, B, C = (a.astype(mx.float32) for a in (u, delta, B, C))
    dA, dBx = _discretise(u, delta, A.astype(mx.float32), B, delta_softplus)
    h = mx.zeros((u.shape[0], u.shape[2], A.shape[1]), dtype=mx.float32)
    ys = []
    for t in range(u.shape[1]):
        h = dA[:, t] * h + dBx[:, t]
        ys.append((h @ C[:, t, :, None]).squeeze(-1))
    y = mx.stack(ys, axis=1) + D_skip.astype(mx.float32) * u
    return y.astype(out_dtype)


def _scan_doubling(a: mx.array, b: mx.array, axis: int) -> mx.array:
    # Inclusive scan of h_t = a_t * h_{t-1} + b_t along `axis` by recursive doubling
    # (Hillis-Steele): log2(L) rounds of whole-array ops, no exp of large cumulative sums,
    # so it stays exact in range for any decay.
    L = a.shape[axis]
    k = 1
    while k < L:
        idx_hi = [slice(None)] * a.ndim
        idx_lo = [slice(None)] * a.ndim
        idx_hi[axis] = slice(k, None)
        idx_lo[axis] = slice(0, L - k)
        a_lo, b_lo = a[tuple(idx_lo)], b[tuple(idx_lo)]
        a_hi, b_hi = a[tuple(idx_hi)], b[tuple(idx_hi)]
        head = [slice(None)] * a.ndim
        head[axis] = slice(0, k)
        b = mx.concatenate([b[tuple(head)], a_hi * b_lo + b_hi], axis=axis)
        a = mx.concatenate([a[tuple(head)], a_hi * a_lo], axis=axis)
        k *= 2
    return b


CHUNK = 64


def native(u, delta, A, B, C, D_skip, delta_softplus=True):
    """The strongest plain-MLX path: a chunked parallel scan in float32.

    Inside each chunk of CHUNK timesteps the recurrence is a recursive-doubling scan over
    all chunks at once; the chunk carries are then combined by a second doubling scan over
    the chunks, and folded back with the within-chunk cumulative decay. Everything is
    whole-array MLX ops (O(log L) graph depth, no Python loop over timesteps)."""
    out_dtype = u.dtype
    u, delta, B, C = (a.astype(mx.float32) for a in (u, delta, B, C))
    Bsz, L, D = u.shape
    N = A.shape[1]
    dA, dBx = _discretise(u, delta, A.astype(mx.float32), B, delta_softplus)
    Q = min(CHUNK, L)
    nc = -(-L // Q)
    pad = nc * Q - L
    if pad:
        # Padded steps decay by 1 and add 0: they leave the state unchanged.
        dA = mx.concatenate([dA, mx.ones((Bsz, pad, D, N), mx.float32)], axis=1)
        dBx = mx.concatenate([dBx, mx.zeros((Bsz, pad, D, N), mx.float32)], axis=1)
    dA = dA.reshape(Bsz, nc, Q, D, N)
    dBx = dBx.reshape(Bsz, nc, Q, D, N)
    # Within-chunk scans, starting from zero state: local states and cumulative decays.
    h_local = _scan_doubling(dA, dBx, axis=2)
    decay = mx.cumprod(dA, axis=2)
    if nc > 1:
        # State entering chunk c: scan of (decay over chunk, local end state) over chunks.
        ends = _scan_doubling(decay[:, :, -1], h_local[:, :, -1], axis=1)  # [B, nc, D, N]
        carry = mx.concatenate([mx.zeros_like(ends[:, :1]), ends[:, :-1]], axis=1)
        h = h_local + decay * carry[:, :, None]
    else:
        h = h_local
    h = h.reshape(Bsz, nc * Q, D, N)[:, :L]
    y = (h @ C[:, :, :, None]).squeeze(-1) + D_skip.astype(mx.float32) * u
    return y.astype(out_dtype)


def naive(u, delta, A, B, C, D_skip, delta_softplus=True):
    """mlx-lm's Mamba path without a kernel (MambaBlock.ssm_step, called per timestep from
    _process_sequence): a Python loop issuing a handful of small MLX ops per step, in the
    model dtype."""
    Bsz, L, D = u.shape
    A = A.astype(u.dtype)
    state = None
    ys = []
    for t in range(L):
        x_t, dt = u[:, t], delta[:, t]
        if delta_softplus:
            dt = _softplus(dt)
        new_state = mx.expand_dims(dt * x_t, -1) * mx.expand_dims(B[:, t], 1)
        if state is not None:
            new_state += state * mx.exp(mx.expand_dims(dt, -1) * A)
        y_t = (new_state @ mx.expand_dims(C[:, t], -1)).squeeze(2)
        ys.append(y_t + D_skip.astype(u.dtype) * x_t)
        state = new_state
    return mx.stack(ys, axis=1)
