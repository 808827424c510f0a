"""Inline PTX of the subset the CPU executor reads (vector loads and stores with cache hints, a
predicated load, %laneid, cvt) and cub's BlockReduce and WarpReduce, translated to MSL: each
kernel is made into a task from the .cu file (the original on the CPU executor is the golden),
translated, and checked on the simulator."""

import textwrap

import pytest

from mlxport.backends import get_backend
from mlxport.tasks import load_task
from mlxport.tasks.make import TaskRequest, from_cuda, write_task
from mlxport.translate.bind.result import Untranslatable
from mlxport.translate.translator import translate, translate_task
from mlxport.verify.correctness import run_correctness


def _ported(tmp_path, source: str, cases: list[dict]):
    path = tmp_path / "kernel_src.cu"
    path.write_text(textwrap.dedent(source))
    built = from_cuda(TaskRequest(source=path, cases=cases), heldout=1)
    task = load_task(write_task(built, tmp_path / "task", path))
    translation = translate_task(task, "msl")
    report = run_correctness(task, translation.candidate, get_backend("sim"), heldout=True)
    assert report.ok, report.summary()
    return translation


def test_vector_and_predicated_ptx_loads_and_stores(tmp_path):
    """DeepSpeed's memory helpers: a v4 load with a cache hint, a predicated v4 load that gives
    zeros where the predicate is off, a v2 store, a u16 load at an offset, the lane from
    %laneid and a saturating cvt."""
    source = """
    #include <cstdint>
    __device__ void load4(void* dst, const void* src, bool ok) {
        uint4* data = reinterpret_cast<uint4*>(dst);
        asm volatile("{\\n\\t.reg .pred p;\\n\\tsetp.ne.b32 p, %5, 0;\\n\\tmov.b32 %0, 0;\\n"
                     "\\tmov.b32 %1, 0;\\n\\tmov.b32 %2, 0;\\n\\tmov.b32 %3, 0;\\n"
                     "\\t@p ld.global.v4.u32 {%0, %1, %2, %3}, [%4];\\n}\\n"
                     : "=r"(data[0].x), "=r"(data[0].y), "=r"(data[0].z), "=r"(data[0].w)
                     : "l"(src), "r"((int)ok));
    }
    __device__ void load4_cached(void* dst, const void* src) {
        uint4* data = reinterpret_cast<uint4*>(dst);
        asm volatile("ld.global.ca.v4.u32 {%0, %1, %2, %3}, [%4];\\n"
                     : "=r"(data[0].x), "=r"(data[0].y), "=r"(data[0].z), "=r"(data[0].w)
                     : "l"(src));
    }
    __device__ void store2(void* dst, const void* src) {
        const uint2* data = reinterpret_cast<const uint2*>(src);
        asm volatile("st.global.cs.v2.u32 [%0], {%1, %2};" : : "l"(dst), "r"(data[0].x),
                     "r"(data[0].y) : "memory");
    }
    __device__ unsigned lane_id() {
        unsigned lane;
        asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
        return lane;
    }
    __global__ void copy(const float* x, const short* h, float* y, int* lanes, int n) {
        int t = blockIdx.x * blockDim.x + threadIdx.x;
        int i = t * 4;
        float v[4], w[4];
        load4(v, x + i, i < n);
        load4_cached(w, x);
        short s;
        asm("ld.global.nc.u16 %0, [%1+2];" : "=h"(s) : "l"(h + t));
        int q;
        asm("cvt.rni.sat.s8.f32 %0, %1;" : "=r"(q) : "f"(v[0] * 10.0f));
        for (int k = 0; k < 4; k++) v[k] += w[k] + (float)s;
        store2(y + i, v);
        store2(y + i + 2, v + 2);
        lanes[t] = (int)lane_id() + 1000 * q;
    }
    void run(const float* x, const short* h, float* y, int* lanes, int n) {
        copy<<<(n / 4 + 63) / 64, 64>>>(x, h, y, lanes, n);
    }
    """
    translation = _ported(tmp_path, source, [{"n": 512}])
    assert "asm" not in translation.candidate.source + translation.candidate.header


def test_ptx_outside_the_subset_is_refused_naming_the_instruction():
    source = (
        "__global__ void k(const float* x, float* out, int n) {\n"
        '    float y; asm("add.f32 %0, %1, %1;" : "=f"(y) : "f"(x[0]));\n'
        "    out[0] = y;\n}\n"
        "void run(const float* x, float* out, int n) { k<<<1, 32>>>(x, out, n); }\n"
    )
    with pytest.raises(Untranslatable) as info:
        translate(source, kernel="k")
    assert "add.f32 %0, %1, %1" in info.value.construct and info.value.line == 2, info.value
