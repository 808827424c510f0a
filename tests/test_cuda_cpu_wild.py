"""The CPU executor on code as projects write it around their kernels: host code and the headers
only it needs never block, groups passed as cg::thread_group, buffers inside structs passed by
value. Each kernel here is small and fresh."""

from pathlib import Path

import numpy as np
import pytest

from mlxport.backends.cuda_cpu import CudaExecutor, ExecError, Launch

RNG = np.random.default_rng(11)


@pytest.fixture(scope="module")
def ex():
    executor = CudaExecutor()
    yield executor
    executor.close()


def kernel(ex, tmp_path: Path, source: str, name: str):
    path = tmp_path / f"{name}.cu"
    path.write_text(source)
    return ex.compile(ex.source(path), name)


HOST_IO = r"""
#include <iostream>
#include <vector>
#include <algorithm>
#include <chrono>
#include <cuda_runtime.h>
using std::vector;
using std::generate;
using std::cout;
typedef std::chrono::high_resolution_clock Clock;
const char* sample_name = "scale";  // cuda-samples' sSDKsample: a host pointer, no device value
#include <gflags/gflags.h>
namespace gflags = google;  // caffe: a dropped header's namespace, named in its path
template <typename T> void host_gemm(const CBLAS_TRANSPOSE t, T* c);  // caffe's math prototypes
// ggml's, in a header: a struct the kernel reaches, with a `void*` member
struct init_params { size_t mem_size; void* mem_buffer; bool no_alloc; };
__device__ float size_of(const init_params& p) { return float(p.mem_size); }

__global__ void scale_kernel(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
    if (n < 0) y[0] = size_of(init_params{});
}

int main() {
    int n = 1000;
    vector<float> h(n);
    generate(h.begin(), h.end(), []() { return 1.0f; });
    float *x, *y;
    cudaMalloc(&x, n * sizeof(float));
    cudaMalloc(&y, n * sizeof(float));
    auto t0 = Clock::now();
    scale_kernel<<<(n + 255) / 256, 256>>>(x, y, 2.0f, n);
    cout << sample_name << " done in " << (Clock::now() - t0).count() << std::endl;
    return 0;
}

// macros of a header the executor drops (caffe's layer instantiations)
INSTANTIATE_LAYER_GPU_FUNCS(ScaleLayer);
namespace proj { REGISTER_LAYER_CLASS(Scale); }
"""


def test_host_code_and_the_headers_only_it_uses_never_block(ex, tmp_path):
    c = kernel(ex, tmp_path, HOST_IO, "scale_kernel")
    x = RNG.standard_normal(1000).astype(np.float32)
    y = np.zeros(1000, np.float32)
    r = ex.run(c, Launch((4, 1, 1), (256, 1, 1)), [x, y, np.float32(2.0), np.int32(1000)])
    assert r.ok, r.error
    np.testing.assert_array_equal(r.buffers["y"], 2 * x)


DEVICE_COUT = r"""
#include <iostream>
__device__ void report(float v) { std::cout << v; }
__global__ void noisy(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { y[i] = x[i]; report(x[i]); }
}
"""


def test_device_code_calling_the_cxx_library_is_refused_naming_the_include(ex, tmp_path):
    with pytest.raises(ExecError, match=r"not device code.*through <iostream>, which noisy.cu"):
        kernel(ex, tmp_path, DEVICE_COUT, "noisy")


THREAD_GROUP = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

__device__ float group_sum(cg::thread_group g, float* buf, float v) {
    unsigned r = g.thread_rank();
    buf[r] = v;
    g.sync();
    for (unsigned s = g.size() / 2; s > 0; s /= 2) {
        if (r < s) buf[r] += buf[r + s];
        g.sync();
    }
    float total = buf[0];
    g.sync();
    return total;
}

__global__ void group_sums(const float* x, float* block_out, float* tile_out, int n) {
    __shared__ float buf[128];
    cg::thread_block block = cg::this_thread_block();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.0f;
    float total = group_sum(block, buf, v);
    if (block.thread_rank() == 0) block_out[blockIdx.x] = total;
    cg::thread_group tile = cg::tiled_partition(block, 16);
    unsigned first = block.thread_rank() - tile.thread_rank();
    float part = group_sum(tile, buf + first, v);
    if (tile.thread_rank() == 0) tile_out[i / 16] = part;
}
"""


def test_groups_passed_as_thread_group_sync_and_rank_over_their_own_threads(ex, tmp_path):
    c = kernel(ex, tmp_path, THREAD_GROUP, "group_sums")
    x = RNG.standard_normal(256).astype(np.float32)
    args = [x, np.zeros(2, np.float32), np.zeros(16, np.float32), np.int32(256)]
    r = ex.run(c, Launch((2, 1, 1), (128, 1, 1)), args)
    assert r.ok, r.error
    np.testing.assert_allclose(r.buffers["block_out"], x.reshape(2, 128).sum(1), rtol=1e-5)
    np.testing.assert_allclose(r.buffers["tile_out"], x.reshape(16, 16).sum(1), rtol=1e-5)


STRUCTS = r"""
#include <cstdint>
typedef struct {
    const float* x;
    const float* w;
    float* out;
    int n;
    int width;
} ConvParams;

__global__ void causal_conv(ConvParams p) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= p.n) return;
    float s = 0.0f;
    for (int j = 0; j < p.width; ++j)
        if (i - j >= 0) s += p.w[j] * p.x[i - j];
    p.out[i] = s;
}

template <typename T>
struct Load {
    const T* src;
    __device__ T operator()(int i) const { return src[i]; }
};
template <typename T>
struct Store {
    using index_t = int64_t;  // a member's type named by the struct's own alias
    T* dst;
    index_t stride;
    __device__ void operator()(int i, T v) const { dst[i * stride] = v; }
};
template <class L, class S>
__global__ void relu(L load, S store, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) store(i, fmaxf(load(i), 0.0f));
}
void launch(const float* x, float* y, int n) {
    relu<<<(n + 127) / 128, 128>>>(Load<float>{x}, Store<float>{y, 2}, n);
}
"""


def test_each_buffer_of_a_struct_passed_by_value_is_bound_and_checked(ex, tmp_path):
    path = tmp_path / "structs.cu"
    path.write_text(STRUCTS)
    source = ex.source(path)
    c = ex.compile(source, "causal_conv")
    x = RNG.standard_normal(300).astype(np.float32)
    w = RNG.standard_normal(4).astype(np.float32)
    p = {"x": x, "w": w, "out": np.zeros(300, np.float32), "n": np.int32(300)}
    r = ex.run(c, Launch((3, 1, 1), (128, 1, 1)), [p | {"width": np.int32(4)}])
    assert r.ok, r.error
    want = np.convolve(x, w)[:300]
    np.testing.assert_allclose(r.buffers["p.out"], want, rtol=1e-5, atol=1e-5)
    assert r.written["p.out"].all() and "p.x" not in r.written
    # a member reaching past its own buffer is named as any pointer parameter is
    r = ex.run(c, Launch((3, 1, 1), (128, 1, 1)), [p | {"width": np.int32(5)}])
    assert not r.ok and "p.w" in r.error, r.error

    # a task takes the functors' members as its parameters, their types bound by --template
    members = source.members(source.kernels["relu"], {"L": "Load<float>", "S": "Store<float>"})
    assert {n: (slot, m.base, m.const) for n, (slot, m) in members.items()} == {
        "src": ("load.src", "float", True),
        "dst": ("store.dst", "float", False),
        "stride": ("store.stride", "int64_t", False),
    }
    c = ex.compile(source, "relu", ["Load<float>", "Store<float>"])
    y = np.zeros(2 * 200, np.float32)
    args = [{"src": x[:200]}, {"dst": y, "stride": np.int64(2)}, np.int32(200)]
    r = ex.run(c, Launch((2, 1, 1), (128, 1, 1)), args)
    assert r.ok, r.error
    np.testing.assert_array_equal(r.buffers["store.dst"][::2], np.maximum(x[:200], 0))
    assert not r.written["store.dst"][1::2].any()


CONV_LAUNCH = r"""
void causal_conv_launch(const float* x, const float* w, float* out, int n, int width) {
    ConvParams p;
    p.x = x;
    p.w = w;
    p.out = out;
    p.n = n;
    p.width = width;
    causal_conv<<<(n + 127) / 128, 128>>>(p);
}
"""


def test_a_task_takes_the_members_of_a_struct_of_buffers_as_its_own(tmp_path):
    """Its buffers are sized by measuring, its scalars bound by the case, and the golden binds each
    member to the task's array of that name."""
    import mlx.core as mx

    from mlxport.tasks import load_task
    from mlxport.tasks.make import TaskRequest, from_cuda, write_task
    from mlxport.verify.golden import run_original

    path = tmp_path / "conv.cu"
    path.write_text(STRUCTS + CONV_LAUNCH)
    request = TaskRequest(source=path, kernel="causal_conv", cases=[{"n": 300, "width": 4}])
    built = from_cuda(request, heldout=1)
    assert {t["name"]: t["shape"] for t in built.task["inputs"]} == {"x": ["n"], "w": ["width"]}
    assert [(t["name"], t["shape"]) for t in built.task["outputs"]] == [("out", ["n"])]
    task = load_task(write_task(built, tmp_path / "task", path))
    case = built.task["cases"]["heldout"][0]  # its own sizes
    x = RNG.standard_normal(case["n"]).astype(np.float32)
    w = RNG.standard_normal(case["width"]).astype(np.float32)
    (out,) = run_original(task, {"x": mx.array(x), "w": mx.array(w)}, case)
    np.testing.assert_allclose(out, np.convolve(x, w)[: case["n"]], rtol=1e-5, atol=1e-5)


def test_the_translation_carries_no_using_only_host_code_needs(tmp_path):
    from mlxport.tasks import load_task
    from mlxport.tasks.make import TaskRequest, from_cuda, write_task
    from mlxport.translate.translator import translate_task

    path = tmp_path / "scale.cu"
    path.write_text(HOST_IO)
    built = from_cuda(TaskRequest(source=path, cases=[{"n": 1000}]), heldout=0)
    candidate = translate_task(load_task(write_task(built, tmp_path / "task", path)), "msl")
    assert candidate.candidate is not None, candidate
    assert "using std" not in candidate.candidate.header
