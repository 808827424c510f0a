"""The ``selects=1`` knob (mlxport/translate/tuning/ifconvert.py): which branches become selects,
and that the converted kernel computes what the translation does, bit for bit, on
the CPU executor."""

from __future__ import annotations

import numpy as np
import pytest
from test_variant_knobs import run_on_executor
from test_vectorize import bf16_as_float, executor  # noqa: F401  (a fixture)

from mlxport.tasks import load_task
from mlxport.translate.reading.reader import read_cuda
from mlxport.translate.translator import translate_task
from mlxport.translate.tuning.ifconvert import if_converted
from mlxport.translate.tuning.variants import Search

HEADER = """
#define EPS 1e-6f
#define FIRST x[0]
__device__ float twice(float v) { return 2.0f * v; }
__global__ void k(const float* x, float* out, int n) {
    float m = -1e30f, s = 0.0f;
    int count = 0;
    for (int c = threadIdx.x; c < n; c += blockDim.x) {
        float v = x[c];
"""
FOOTER = """
    }
    out[threadIdx.x] = m + s + count;
}
void launch(const float* x, float* out, int n) { k<<<1, 32>>>(x, out, n); }
"""
TAKEN = "if (v > m) { s = s * __expf(m - v) + 1.0f; m = v; }\n        else { s += __expf(v - m); }"
LEFT = {  # an arm each, and what evaluating it on the other path could do
    "a store": "if (v > m) { out[c] = v; m = v; }",
    "an element read": "if (c > 0) { s += x[c - 1]; }",
    "a call that is not math": "if (v > m) { s = twice(v); }",
    "a division": "if (v != 0.0f) { s = s / v; }",
    "an integer": "if (v > m) { count += 1; }",
    "a nested branch": "if (v > m) { if (v > 0.0f) s = v; }",
    "a declaration": "if (v > m) { float t = v; s = t; }",
    "a macro reading memory": "if (v > m) { s = FIRST; }",
    "a return": "if (v > m) { return; }",
    "a loop": "if (v > m) { while (s < 1.0f) s += 1.0f; }",
    # int n, and no float n in sight
    "a parameter under a local's name": "if (v > m) { n += 1.0f; }",
    "a comment that would end the line": "if (v > m) { s = s // keep\n + v; }",
    "the line it is on": "if (v > m) { s = s + __LINE__; }",
}


def converted(body: str) -> str | None:
    src = HEADER + body + FOOTER
    return if_converted(src, read_cuda(src), "k")


def test_an_online_update_becomes_selects_with_one_exp_on_the_same_lines():
    src = HEADER + TAKEN + FOOTER
    out = converted(TAKEN)
    assert out is not None and out.count("\n") == src.count("\n")
    assert "const float mlxsel_f0 = __expf(mlxsel_if ? (m - v) : (v - m));" in out
    assert "{ mlxsel_a_s = mlxsel_a_s * mlxsel_f0 + 1.0f; mlxsel_a_m = v; }" in out
    assert (
        "s = mlxsel_if ? mlxsel_a_s : mlxsel_b_s; m = mlxsel_if ? mlxsel_a_m : mlxsel_b_m;" in out
    )


def test_a_call_whose_argument_its_arm_changed_first_is_not_shared():
    out = converted("if (v > m) { m = v; s = __expf(m - v); } else { s = __expf(v - m); }")
    assert (
        out is not None and "mlxsel_f0" not in out and "mlxsel_a_s = __expf(mlxsel_a_m - v);" in out
    )


@pytest.mark.parametrize("why", list(LEFT))
def test_a_branch_whose_other_arm_could_do_harm_is_left(why):
    out = converted(LEFT[why])  # a branch inside it may still be converted on its own
    assert out is None or LEFT[why].split(" {")[0].replace("if ", "mlxsel_if = ") not in out, why


def test_only_a_float_function_alone_in_its_expression_is_called_once():
    """``exp`` takes its argument's type (float here, double elsewhere): both arms keep their own
    call; ``__expf(sqrtf(v))`` keeps its nesting; ``fmaxf`` and ``__expf`` are made once each."""
    out = converted("if (v > m) { s = s * exp(v); } else { s = s * exp(-v); }")
    assert out is not None and "mlxsel_f0" not in out
    out = converted("if (v > m) { s += __expf(sqrtf(v)); } else { s -= __expf(sqrtf(-v)); }")
    assert out is not None and "mlxsel_f0" not in out and "__expf(sqrtf(v))" in out
    out = converted(
        "if (v > m) { s = fmaxf(s, v) + __expf(v); } else { s = fmaxf(s, -v) + __expf(-v); }"
    )
    assert "const float mlxsel_f0 = fmaxf(mlxsel_if ? (s) : (s), mlxsel_if ? (v) : (-v));" in out
    assert "const float mlxsel_f1 = __expf(mlxsel_if ? (v) : (-v));" in out


def test_the_scalar_an_if_sees_is_the_one_converted():
    """A float ``best`` declared in another block does not make the file's ``best`` the kernel's
    own: storing it on both paths would write memory the untaken path never wrote."""
    src = (
        "__device__ float best;\n"
        + HEADER.replace(
            "float v = x[c];", "float v = x[c];\n        { float best = v; s += best; }"
        )
        + "if (v > 1.5f) { best = v; }"
        + FOOTER
    )
    assert if_converted(src, read_cuda(src), "k") is None


def test_a_branch_outside_any_loop_is_left():
    src = (
        "__global__ void k(const float* x, float* out) "
        "{ float s = x[0]; if (s > 0.0f) s = 1.0f; out[0] = s; }\n"
        "void launch(const float* x, float* out) { k<<<1, 1>>>(x, out); }\n"
    )
    assert if_converted(src, read_cuda(src), "k") is None


def test_softmax_with_selects_matches_the_translation_bit_for_bit(executor, tmp_path):  # noqa: F811
    """The same operations on the same values in the same order: bit for bit, in a row of 1018 with
    maxima spread over it; a variant keeping the other arm's values differs."""
    t = load_task("softmax_rows")
    search = Search(t, "cuda")
    assert "selects" in [k.name for k in search.knobs]
    variant = search.variant("selects=1 + __restrict__").candidate
    swapped = variant.model_copy(
        update={
            "source": variant.source.replace(
                "s = mlxsel_if ? mlxsel_a_s : mlxsel_b_s;",
                "s = mlxsel_if ? mlxsel_b_s : mlxsel_a_s;",
            )
        }
    )
    assert swapped.source != variant.source
    case = {"R": 3, "C": 1018}
    want = run_on_executor(
        executor, tmp_path / "a.cu", t, translate_task(t, "cuda").candidate, case, "bfloat16"
    )["out"]
    got = run_on_executor(executor, tmp_path / "b.cu", t, variant, case, "bfloat16")["out"]
    bad = run_on_executor(executor, tmp_path / "c.cu", t, swapped, case, "bfloat16")["out"]
    np.testing.assert_array_equal(got, want)
    assert (bf16_as_float(bad) != bf16_as_float(got)).mean() > 0.5
