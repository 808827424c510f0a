"""Mismatch patterns say where an output is wrong, per axis, in the task's dimension names."""

import numpy as np

from mlxport.backends import get_backend
from mlxport.spec import Tolerance
from mlxport.tasks import expert_ports, load_task
from mlxport.verify.compare import axis_names, compare, describe_pattern
from mlxport.verify.correctness import run_correctness


def test_missing_barrier_second_half_of_one_axis():
    bad = np.zeros((2, 3, 8, 4), bool)
    bad[:, :, 4:, :] = True
    text = describe_pattern(bad, axes=["B", "H", "Tq", "D"])
    assert text == "96 of 192 elements wrong (50.0%); wrong where Tq >= 4; every B, H, D"


def test_one_block_in_several_axes_names_each():
    bad = np.zeros((2, 8, 6), bool)
    bad[:, 2:5, :3] = True
    assert describe_pattern(bad, axes=["N", "C", "W"]).endswith(
        "wrong where C 2..4 and W 0..2; every N"
    )


def test_part_of_a_box_says_how_much():
    bad = np.triu(np.ones((6, 6), bool), 1)  # a causal mask gone wrong: not a box
    text = describe_pattern(bad, axes=["Tq", "Tk"])
    assert "wrong where Tq 0..4 and Tk >= 1 (" in text and "% of those)" in text


def test_strided_patterns():
    bad = np.zeros((3, 8), bool)
    bad[:, 1::2] = True
    assert describe_pattern(bad, axes=["R", "D"]).endswith("wrong where D is odd; every R")
    bad = np.zeros((3, 16), bool)
    bad[:, 1::4] = True
    assert describe_pattern(bad, axes=["R", "D"]).endswith(
        "wrong at every 4th D starting at 1; every R"
    )
    bad = np.zeros((2, 64), bool)
    bad[:, [c for c in range(64) if c % 16 < 4]] = True
    assert describe_pattern(bad, axes=["R", "C"]).endswith("wrong where C % 16 in 0..3; every R")


def test_everything_wrong_is_only_the_head():
    assert (
        describe_pattern(np.ones((4, 5), bool), axes=["R", "C"])
        == "20 of 20 elements wrong (100.0%)"
    )


def test_one_dimensional_outputs_stay_short():
    bad = np.zeros(16, bool)
    bad[12:] = True
    assert (
        describe_pattern(bad, axes=["N"]) == "4 of 16 elements wrong (25.0%); wrong where N >= 12"
    )
    bad = np.zeros(256, bool)
    bad[63::64] = True
    assert describe_pattern(bad, axes=["N"]).endswith("; wrong at every 64th N starting at 63")
    assert describe_pattern(bad).endswith("; wrong at every 64th index starting at 63")


def test_unknown_names_fall_back_to_axis_numbers():
    bad = np.zeros((4, 6), bool)
    bad[1, 2] = True
    assert describe_pattern(bad).endswith("wrong where axis 0 == 1 and axis 1 == 2")
    assert describe_pattern(bad, axes=["only one"]).endswith(
        "wrong where axis 0 == 1 and axis 1 == 2"
    )
    scattered = np.zeros((4, 4), bool)
    scattered.reshape(-1)[1::3] = True  # a flat stride touching every row and column
    text = describe_pattern(scattered)
    assert "every 3rd element starting at 1" in text and "every axis 0, 1" in text


def test_irregular_indices_and_length_cap():
    bad = np.zeros((2, 64), bool)
    bad[:, [1, 5, 9, 20, 33, 40]] = True
    assert "wrong where C in 6 of 64 values (first 1, last 40); every R" in describe_pattern(
        bad, axes=["R", "C"]
    )
    long = [f"DIMENSION_{i}" * 3 for i in range(5)]
    one = np.zeros((2,) * 5, bool)
    one[(1,) * 5] = True
    assert len(describe_pattern(one, axes=long)) <= 200


def test_axis_names_from_shape_expressions():
    assert axis_names(["B", "T", "C"]) == ["B", "T", "C"]
    assert axis_names(["N * 2", 1, "ceildiv(N, 256) * 256"]) == ["N*2", "axis 1", "axis 2"]
    assert axis_names(["N", "N"]) == ["N (axis 0)", "N (axis 1)"]
    assert axis_names("x.shape") is None


def test_compare_passes_names_into_the_pattern():
    ref = np.ones((4, 8), np.float32)
    out = ref.copy()
    out[:, 4:] = 0
    res = compare(
        out,
        ref,
        Tolerance(atol=1e-6, rtol=1e-5, norm=1e-5),
        case="c",
        dtype="float32",
        axes=["R", "C"],
    )
    assert res.verdict == "fail" and res.pattern.endswith("wrong where C >= 4; every R")


def test_correctness_report_names_the_tasks_dimension():
    """A softmax off by one from column 64 on: the report says C >= 64, every R."""
    task = load_task("softmax_rows")
    task = task.model_copy(
        update={
            "dtypes": ["float32"],
            "cases": task.cases.model_copy(update={"visible": [{"R": 4, "C": 128}]}),
        }
    )
    port = expert_ports(task)["msl"]
    wrong = port.model_copy(
        update={
            "name": "softmax_wrong_cols",
            "source": port.source.replace(
                "outr[c] = T(exp(float(xr[c]) - gm) * inv);",
                "outr[c] = T(exp(float(xr[c]) - gm) * inv + (c >= 64 ? 1.0f : 0.0f));",
            ),
        }
    )
    assert wrong.source != port.source
    report = run_correctness(task, wrong, get_backend("sim"), seed=1)
    [bad] = report.cases
    assert bad.pattern == "256 of 512 elements wrong (50.0%); wrong where C >= 64; every R", (
        bad.pattern
    )
