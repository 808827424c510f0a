"""The CUDA reader on real files: kernels, parameters, launches, features, assessment, errors."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from mlxport.translate.reading.reader import CudaFile, CudaReadError, assess, read_cuda, summary

CUDA = Path(__file__).parent / "cuda"
FILES = sorted(CUDA.glob("*.cu"))
TASKS = Path(__file__).parents[1] / "mlxport" / "evals" / "tasks"


def read(name: str) -> CudaFile:
    return read_cuda(CUDA / name)


def rw(cf: CudaFile, kernel: str) -> dict[str, str]:
    out = {}
    for p in cf.kernel(kernel).params:
        out[p.name] = ("r" if p.read else "") + ("w" if p.written else "")
    return out


def features(cf: CudaFile, kernel: str) -> set[str]:
    return {f.name for f in cf.kernel(kernel).features}


def test_at_least_ten_styles() -> None:
    assert len(FILES) >= 10


@pytest.mark.parametrize("path", FILES, ids=[f.name for f in FILES])
def test_every_file_reads(path: Path) -> None:
    cf = read_cuda(path)
    assert cf.kernels
    text = summary(cf)
    assert len(text.splitlines()) < 60
    assert CudaFile.model_validate_json(cf.model_dump_json()) == cf
    for k in cf.kernels:
        assert k.body.startswith("{") and k.body.endswith("}")
        assert all(a.line >= 1 for a in assess(k))


def test_suite_tasks_read() -> None:
    """Every task in the suite reads without error and yields its entry kernel."""
    for task in sorted(p for p in TASKS.glob("*") if (p / "task.toml").is_file()):
        meta = tomllib.loads((task / "task.toml").read_text())
        cf = read_cuda(task / meta.get("source", "kernel.cu"))
        assert cf.kernels, task.name
        if "kernel" in meta:
            assert cf.kernel(meta["kernel"]).kind == "global", task.name
        assert summary(cf)


def test_grid_stride_and_host_code() -> None:
    cf = read("grid_stride_saxpy.cu")
    assert [k.name for k in cf.kernels] == ["saxpy", "scale_inplace", "fill"]
    saxpy = cf.kernel("saxpy")
    assert [(p.name, p.type) for p in saxpy.params] == [
        ("n", "int"),
        ("a", "float"),
        ("x", "const float* __restrict__"),
        ("y", "float* __restrict__"),
    ]
    x, y = saxpy.params[2], saxpy.params[3]
    assert x.is_pointer and x.is_const and x.is_restrict and x.base_type == "float"
    assert not y.is_const and y.is_restrict
    assert rw(cf, "saxpy") == {"n": "r", "a": "r", "x": "r", "y": "rw"}
    assert rw(cf, "scale_inplace")["data"] == "rw"
    assert rw(cf, "fill")["out"] == "w"
    assert "grid_stride_loop" in features(cf, "saxpy") and "grid_stride_loop" in features(
        cf, "scale_inplace"
    )
    assert "grid_stride_loop" not in features(cf, "fill")
    launches = {ln.kernel: ln for ln in cf.launches}
    assert (launches["saxpy"].grid, launches["saxpy"].block) == ("blocks", "THREADS")
    assert launches["saxpy"].args == ["n", "2.0f", "d_x", "d_y"]
    assert (
        launches["fill"].grid == "(n + 255) / 256" and launches["fill"].enclosing_function == "main"
    )
    assert launches["fill"].shared_mem is None and launches["fill"].stream is None
    assert cf.defines["THREADS"] == "256" and cf.defines["CUDA_CHECK"].startswith("(call) do {")
    assert {"cudaMalloc", "cudaMemcpy", "cudaFree"} <= {f.name for f in cf.features}
    assert "cuda_runtime.h" in cf.includes


def test_templates_with_instantiations() -> None:
    cf = read("templated_reduce.cu")
    k = cf.kernel("block_sum")
    assert [(t.name, t.kind, t.default) for t in k.template_params] == [
        ("T", "typename", None),
        ("BLOCK", "int", "256"),
    ]
    assert k.instantiations == ["<float, 256>", "<double, 256>", "<__half, 128>"]
    assert k.launch_bounds == ["(BLOCK)"]
    assert rw(cf, "block_sum") == {"in": "r", "out": "w", "n": "r"}
    assert k.calls == ["warp_sum"]
    assert (
        k.shared[0].name == "partial"
        and k.shared[0].dims == ["BLOCK / 32"]
        and not k.shared[0].dynamic
    )
    assert [ln.template_args for ln in cf.launches] == [["T", "128"], ["T", "512"], ["T"]]
    assert [(ln.block, ln.shared_mem, ln.stream) for ln in cf.launches][0] == ("128", "0", "s")
    dev = cf.device_functions[0]
    assert dev.name == "warp_sum" and dev.kind == "device" and dev.template_params[0].name == "T"
    shfl = next(f for f in dev.features if f.name == "__shfl_down_sync")
    assert shfl.detail == "mask=0xffffffff" and shfl.line == 14


def test_kernels_defined_by_macros() -> None:
    cf = read("macro_kernels.cu")
    names = [k.name for k in cf.kernels]
    assert names == [
        "relu_kernel",
        "sigmoid_kernel",
        "square_kernel",
        "add_float",
        "add_int",
        "mul_float",
        "mul_int",
    ]
    relu = cf.kernel("relu_kernel")
    assert relu.macro == "DEFINE_UNARY_KERNEL" and relu.line == 19
    assert (
        cf.kernel("mul_int").macro == "DEFINE_BINARY_ALL_TYPES" and cf.kernel("mul_int").line == 33
    )
    assert [p.type for p in cf.kernel("add_int").params] == [
        "const int*",
        "const int*",
        "int*",
        "int",
    ]
    assert rw(cf, "add_float") == {"a": "r", "b": "r", "c": "w", "n": "r"}
    assert relu.calls == ["relu_f"]
    assert {d.name for d in cf.device_functions} == {"relu_f", "sigmoid_f"}
    assert [ln.kernel for ln in cf.launches] == ["relu_kernel", "sigmoid_kernel", "square_kernel"]
    assert cf.launches[0].line == 38
    # line numbers after the expansions are unchanged
    assert cf.launches[2].line == 40


def test_cooperative_groups() -> None:
    cf = read("coop_groups.cu")
    assert {"this_thread_block", "tiled_partition", "reduce", "__syncthreads"} <= features(
        cf, "row_sum"
    )
    rows = {a.feature: a for a in assess(cf.kernel("normalize_grid"))}
    assert rows["grid.sync"].needs_rewrite and "dispatch" in rows["grid.sync"].reason
    assert rw(cf, "normalize_grid")["scratch"] == "rw"
    half = {a.feature: a for a in assess(cf.kernel("half_warp_sum"))}
    assert half["tiled_partition(size=16)"].needs_rewrite
    assert not {a.feature: a for a in assess(cf.kernel("row_sum"))}[
        "tiled_partition(size=32)"
    ].needs_rewrite
    coop = next(ln for ln in cf.launches if ln.kernel == "normalize_grid")
    assert (
        coop.api == "cudaLaunchCooperativeKernel"
        and coop.grid == "dim3(80)"
        and coop.stream == "stream"
    )


def test_cub_and_dynamic_shared() -> None:
    cf = read("cub_blockreduce.cu")
    scan = cf.kernel("exclusive_scan_rows")
    dyn = [s for s in scan.shared if s.dynamic]
    assert [(s.name, s.type, s.dims) for s in dyn] == [("staging", "int", [""])]
    assert any(f.name == "cub::BlockScan" for f in scan.features)
    rows = assess(scan)
    assert any(r.feature.startswith("cub::") and r.needs_rewrite for r in rows)
    assert any(
        r.feature == "dynamic_shared" and r.needs_rewrite and "compile time" in r.reason
        for r in rows
    )
    launch = next(ln for ln in cf.launches if ln.kernel == "exclusive_scan_rows")
    assert (launch.grid, launch.block, launch.shared_mem, launch.stream) == (
        "rows",
        "256",
        "smem",
        "stream",
    )
    assert rw(cf, "row_max_cub") == {"in": "r", "row_max": "w", "cols": "r"}


def test_wmma() -> None:
    cf = read("wmma_gemm.cu")
    rows = assess(cf.kernel("wmma_gemm"))
    wmma = next(r for r in rows if r.feature.startswith("wmma::"))
    assert wmma.needs_rewrite and "simdgroup_matrix" in (wmma.metal or "")
    assert rw(cf, "wmma_gemm") == {"a": "r", "b": "r", "c": "w", "M": "r", "N": "r", "K": "r"}
    assert cf.launches[0].grid == "grid" and cf.launches[0].block == "block"


def test_ptx_printf_ldg() -> None:
    cf = read("ptx_printf_ldg.cu")
    gather = {a.feature: a for a in assess(cf.kernel("gather_debug"))}
    assert not gather["printf"].needs_rewrite and "dropped" in gather["printf"].metal
    assert not gather["__ldg"].needs_rewrite
    assert rw(cf, "gather_debug") == {"table": "r", "idx": "r", "out": "w", "n": "r", "rows": "r"}
    mma = cf.kernel("mma_m16n8k8")
    assert "mma_ptx" in features(cf, "mma_m16n8k8")
    assert {p.name: p.written for p in mma.params}["d"]  # reinterpret_cast<float4*>(d)[i] = ...
    assert any(f.name == "inline_ptx" for f in cf.device_functions[0].features)


def test_half2_and_vectors() -> None:
    cf = read("half2_gelu.cu")
    assert rw(cf, "gelu_half2")["y"] == "w"  # *reinterpret_cast<float4*>(y + i) = ...
    assert rw(cf, "scale_half2")["data"] == "rw"
    maps = {a.feature: a.metal for a in assess(cf.kernel("gelu_half2"))}
    assert maps["half2"] == "half2" and maps["float4"] == "float4"
    assert cf.kernel("gelu_half2").launch_bounds == ["(256, 2)"]
    bf = {a.feature: a for a in assess(cf.kernel("gelu_bf16"))}
    assert bf["__nv_bfloat16"].metal == "bfloat"


def test_atomics() -> None:
    cf = read("histogram_atomics.cu")
    hist = cf.kernel("histogram")
    assert hist.shared[0].bytes == 1024 and hist.shared[0].dims == ["NUM_BINS"]
    assert rw(cf, "histogram")["bins"] == "w"
    counts = rw(cf, "count_and_max")
    assert counts["count"] == "w" and counts["maxbits"] == "w" and counts["total"] == "rw"
    fsum = {a.feature: a for a in assess(cf.kernel("float_sum"))}
    assert "atomic<float>" in (fsum["atomicAdd(float)"].metal or "")
    cas = {a.feature: a for a in assess(cf.device_functions[0])}
    assert cas["atomicCAS(unsigned long long)"].needs_rewrite
    assert not {a.feature: a for a in assess(hist)}["atomicAdd(unsigned int)"].needs_rewrite


def test_softmax_dynamic_smem_and_launch_api() -> None:
    cf = read("softmax_dynamic_smem.cu")
    # y written through the alias yr
    assert rw(cf, "softmax_rows") == {"x": "r", "y": "w", "cols": "r"}
    assert rw(cf, "layernorm") == {
        "x": "r",
        "gamma": "r",
        "beta": "r",
        "y": "w",
        "cols": "r",
        "eps": "r",
    }
    api = next(ln for ln in cf.launches if ln.kernel == "layernorm")
    assert api.api == "cudaLaunchKernel" and api.grid == "dim3(rows)" and api.stream == "nullptr"
    sm = next(ln for ln in cf.launches if ln.kernel == "softmax_rows")
    assert sm.shared_mem == "smem" and sm.enclosing_function == "launch_softmax"
    warp_max = next(d for d in cf.device_functions if d.name == "warp_max")
    assert any(f.detail == "mask=FULL_MASK" for f in warp_max.features)


def test_stencil_constant_memory_and_interprocedural_writes() -> None:
    cf = read("stencil_constant.cu")
    assert rw(cf, "stencil2d") == {"in": "r", "out": "w", "w": "r", "h": "r"}
    k = cf.kernel("stencil2d")
    assert k.calls == ["load_or_zero", "store_clamped"]
    assert (
        k.shared[0].dims == ["TILE + 2 * RADIUS", "TILE + 2 * RADIUS"]
        and k.shared[0].bytes == 18 * 18 * 4
    )
    assert {"constant_memory", "device_global"} <= features(cf, "stencil2d")
    assert {(g.name, g.space) for g in cf.globals} == {
        ("c_coef", "constant"),
        ("d_error_flag", "device"),
    }
    assert cf.launches[0].grid == "grid" and cf.launches[0].block == "block"


def test_namespaces_extern_c_and_conditionals() -> None:
    cf = read("transpose_namespaces.cu")
    names = [k.name for k in cf.kernels]
    assert "disabled_kernel" not in names
    assert names.count("axpy_t") == 1 and cf.kernel("axpy_t").params[0].type == "float"
    assert cf.kernel("transpose").namespace == "ops"
    assert rw(cf, "copy_rows") == {"src": "r", "dst": "w", "cols": "r"}  # through the alias `d`
    assert rw(cf, "transpose")["odata"] == "w"
    assert [ln.kernel for ln in cf.launches] == ["transpose", "map_kernel", "copy_rows"]
    assert cf.launches[0].block == "dim3(ops::detail::TILE_DIM, ops::detail::BLOCK_ROWS)"


def test_suite_style_specialization_and_align() -> None:
    src = """template <typename T>
__global__ void k(const T* x, T* out, int n) {
  struct __align__(8) Pack { T v[4]; };
  Pack* o = reinterpret_cast<Pack*>(out);
  o[threadIdx.x] = reinterpret_cast<const Pack*>(x)[threadIdx.x];
}
template <>
__global__ void k<float>(const float* x, float* out, int n) { out[threadIdx.x] = x[threadIdx.x]; }
"""
    cf = read_cuda(src)
    assert not cf.warnings
    assert [(k.name, k.specialization) for k in cf.kernels] == [("k", None), ("k", "<float>")]
    assert [rw(cf, "k")] == [{"x": "r", "out": "w", "n": ""}]


def test_inline_source_and_summary() -> None:
    src = "__global__ void k(float* o, const float* i) { o[threadIdx.x] = expf(i[threadIdx.x]); }\n"
    cf = read_cuda(src, name="k.cu")
    assert cf.path == "k.cu" and rw(cf, "k") == {"o": "w", "i": "r"}
    text = summary(cf)
    assert "o: float* [w]" in text and "expf->metal::exp" in text
    assert json.loads(cf.model_dump_json())["kernels"][0]["name"] == "k"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 8, "binary"),
        ("int main() { return 0; }\n", "has no __global__ kernel"),
        (
            "def f(x):\n    return [x for x in range(3)] if x else {'a': (1, 2)}\n" * 20,
            "no __global__ kernel",
        ),
        ("", "empty"),
        ("__global__ void k(float* a) {\n  a[0] = 1;\n  if (a[1] > 0) {\n", "not closed"),
        ("__global__ void k(float* a, ) { a[0] = 1; }\n", "parse error at line 1"),
        ("#define A(x) B(x)\n#define B(x) A(x) __global__\nA(1)\n", "nested deeper"),
        ("#define K(n) __global__ void n() {}\nK(foo\n", "not closed"),
    ],
)
def test_malformed_inputs(source: str | bytes, message: str) -> None:
    with pytest.raises(CudaReadError, match=message):
        read_cuda(source, name="bad.cu")


def test_size_limits(tmp_path: Path) -> None:
    big = "// padding\n" * (10 * 1024 * 1024 // 11 + 1) + "__global__ void k() {}\n"
    with pytest.raises(CudaReadError, match=r"input is 10\.\d MB; the reader accepts up to 4 MB"):
        read_cuda(big)
    path = tmp_path / "big.cu"
    path.write_text(big)
    with pytest.raises(CudaReadError, match="big.cu: input is"):
        read_cuda(path)
    with pytest.raises(CudaReadError, match="does not exist"):
        read_cuda(tmp_path / "missing.cu")


def test_host_errors_are_tolerated() -> None:
    src = (
        "__global__ void k(float* a) { a[threadIdx.x] = 0; }\n"
        "void host() { SOME_UNKNOWN_MACRO(a b c) ; k<<<1, 32>>>(p); }\n"
    )
    cf = read_cuda(src)
    assert cf.kernels[0].name == "k" and cf.launches[0].kernel == "k"


def test_writes_through_overloads_and_qualified_template_helpers() -> None:
    cf = read_cuda(
        """
namespace mem {
template <int N> __device__ void put(void* dst, const void* src);
template <> __device__ void put<16>(void* dst, const void* src) {
    ((float*)dst)[0] = ((const float*)src)[0];
}
}
namespace pw { constexpr int width = 16; }
__device__ void fill(float* a, int n) { a[0] = n; }
__device__ void fill(int n, float* a, float* b) { b[0] = a[0] + n; }
__global__ void k(float* out, float* both, const float* in) {
    mem::put<pw::width>(out, in);
    fill(2, in, both);
}
""",
        name="overloads.cu",
    )
    # ns::put<pw::width> is put, not `width>`; fill is the overload of three parameters
    assert rw(cf, "k")["out"] == "w" and rw(cf, "k")["both"] == "w"


def test_a_read_is_remembered_by_its_whole_text_and_name(tmp_path: Path) -> None:
    """A port reads one source many times: the second read of the same text is the first's
    result again, a copy the caller may change; a changed header or another name is a new read."""
    header = tmp_path / "scale.cuh"
    header.write_text("#define SCALE 2\n")
    cu = tmp_path / "k.cu"
    cu.write_text('#include "scale.cuh"\n__global__ void k(float* a) { a[0] = SCALE; }\n')
    first = read_cuda(cu)
    first.kernels[0].name = "changed"
    first.defines["SCALE"] = "9"
    again = read_cuda(cu)
    assert again.kernels[0].name == "k" and again.defines["SCALE"] == "2"
    header.write_text("#define SCALE 3\n")
    assert read_cuda(cu).defines["SCALE"] == "3"
    assert read_cuda(cu.read_text(), name="other.cu").path == "other.cu"
