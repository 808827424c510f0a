"""A launch the host code picks in a branch: the port carries the arm its case takes, and the op
refuses, in one sentence, calls another arm would take (a size with no arm, an optional pointer
given)."""

from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest

from mlxport.tasks import load_task
from mlxport.tasks.sizes import fresh_sizes
from tests.test_op_works import ported

EXAMPLES = Path(__file__).parent / "cuda_exec"


def test_a_block_size_a_switch_on_the_row_length_picks_is_the_ops_contract(tmp_path):
    op, built = ported(tmp_path, None, {"N": 8, "K": 128}, path=EXAMPLES / "row_sum_switch.cu")
    assert built.task["cases"]["requires"] == ["K == 128"]
    assert any("`case 128:` of `switch (K)`" in n for n in built.notes)
    assert all(c["K"] == 128 for c in built.task["cases"]["heldout"])
    task = load_task(tmp_path / "task")
    drawn = fresh_sizes(task, 3, np.random.default_rng(0))
    assert drawn and {c["K"] for c in drawn} == {128} and len({c["N"] for c in drawn}) > 1
    x = np.random.default_rng(1).standard_normal((5, 128)).astype(np.float32)
    assert np.allclose(np.array(op.row_sum(mx.array(x))), x.sum(axis=1), atol=1e-4)
    with pytest.raises(ValueError, match=r"^row_sum was verified where K == 128, and here K=100$"):
        op.row_sum(mx.array(x[:, :100]))


def test_a_launch_an_optional_pointer_left_null_picks_takes_no_such_input(tmp_path):
    op, built = ported(tmp_path, None, {"n": 1000, "s": 2.0}, path=EXAMPLES / "scale_or_bias.cu")
    assert any("`if (bias == nullptr)`" in n for n in built.notes)
    assert str(op.SIGNATURE) == "(x, *, n=None, s=2.0)"
    x = np.random.default_rng(2).standard_normal(77).astype(np.float32)
    assert np.allclose(np.array(op.scale_bias(mx.array(x), s=3.0)), 3.0 * x)
    with pytest.raises(ValueError, match=r"^scale_bias makes bias itself .*without bias$"):
        op.scale_bias(mx.array(x), bias=mx.array(x), s=3.0)
