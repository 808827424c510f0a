"""The ``lanes=2`` knob (mlxport/translate/tuning/coarsen_lanes.py): which kernels run two of the
block's threads in one with their adjacent accesses paired, and what the rewritten kernel computes,
run as MLX's cuda_kernel runs it on the CPU executor."""

from __future__ import annotations

import numpy as np
import pytest
from test_variant_knobs import run_on_executor
from test_vectorize import executor  # noqa: F401  (a fixture)

from mlxport.tasks import case_infos, load_task
from mlxport.translate.reading.reader import read_cuda
from mlxport.translate.translator import translate, translate_task
from mlxport.translate.tuning.coarsen_lanes import laned
from mlxport.translate.tuning.variants import Search

KERNEL = """
#define W 64
__device__ float twice(float v) { return 2.0f * v; }
template <typename T>
__global__ void k(const T* x, T* out, int n) {
    __shared__ T tile[W];
    int count = 0;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) tile[threadIdx.x] = x[i];
    __syncthreads();
    float v = twice((float)tile[blockDim.x - 1 - threadIdx.x]);
    if (i < n) out[i] = (T)v;
}
template <typename T>
void launch(const T* x, T* out, int n) { k<T><<<(n + W - 1) / W, W>>>(x, out, n); }
template void launch<float>(const float*, float*, int);
"""
LOAD = "    if (i < n) tile[threadIdx.x] = x[i];\n"
SYNC = "    __syncthreads();\n"
STORE = "    if (i < n) out[i] = (T)v;\n"
LEFT = {  # (what is replaced, by what): each lets a thread see another's work, or its identity
    "a shuffle": (STORE, "    v = __shfl_xor_sync(0xffffffffu, v, 1);\n" + STORE),
    "a warp barrier": (SYNC, SYNC + "    __syncwarp();\n"),
    "volatile memory": ("__shared__ T", "volatile __shared__ T"),
    "a barrier under a thread's test": (SYNC, "    if (i < n) __syncthreads();\n"),
    "a function naming the thread": (
        "return 2.0f * v;",
        "return threadIdx.x * v;",
    ),
    "a macro naming the thread": ("#define W 64", "#define W 64\n#define T0 (threadIdx.x + 0)"),
    "the thread's index whole": ("+ threadIdx.x;", "+ ((uint3)threadIdx).x;"),
    "cooperative groups": (
        "    int count = 0;\n",
        "    int count = 0;\n    auto g = cooperative_groups::this_thread_block();\n",
    ),
    "shared memory declared after the thread's index": (SYNC, SYNC + "    __shared__ T m[4];\n"),
    "a local every copy shares, written": (STORE, STORE + "    count += 1;\n"),
    "a return that is no guard": (STORE, "    if (i < n) { out[i] = v; return; }\n"),
    "nothing to pair": [
        (LOAD, "    if (i < n) tile[threadIdx.x] = twice(x[i]);\n"),
        (STORE, "    if (i < n) out[i] += v;\n"),
    ],
    "buffers of a named type": [("const T* x, T* out", "const float* x, float* out")],
}


def rewritten(src: str):
    return laned(src, read_cuda(src), "k", 2)


def test_threads_run_two_lanes_with_their_neighbouring_loads_and_stores_paired():
    done = rewritten(KERNEL)
    assert done is not None
    src = done.source
    assert "k<T><<<(n + W - 1) / W, ((W) + 2 - 1) / 2>>>(x, out, n, (int)(W))" in src
    assert "int n, int mlxport_bdx)" in src
    assert src.count("__syncthreads();") == 1  # waited once for both lanes
    assert "tile[((unsigned)mlxport_bdx) - 1 - (2u * threadIdx.x + 1u)]" in src
    assert "*reinterpret_cast<const mlxport_chunk<T, 2>*>(&(x)[i])" in src
    assert "*reinterpret_cast<mlxport_chunk<T, 2>*>(&(out)[i]) = mlxport_p;" in src
    assert "(long long)(mlxport_j1_i) == (long long)(i) + 1" in src  # tested at run time
    assert "mlxport_bdx" in translate(src, kernel="k", target="cuda").candidate.source


@pytest.mark.parametrize("why", list(LEFT))
def test_a_kernel_whose_threads_could_see_each_other_is_left(why):
    src = KERNEL
    for old, new in LEFT[why] if isinstance(LEFT[why], list) else [LEFT[why]]:
        assert old in src
        src = src.replace(old, new)
    assert rewritten(src) is None, why


def test_transpose_gets_the_knob_for_cuda_only_and_launches_half_the_threads_along_x():
    t = load_task("transpose_tiled")
    assert "lanes" in [k.name for k in Search(t, "cuda").knobs]
    assert "lanes" not in [k.name for k in Search(t, "msl").knobs]  # a CUDA rewrite
    variant = Search(t, "cuda").variant("lanes=2 + __restrict__").candidate
    case = t.bench_cases()[0]
    assert variant.launch(case_infos(t, case, "bfloat16")).threadgroup[:2] == (16, 8)
    assert variant.source.count("mlxport_chunk<T, 2> mlxport_p") == 2  # the tile's load and store


def test_transpose_in_two_lanes_matches_the_translation_bit_for_bit(executor, tmp_path):  # noqa: F811
    """In bfloat16 at 45 x 77: partial tiles (a lane past the edge, the other not) and rows starting
    at odd elements (pairs not 4-byte aligned) take each lane as written, the rest pairs. A variant
    whose paired load puts its first element in both lanes differs: the pairs ran."""
    t = load_task("transpose_tiled")
    case = {"M": 45, "N": 77}
    variant = Search(t, "cuda").variant("lanes=2 + __restrict__").candidate
    broken = variant.model_copy(
        update={"source": variant.source.replace("= mlxport_p.v[1];", "= mlxport_p.v[0];")}
    )
    assert broken.source != variant.source
    want = run_on_executor(
        executor, tmp_path / "a.cu", t, translate_task(t, "cuda").candidate, case, "bfloat16"
    )["out"]
    got = run_on_executor(executor, tmp_path / "b.cu", t, variant, case, "bfloat16")["out"]
    bad = run_on_executor(executor, tmp_path / "c.cu", t, broken, case, "bfloat16")["out"]
    np.testing.assert_array_equal(got, want)
    assert not np.array_equal(bad, want)
