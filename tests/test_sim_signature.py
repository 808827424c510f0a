"""The source MLX generates for metal_kernel (reference/mlx-custom-kernels.md section 2.1)."""

from __future__ import annotations

from mlxport.backends.sim.rewrite import rewrite_msl
from mlxport.backends.sim.signature import build_signature, mlx_source, sim_source
from mlxport.expr import ArrayInfo, Dtype
from mlxport.spec import KernelCandidate


def cand(
    source: str, inputs=("x",), outputs=("y",), dtypes=("x.dtype",), **extra
) -> KernelCandidate:
    return KernelCandidate(
        name=extra.pop("name", "k"),
        source=source,
        input_names=list(inputs),
        output_names=list(outputs),
        output_shapes=["x.shape"] * len(outputs),
        output_dtypes=list(dtypes),
        grid=["x.size", 1, 1],
        threadgroup=[256, 1, 1],
        **extra,
    )


def arr(*shape: int, dtype: str = "float32") -> ArrayInfo:
    return ArrayInfo(tuple(shape), Dtype(dtype))


def test_reference_worked_example():
    body = (
        "uint i = thread_position_in_grid.x;\n"
        "y[i] = x[elem_to_loc(i, x_shape, x_strides, x_ndim)] * s;"
    )
    c = cand(
        body,
        inputs=("x", "s"),
        template={"T": "float32", "N": 8, "B": "True"},
        ensure_row_contiguous=False,
    )
    text = mlx_source(c, {"x": arr(64, dtype="float16"), "s": 1.5})
    name = "custom_kernel_k__float_8_1_float16_t_floats_float16_t"
    assert text == (
        "template <typename T, int N, bool B>\n"
        f"[[kernel]] void {name}(\n"
        "  const device float16_t* x [[buffer(0)]],\n"
        "  const constant int* x_shape [[buffer(1)]],\n"
        "  const constant int64_t* x_strides [[buffer(2)]],\n"
        "  const constant int& x_ndim [[buffer(3)]],\n"
        "  const constant float& s [[buffer(4)]],\n"
        "  device float16_t* y [[buffer(5)]],\n"
        "  uint3 thread_position_in_grid [[thread_position_in_grid]]) {\n"
        f"{body}\n}}\n"
        f'\ntemplate [[host_name("{name}")]] [[kernel]] decltype({name}<float, 8, 1>) '
        f"{name}<float, 8, 1>;\n"
    )


def test_vector_add_no_template():
    c = cand(
        "uint i = thread_position_in_grid.x;\ny[i] = a[i] + b[i];",
        inputs=("a", "b"),
        dtypes=("a.dtype",),
    )
    c = c.model_copy(update={"output_shapes": ["a.shape"], "grid": ["a.size", 1, 1]})
    text = mlx_source(c, {"a": arr(100), "b": arr(100)})
    assert text.startswith(
        "[[kernel]] void custom_kernel_k_float_float_float(\n"
        "  const device float* a [[buffer(0)]],\n  const device float* b [[buffer(1)]],\n"
        "  device float* y [[buffer(2)]],\n"
        "  uint3 thread_position_in_grid [[thread_position_in_grid]]) {\n"
    )
    assert text.endswith("\n}\n") and "template" not in text


def test_small_and_scalar_inputs_and_suffixes():
    c = cand("y[0] = x[0] + w[0] + n;", inputs=("x", "w", "n"))
    sig = build_signature(c, {"x": arr(8), "w": arr(7, dtype="int32"), "n": 3})
    assert sig.kernel_name == "custom_kernel_k_float_int32_tc_int32_ts_float"
    text = mlx_source(c, {"x": arr(8), "w": arr(7, dtype="int32"), "n": 3})
    assert "  const device float* x [[buffer(0)]],\n" in text
    assert "  const constant int32_t* w [[buffer(1)]],\n" in text
    assert "  const constant int32_t& n [[buffer(2)]],\n" in text
    # no attribute: the outputs close the list
    assert "  device float* y [[buffer(3)]]) {\n" in text


def test_shape_params_only_when_named_and_not_for_scalars():
    c = cand("y[0] = x_ndim + s;", inputs=("x", "s"))
    text = mlx_source(c, {"x": arr(4, 4), "s": 2.0})
    assert "x_ndim [[buffer(1)]]" in text and "x_shape" not in text and "x_strides" not in text
    assert "s_shape" not in text


def test_attributes_in_mlx_order_by_substring():
    body = (
        "// dispatch_threads_per_threadgroup\n"
        "uint a = simdgroup_index_in_threadgroup + grid_size.x;"
    )
    text = mlx_source(cand(body), {"x": arr(64)})
    attrs = [ln.split()[1] for ln in text.splitlines() if ln.startswith("  uint")]
    assert attrs == [
        "dispatch_threads_per_threadgroup",
        "grid_size",
        "simdgroup_index_in_threadgroup",
        "threads_per_threadgroup",
    ]
    assert "  uint simdgroup_index_in_threadgroup [[simdgroup_index_in_threadgroup]],\n" in text
    assert "  uint3 threads_per_threadgroup [[threads_per_threadgroup]]) {\n" in text


def test_atomic_outputs_and_header():
    c = cand(
        "atomic_fetch_add_explicit(&y[0], 1.0f, memory_order_relaxed);",
        header="#define K 2\n",
        atomic_outputs=True,
        dtypes=("float32",),
    )
    text = mlx_source(c, {"x": arr(64)})
    assert text.startswith("#define K 2\n[[kernel]] void")
    assert "  device atomic<float>* y [[buffer(1)]]) {\n" in text


def test_mlx_closes_the_list_early_with_shape_params_and_two_outputs():
    c = cand("y[0] = x_shape[0]; z[0] = 0;", outputs=("y", "z"), dtypes=("x.dtype", "x.dtype"))
    text = mlx_source(c, {"x": arr(64)})
    assert "  device float* y [[buffer(2)]]) {\n  device float* z [[buffer(3)]]) {\n" in text


def test_bool_and_negative_free_template_values():
    c = cand("y[0] = 0;", template={"F": "False", "M": 0, "T": "bfloat16"})
    sig = build_signature(c, {"x": arr(64)})
    assert sig.kernel_name == "custom_kernel_k__0_0_bfloat16_t_float_float"


def test_sim_source_maps_lines_and_checks_pointers():
    c = cand(
        "uint i = thread_position_in_grid.x;\ny[i] = x[i];",
        header="inline float f(float v) { return v; }",
    )
    src = sim_source(c, {"x": arr(64)})
    assert '#line 1 "source"\nuint i' in src.text and '#line 1 "header"\ninline float f' in src.text
    assert "::mlxsim::Ptr<const float, ::mlxsim::AS_DEVICE> x" in src.text
    assert not src.needs_fibers


def test_rewrite_address_spaces():
    text = (
        "const device float4* v = (const device float4*)x;\n"
        "threadgroup float tile[TM][TN + 1], row[4];\n"
        "threadgroup atomic_uint count;\n"
        "thread float& r = acc;\n"
        "device half* o = reinterpret_cast<device half*>(out);\n"
        "float h = 1.5h;\n"
    )
    out = rewrite_msl(text).text
    lines = out.splitlines()
    assert lines[0] == (
        "::mlxsim::Ptr<const float4, ::mlxsim::AS_DEVICE> v = "
        "(::mlxsim::Ptr<const float4, ::mlxsim::AS_DEVICE>)x;"
    )
    assert lines[1] == (
        'auto tile = ::mlxsim::tg_array<float, (TM), (TN + 1)>(0, "tile"); '
        'auto row = ::mlxsim::tg_array<float, (4)>(1, "row");'
    )
    assert lines[2] == 'auto& count = *::mlxsim::tg_scalar<atomic_uint>(2, "count");'
    assert lines[3] == " float& r = acc;"
    assert lines[4].startswith("::mlxsim::Ptr<half, ::mlxsim::AS_DEVICE> o = static_cast<")
    assert lines[5] == "float h = half(1.5);"
    assert len(lines) == 6


def test_rewrite_keeps_line_count_and_maps_columns():
    text = "const device\n  float* p = x;\nint q = nope;\n"
    rw = rewrite_msl(text)
    assert rw.text.count("\n") == text.count("\n")
    assert rw.original_position(3, 9) == (3, 9)
    assert rw.original_position(1, 5) == (1, 1)


def test_sync_detection():
    assert rewrite_msl("float s = simd_sum(v);").sync
    assert rewrite_msl("threadgroup_barrier(mem_flags::mem_threadgroup);").sync
    assert not rewrite_msl("uint s = simdgroup_index_in_threadgroup;").sync
