"""Mamba-1 selective scan forward from a state, returning the final state.

dt[b,l,d]   = softplus(delta[b,l,d]) if delta_softplus else delta[b,l,d]
h[b,d,n]    = exp(dt * A[d,n]) * h[b,d,n] + dt * u[b,l,d] * B[b,l,n]      (h starts at h0)
y[b,l,d]    = sum_n h[b,d,n] * C[b,l,n] + D_skip[d] * u[b,l,d]
h_out       = h after the last step
"""

import mlx.core as mx


def _softplus(x: mx.array) -> mx.array:
    return mx.logaddexp(x, mx.zeros_like(x))


def reference(u, delta, A, B, C, D_skip, h0, delta_softplus=True):
    # The definition: the recurrence stepped in float32, one timestep at a time.
    out_dtype = u.dtype
    u, delta, B, C = (a.astype(mx.float32) for a in (u, delta, B, C))
    dt = _softplus(delta) if delta_softplus else delta
    dA = mx.exp(dt[..., None] * A.astype(mx.float32))
    dBx = (dt * u)[..., None] * B[:, :, None, :]
    h = h0.astype(mx.float32)
    ys = []
    for t in range(u.shape[1]):
        h = dA[:, t] * h + dBx[:, t]
        ys.append((h @ C[:, t, :, None]).squeeze(-1))
    y = mx.stack(ys, axis=1) + D_skip.astype(mx.float32) * u
    return y.astype(out_dtype), h


def naive(u, delta, A, B, C, D_skip, h0, delta_softplus=True):
    """mlx-lm's Mamba path without a kernel (MambaBlock.ssm_step per step), in the model dtype."""
    A = A.astype(u.dtype)
    state = h0.astype(u.dtype)
    ys = []
    for t in range(u.shape[1]):
        x_t, dt = u[:, t], delta[:, t]
        if delta_softplus:
            dt = _softplus(dt)
        state = mx.expand_dims(dt * x_t, -1) * mx.expand_dims(B[:, t], 1) + state * mx.exp(
            mx.expand_dims(dt, -1) * A
        )
        ys.append((state @ mx.expand_dims(C[:, t], -1)).squeeze(2) + D_skip.astype(u.dtype) * x_t)
    return mx.stack(ys, axis=1), state.astype(mx.float32)
