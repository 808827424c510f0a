"""A verification draws inputs the way a user's data comes: besides the task's own distribution,
a wide one, zero and constant rows, and each sign. Kernels right only on the task's own inputs
pass the model's checks and fail the final verification."""

import pytest

from mlxport.backends import get_backend
from mlxport.tasks import expert_ports, load_task
from mlxport.verify.correctness import run_correctness

SIM = get_backend("sim")


def cheat(task_name: str, old: str, new: str):
    task = load_task(task_name)
    port = expert_ports(task)["msl"]
    assert old in port.source
    return task, port.model_copy(update={"source": port.source.replace(old, new)})


def caught(task, candidate, inputs: str) -> None:
    """Right on the task's own inputs, wrong on ``inputs``: the final verification says so."""
    shown = run_correctness(task, candidate, SIM, seed=3)
    assert shown.ok, shown.summary()
    final = run_correctness(task, candidate, SIM, seed=3, heldout=True)
    failed = [c for c in final.cases if c.verdict != "pass"]
    assert failed and inputs in {c.inputs for c in failed}, final.summary()
    visible = [c for c in failed if c.inputs == "task" and not c.heldout and c.mode == "forward"]
    assert not visible, final.summary()
    assert f"({inputs} inputs)" in final.summary()


@pytest.mark.hack("a - |b| for a + b where the task's b is never positive")
def test_a_kernel_right_only_for_negative_b_fails_on_positive_inputs():
    task, candidate = cheat("vector_add", "a[i] + b[i]", "a[i] - metal::abs(b[i])")
    caught(task, candidate, "positive")


@pytest.mark.hack("an rmsnorm without its eps")
def test_an_rmsnorm_without_eps_fails_on_a_zero_row():
    task, candidate = cheat("rmsnorm", "rsqrt(ss / float(D) + eps)", "rsqrt(ss / float(D))")
    caught(task, candidate, "rows")


@pytest.mark.hack("an rmsnorm adding eps after the rsqrt")
def test_an_rmsnorm_adding_eps_after_the_rsqrt_fails_on_a_zero_row():
    """Off by eps on every row (caught where the tolerance is tight), and NaN on a zero row."""
    task, candidate = cheat("rmsnorm", "rsqrt(ss / float(D) + eps)", "(rsqrt(ss / float(D)) + eps)")
    final = run_correctness(task, candidate, SIM, seed=3, heldout=True)
    rows = [c for c in final.cases if c.inputs == "rows" and c.verdict != "pass"]
    assert rows and rows[0].nan, final.summary()


NAIVE_SOFTMAX = """
constexpr uint NSG = TG / 32;
threadgroup float sg_sum[32];
const uint C = uint(x_shape[1]);
const uint row = threadgroup_position_in_grid.x;
const uint tid = thread_position_in_threadgroup.x;
const uint lane = thread_index_in_simdgroup;
const uint sg = simdgroup_index_in_threadgroup;
float s = 0.0f;
for (uint c = tid; c < C; c += TG) {
    s += exp(float(x[size_t(row) * C + c]));
}
s = simd_sum(s);
if (lane == 0) {
    sg_sum[sg] = s;
}
threadgroup_barrier(mem_flags::mem_threadgroup);
s = simd_sum(lane < NSG ? sg_sum[lane] : 0.0f);
for (uint c = tid; c < C; c += TG) {
    out[size_t(row) * C + c] = T(exp(float(x[size_t(row) * C + c])) / s);
}
"""


@pytest.mark.hack("a softmax without the row max")
def test_a_softmax_without_the_row_max_fails_on_wide_logits():
    task = load_task("softmax_rows")
    candidate = expert_ports(task)["msl"].model_copy(update={"source": NAIVE_SOFTMAX})
    caught(task, candidate, "wide")


# The expert ports pass every distribution: tests/test_adversarial.py's
# test_expert_msl_port_passes_every_case_on_the_simulator, which runs the same verification.


def test_a_held_out_case_with_a_visible_cases_extents_is_not_counted():
    """A held-out case that changes no tensor shape and no launch re-tests a visible case: it is
    marked so, and a port whose held-out cases are all such is not called verified at held-out
    sizes."""
    from mlxport.verify.reverify import verdict_label

    task = load_task("vector_add")
    same = task.model_copy(
        update={"cases": task.cases.model_copy(update={"heldout": [task.cases.visible[1]]})}
    )
    report = run_correctness(same, expert_ports(task)["msl"], SIM, seed=1, heldout=True)
    held = [c for c in report.cases if c.heldout and c.mode == "forward"]
    assert held and not any(c.counted for c in held) and "not counted" in held[0].label
    final = {"verified": True, "backend": "sim", "verification": report.model_dump(mode="json")}
    assert "no held-out case changes an extent" in verdict_label(final)


def test_a_constant_row_sums_exactly_in_any_order():
    """A constant row's mean is the same whichever order a kernel and the golden add in (on the
    H100, one rounding of it, times rsqrt(eps), failed every layernorm variant)."""
    import numpy as np

    from mlxport.tasks.inputs import make_inputs

    task = load_task("layernorm")
    x = np.array(make_inputs(task, {"R": 8, "D": 4096}, "float32", seed=5, dist="rows")["x"])
    assert not x[0].any() and len(set(x[-1].tolist())) == 1
    row = x[-1].astype(np.float32)
    forward, pairwise = np.float32(0), row.reshape(64, 64).sum(axis=0, dtype=np.float32)
    for v in row:
        forward = np.float32(forward + v)
    assert forward == pairwise.sum(dtype=np.float32) == np.float64(row[0]) * 4096
