"""The mamba_scan port in mlx-lm's own Mamba-1 model (imported, not copied), on the simulator with a
tiny model: the same logits as stock mlx-lm, a prefill in two pieces continuing from the cached
state, and generation carrying on."""

import mlx.core as mx
import pytest

from mlxport.integrations.mlx_lm import mamba_module, patch_mamba, scan_op


def test_a_patched_mamba_prefills_through_the_port_and_generation_continues():
    # Imported here, not at collection: mlx-lm's package imports transformers, seconds on
    # every worker.
    pytest.importorskip("mlx_lm", reason="needs mlx-lm: pip install -e '.[dev]'")
    m = mamba_module()
    args = m.ModelArgs(
        model_type="mamba",
        vocab_size=64,
        hidden_size=16,
        intermediate_size=32,
        state_size=16,
        num_hidden_layers=2,
        conv_kernel=4,
        use_bias=False,
        use_conv_bias=True,
        time_step_rank=4,
    )
    mx.random.seed(0)
    stock = m.Model(args)
    mx.eval(stock.parameters())
    patched = m.Model(args)
    patched.update(stock.parameters())
    calls = []
    op = scan_op("sim")
    patch_mamba(patched, lambda *a, **k: calls.append(a[0].shape) or op(*a, **k))
    tokens = mx.random.randint(0, 64, (1, 12))

    def run(model, pieces):
        cache = model.make_cache()
        for piece in pieces:
            logits = model(piece, cache)
        out, nxt = [], logits[:, -1].argmax(-1)
        for _ in range(6):
            out.append(int(nxt.item()))
            nxt = model(nxt[:, None], cache)[:, -1].argmax(-1)
        return logits, out

    want, want_tokens = run(stock, [tokens])
    # the second piece starts from the state
    got, got_tokens = run(patched, [tokens[:, :7], tokens[:, 7:]])
    assert calls and all(shape[1] > 1 for shape in calls)  # prefill through the port, decode stock
    assert float(mx.abs(want[:, -1] - got[:, -1]).max()) < 1e-4 * float(mx.abs(want).max()) + 1e-5
    assert got_tokens == want_tokens
