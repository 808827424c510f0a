"""The ``keep=K`` knob (``Keep`` in mlxport/translate/tuning/vector_code.py): a row a stride loop
reads in chunks, held in registers for a later loop over the same elements, and what the kernel
computes with it, run on the CPU executor."""

from __future__ import annotations

import numpy as np
import pytest
from test_variant_knobs import run_on_executor
from test_vectorize import executor  # noqa: F401  (a fixture)

from mlxport.tasks import load_task
from mlxport.translate.reading.reader import read_cuda
from mlxport.translate.tuning.variants import Search
from mlxport.translate.tuning.vectorize import vector_plan

KERNEL = """
#define BLOCK 128
__global__ void k(const float* x, float* out, float* out2, int n) {
    __shared__ float row[1024];
    const float* xr = x + blockIdx.x * n;
    for (int c = threadIdx.x; c < n; c += BLOCK) out2[c] = xr[c] + 1.0f;
    int m = n;
    for (int c = threadIdx.x; c < n; c += BLOCK) out[c] = xr[c] * 2.0f;
}
void launch(const float* x, float* out, float* out2, int n) { k<<<4, BLOCK>>>(x, out, out2, n); }
"""
FIRST = "for (int c = threadIdx.x; c < n; c += BLOCK) out2[c] = xr[c] + 1.0f;"
SECOND = "for (int c = threadIdx.x; c < n; c += BLOCK) out[c] = xr[c] * 2.0f;"
SHARED = [
    (FIRST, FIRST.replace("out2[c] = xr[c] + 1.0f", "row[c] = xr[c]") + "\n    __syncthreads();"),
    ("int m = n;", FIRST.replace("xr[c]", "row[c]")),
    (SECOND, SECOND.replace("xr[c]", "row[c]")),
]
NOT_KEPT = {  # what makes the second loop's chunks possibly not the first's
    "the bound changed between them": [("int m = n;", "n = n / 2;")],
    "another offset": [(SECOND, SECOND.replace("xr[c]", "xr[c + 1]"))],
    "another bound": [(SECOND, SECOND.replace("c < n;", "c < n - 8;"))],
    # another thread's element written between the reads: for all the loops can tell, theirs
    "shared memory written again": [
        *SHARED,
        (
            "__syncthreads();",
            "__syncthreads();\n    if (threadIdx.x == 0) row[0] = 1.0f;\n    __syncthreads();",
        ),
    ],
}


def edited(edits: list[tuple[str, str]]) -> str:
    src = KERNEL
    for old, new in edits:
        assert old in src
        src = src.replace(old, new)
    return src


def keeps(src: str):
    plan = vector_plan(src, read_cuda(src), "k")
    return plan.keeps if plan else {}


def test_a_loop_reading_what_an_earlier_one_read_takes_it_from_registers():
    got = keeps(KERNEL)
    assert set(got) == {0, 1}
    assert got[0].saves and not got[0].uses and got[1].uses and not got[1].saves
    assert got[1].flag == got[0].flag == "mlxport_kept0"


@pytest.mark.parametrize("why", list(NOT_KEPT))
def test_chunks_that_may_differ_are_loaded_again(why):
    assert not keeps(edited(NOT_KEPT[why])), why


def test_what_a_loop_wrote_to_shared_memory_nothing_else_writes_is_kept():
    """A row staged in shared memory (layernorm's): the loops after the barrier take what the
    first one stored from its registers; beside a write elsewhere, they load it."""
    got = keeps(edited(SHARED))
    assert len(got) == 3 and list(got[0].saves.values()) == ["mlxport_keep0_w0"]  # row's
    assert list(got[1].uses.values()) == list(got[2].uses.values()) == ["mlxport_keep0_w0"]


def test_softmax_keeps_its_row_and_matches_the_chunked_variant_bit_for_bit(
    executor,  # noqa: F811
    tmp_path,
):
    """Rows of 8196 bfloat16 elements: rows 0 and 2 start 16-byte aligned and go through
    registers (512 threads, two 8-element chunks each, within 4 steps), row 1 and the last 4
    elements run the loops as written. The same bits as the variant without keep, which chunks
    alike; one whose second loop takes the first step's chunk at every step differs."""
    t = load_task("softmax_rows")
    search = Search(t, "cuda")
    kept = search.variant("vector=8 + selects=1 + keep=4 + __restrict__").candidate
    plain = search.variant("vector=8 + selects=1 + __restrict__").candidate
    head, _, tail = kept.source.rpartition("mlxport_keep0_r0[mlxport_q];")
    stale = kept.model_copy(update={"source": head + "mlxport_keep0_r0[0];" + tail})
    case = {"R": 3, "C": 8196}
    want = run_on_executor(executor, tmp_path / "a.cu", t, plain, case, "bfloat16")["out"]
    got = run_on_executor(executor, tmp_path / "b.cu", t, kept, case, "bfloat16")["out"]
    bad = run_on_executor(executor, tmp_path / "c.cu", t, stale, case, "bfloat16")["out"]
    np.testing.assert_array_equal(got, want)
    assert not np.array_equal(bad, want)


def test_layernorm_keeps_its_staged_row_and_matches_bit_for_bit(executor, tmp_path):  # noqa: F811
    """Rows of 4090 elements staged in shared memory by 128 threads, 8 four-element chunks each:
    the variance and the output take the row from registers in rows 0 and 2 (row 1 starts 4
    bytes off and runs as written). The same bits as vector=4 alone; a variant whose last loop
    takes the first step's chunk at every step differs."""
    t = load_task("layernorm")
    search = Search(t, "cuda")
    kept = search.variant("vector=4 + keep=8 + LN_BLOCK=128 + __restrict__").candidate
    plain = search.variant("vector=4 + LN_BLOCK=128 + __restrict__").candidate
    head, _, tail = kept.source.rpartition("mlxport_keep0_w1[mlxport_q];")
    stale = kept.model_copy(update={"source": head + "mlxport_keep0_w1[0];" + tail})
    case = {"R": 3, "D": 4090}
    want = run_on_executor(executor, tmp_path / "a.cu", t, plain, case, "bfloat16")["out"]
    got = run_on_executor(executor, tmp_path / "b.cu", t, kept, case, "bfloat16")["out"]
    bad = run_on_executor(executor, tmp_path / "c.cu", t, stale, case, "bfloat16")["out"]
    np.testing.assert_array_equal(got, want)
    assert not np.array_equal(bad, want)
