"""A user's own .cu file, ported as it is: `mlxport port FILE.cu --case ...` builds a task whose
golden is the original kernel run on the CPU executor, the rules policy ports it on the simulator,
and bad input ends in one sentence."""

import shutil
import tomllib
from pathlib import Path

import pytest

from mlxport.backends import get_backend
from mlxport.errors import UserError
from mlxport.tasks import load_task
from mlxport.tasks.make import TaskRequest, from_cuda, write_task
from mlxport.translate.translator import translate_task
from mlxport.verify.correctness import run_correctness

EXAMPLES = Path(__file__).parent / "cuda_exec"


def built_task(path, *, heldout=3, **fields):
    return from_cuda(TaskRequest(source=path, **fields), heldout=heldout)


def _port(cli, tmp_path, name, *args):
    result = cli(
        "port",
        str(EXAMPLES / name),
        *args,
        "--backend",
        "sim",
        "--out",
        str(tmp_path / "out"),
        env={"MLXPORT_TEST": "1"},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def test_a_cooperative_groups_kernel_in_a_file_with_a_local_header_ports_and_its_test_passes(
    tmp_path, cli, written_tests
):
    result = _port(cli, tmp_path, "layernorm_main.cu", "--case", "B=2,T=16,C=96,block_size=128")
    assert "verified on sim" in result.stdout
    folder = tmp_path / "out" / "layernorm_rows"
    report = (folder / "report.md").read_text()
    assert "against the original kernel layernorm_rows run as written on the CPU executor" in report
    notes = (tmp_path / "out" / "_tasks" / "layernorm_rows" / "NOTES.md").read_text()
    assert "common_test.h inlined" in notes
    task = tomllib.loads((folder / "task" / "task.toml").read_text())
    # mean and rstd hold B*T rows: the port sizes them from inp (B*T*C) and the param C
    assert {o["name"]: o["shape"] for o in task["outputs"]}["mean"] == ["B", "T"]
    tests = written_tests(
        "-q",
        "-p",
        "no:cacheprovider",
        "--import-mode=importlib",
        folder / "test_kernel.py",
        timeout=600,
    )
    assert tests.returncode == 0, tests.stdout[-3000:]


def test_the_samples_shared_memory_struct_file_constants_and_host_headers_port(tmp_path, cli):
    """block_sum.cu: SharedMemory<T>, a launcher template sizing shared memory with sizeof(T), a
    static const block size, <fstream> and <sys/time.h> (dropped), and a helper using
    cuda::barrier (which the executor provides)."""
    result = _port(cli, tmp_path, "block_sum.cu", "--case", "n=1000")
    assert "verified on sim" in result.stdout
    task = tomllib.loads((tmp_path / "out" / "_tasks" / "block_sum" / "task.toml").read_text())
    assert [i["name"] for i in task["inputs"]] == ["in_"]  # `in` is a Python keyword
    assert task["outputs"][0]["shape"] == ["((n + 128 - 1) // 128)"]
    assert task["original"]["launches"][0]["shared_bytes"] == 128 * 4
    notes = (tmp_path / "out" / "_tasks" / "block_sum" / "NOTES.md").read_text()
    assert "dropped #include <fstream>" in notes and "<cuda/barrier>" not in notes


def test_an_output_read_back_after_its_writes_is_an_output_sized_by_the_params(tmp_path):
    built = built_task(
        EXAMPLES / "softmax_readback.cu", kernel=None, cases=[{"N": 100, "C": 33}], heldout=2
    )
    # not an in-out pair: its first contents are moot
    assert [o["name"] for o in built.task["outputs"]] == ["out"]
    assert built.task["outputs"][0]["shape"] == built.task["inputs"][0]["shape"] == ["N", "C"]
    # odd sizes in other ratios: C moves by its own factor (1.25), N by 1
    assert built.task["cases"]["heldout"] == [{"N": 200, "C": 66}, {"N": 101, "C": 43}]
    task = load_task(write_task(built, tmp_path / "softmax", EXAMPLES / "softmax_readback.cu"))
    report = run_correctness(
        task, translate_task(task, "msl").candidate, get_backend("sim"), heldout=True
    )
    assert report.ok and report.golden.startswith("the original kernel"), report.summary()


def test_a_buffer_the_kernel_never_reads_is_not_sized_by_a_float_param_equal_to_its_extent(
    tmp_path,
):
    # llama.cpp's rope: freq_factors unused at this case (extent 1), freq_scale = 1.0.
    src = tmp_path / "scaled.cu"
    src.write_text(
        "__global__ void scaled(float* out, const float* x, const float* unused, float s, "
        "int N) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < N) out[i] = s * x[i];\n}\n"
        "void launch(float* out, const float* x, const float* unused, float s, int N) {\n"
        "  scaled<<<(N + 63) / 64, 64>>>(out, x, unused, s, N);\n}\n"
    )
    built = built_task(src, kernel=None, cases=[{"N": 100, "s": 1.0}], heldout=0)
    unused = next(t for t in built.task["inputs"] if t["name"] == "unused")
    assert unused["shape"] != ["s"], unused


def test_an_output_written_only_in_part_is_nan_where_the_original_leaves_it(tmp_path):
    built = built_task(EXAMPLES / "causal_scale.cu", kernel=None, cases=[{"T": 48}], heldout=1)
    assert built.task["outputs"][0]["init"]["kind"] == "full"
    assert any("writes 1176 of the 2304 elements of out" in n for n in built.notes)
    task = load_task(write_task(built, tmp_path / "causal", EXAMPLES / "causal_scale.cu"))
    candidate = translate_task(task, "msl").candidate
    # NaN: unwritten elements match the golden's
    assert candidate.init_value != candidate.init_value
    assert run_correctness(task, candidate, get_backend("sim"), heldout=True).ok
    # a port that also writes the upper triangle does not match the original
    wrong = candidate.model_copy(update={"source": candidate.source.replace("if (j <= i)", "")})
    assert (
        "if (j <= i)" in candidate.source
        and not run_correctness(task, wrong, get_backend("sim")).ok
    )


def test_a_launch_through_a_function_pointer_is_read_off_the_recorded_launches(tmp_path):
    built = built_task(
        EXAMPLES / "scale_pointer.cu",
        kernel="scale_rows",
        cases=[{"rows": 64, "cols": 100}],
        heldout=2,
    )
    # the visible case, one at twice its sizes (the block stops at 128) and one with odd sizes
    assert [launch["block"] for launch in built.task["original"]["launches"]] == [
        [100, 1, 1],
        [128, 1, 1],
        [127, 1, 1],
    ]
    task = load_task(write_task(built, tmp_path / "scale", EXAMPLES / "scale_pointer.cu"))
    translation = translate_task(task, "msl")
    assert any(
        "launch read off the original's launches at the task's 3 cases" in n
        for n in translation.notes
    )
    # std::min(cols, 128): the cols param
    assert translation.candidate.threadgroup == ["BLOCK_DIM_X", 1, 1]
    assert run_correctness(task, translation.candidate, get_backend("sim"), heldout=True).ok


def test_tasks_new_from_a_file_then_check_runs_the_original_twice_at_every_case(tmp_path, cli):
    made = cli(
        "tasks",
        "new",
        "mine",
        "--from",
        str(EXAMPLES / "softmax_readback.cu"),
        "--case",
        "N=64,C=40",
        "--dir",
        str(tmp_path),
    )
    assert made.returncode == 0, made.stderr
    checked = cli("tasks", "check", str(tmp_path / "mine"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "original, run twice" in checked.stdout and "4 of 4 checks passed" in checked.stdout


def test_a_task_made_with_include_folders_carries_the_headers_it_reads_and_nothing_else(
    tmp_path, cli
):
    """The header's macro (a grid-stride loop) is what the kernel is: an -I folder given relative
    to the user's folder is found, not dropped (which left a kernel that wrote nothing)."""
    lib = tmp_path / "repo" / "include"
    (lib / "proj").mkdir(parents=True)
    (lib / "proj" / "scale.cuh").write_text(
        '#pragma once\n#include "detail.cuh"\n'
        "__device__ inline float scale(float x) { return twice(x) + 1.0f; }\n"
        "#define EACH(i, n) \\\n  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); \\\n"
        "       i += blockDim.x * gridDim.x)\n"
    )
    (lib / "proj" / "detail.cuh").write_text(
        "#pragma once\n__device__ inline float twice(float x) { return 2 * x; }\n"
    )
    (lib / "proj" / "unused.cuh").write_text("#error never read\n")
    src = tmp_path / "repo" / "src"
    src.mkdir()
    (src / "k.cu").write_text(
        "#include <proj/scale.cuh>\n__global__ void k(const float* x, float* y, int n) {\n"
        "  EACH(i, n) { y[i] = scale(x[i]); }\n}\n"
        "void run(const float* x, float* y, int n) { k<<<(n + 127) / 128, 128>>>(x, y, n); }\n"
    )
    made = cli(
        "tasks",
        "new",
        "mine",
        "--from",
        str(src / "k.cu"),
        "-I",
        "include",  # relative to where the user is, not where the preprocessor runs
        "--case",
        "n=300",
        "--dir",
        str(tmp_path / "tasks"),
        cwd=lib.parent,
    )
    assert made.returncode == 0, made.stderr
    folder = tmp_path / "tasks" / "mine"
    assert sorted(
        p.relative_to(folder).as_posix() for p in (folder / "include").rglob("*.cuh")
    ) == ["include/proj/detail.cuh", "include/proj/scale.cuh"]
    assert tomllib.loads((folder / "task.toml").read_text())["original"]["include"] == ["include"]
    shutil.rmtree(tmp_path / "repo")  # the task reads nothing outside its folder
    checked = cli("tasks", "check", str(folder))
    assert checked.returncode == 0 and "checks passed" in checked.stdout, (
        checked.stdout + checked.stderr
    )


@pytest.mark.parametrize(
    ("file", "args", "fragment"),
    [
        (
            "layernorm_main.cu",
            ["--kernel", "nope", "--case", "B=2,T=16,C=96,block_size=128"],
            "its kernels are layernorm_rows: pass one of them with --kernel",
        ),
        ("layernorm_main.cu", [], "block_size is a parameter of layernorm_forward(); bind it"),
        (
            "layernorm_main.cu",
            ["--case", "B=2,T=16,C=96"],
            "block_size is a parameter of layernorm_forward()",
        ),
        (
            "layernorm_main.cu",
            ["--case", "B=2,T=16,C=96,block_size=128", "--dtypes", "float16"],
            "is not templated on its element type",
        ),
        (
            "softmax_readback.cu",
            ["--case", "N=100"],
            "C is a parameter of softmax(); bind C with --case",
        ),
        (
            "softmax_readback.cu",
            ["--case", "N=100,C=33", "--shape", "out=N"],
            "--shape out=N is too small",
        ),
        (
            "device_count.cu",
            ["--kernel", "scale", "--case", "N=1024"],
            "n is copied back from device memory at line 16, "
            "so it is known only when the program runs; bind it with --case or pass --grid",
        ),
    ],
)
def test_bad_input_for_a_file_ends_in_one_sentence(tmp_path, cli, file, args, fragment):
    result = cli(
        "port", str(EXAMPLES / file), *args, "--backend", "sim", "--out", str(tmp_path / "out")
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert fragment in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (tmp_path / "out").exists()  # nothing written half-way


def test_tasks_new_says_what_it_needs_and_makes_the_folder_it_is_given(tmp_path, cli):
    bare = cli(
        "tasks",
        "new",
        "ln",
        "--from",
        str(EXAMPLES / "layernorm_main.cu"),
        "--dir",
        str(tmp_path / "a"),
    )
    assert bare.returncode == 2 and "Traceback" not in bare.stderr
    # no such option
    assert "block_size is a parameter of layernorm_forward(); bind it with --case" in bare.stderr
    assert "--task" not in bare.stderr
    made = cli("tasks", "new", "mine", "--dir", str(tmp_path / "not" / "yet"))
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "not" / "yet" / "mine" / "task.toml").is_file()


def test_a_torch_extension_with_a_struct_by_value_and_default_arguments_runs_as_the_golden(
    tmp_path, cli
):
    """torch_rows.cu: c10::Half, at::acc_type and WARP_SHFL_XOR in device code, a volatile shared
    array, a struct the host fills at run time (passed as zero bytes, and said so), a default
    argument the launch leaves out, a NULL default pointer in a helper, a block from a
    helper's loop."""
    made = cli(
        "tasks",
        "new",
        "rows",
        "--from",
        str(EXAMPLES / "torch_rows.cu"),
        "--case",
        "nrows=8,ncols=100,eps=1e-5",
        "--dtypes",
        "float32,float16",
        "--dir",
        str(tmp_path),
    )
    assert made.returncode == 0, made.stdout + made.stderr
    task = tomllib.loads((tmp_path / "rows" / "task.toml").read_text())
    assert task["original"]["zeroed"] == {"scale": 8}
    # next_power_of_2(100), its while loop run
    assert task["original"]["launches"][0]["block"] == [128, 1, 1]
    assert [p["name"] for p in task["params"]] == ["ncols", "eps", "stride"] and task["params"][2][
        "default"
    ] == 1
    notes = (tmp_path / "rows" / "NOTES.md").read_text()
    assert "scale (const row_scale, 8 bytes) is a struct passed by value" in notes
    checked = cli("tasks", "check", str(tmp_path / "rows"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "original, run twice" in checked.stdout


def test_integer_counters_updated_in_place_port(tmp_path, cli):
    """scale_tracker.cu: int in-out buffers, which the port's outputs start as
    NaN's integer form."""
    result = _port(
        cli,
        tmp_path,
        "scale_tracker.cu",
        "--case",
        "growth_factor=2.0,backoff_factor=0.5,growth_interval=2000",
        "--shape",
        "scale=1",
        "--shape",
        "growth_tracker=1",
        "--shape",
        "found_inf=1",
    )
    assert "verified on sim" in result.stdout
    task = tomllib.loads((tmp_path / "out" / "_tasks" / "update_scale" / "task.toml").read_text())
    assert {o["name"]: o["dtype"] for o in task["outputs"]} == {
        "scale_out": "float32",
        "growth_tracker_out": "int32",
    }


def test_an_atomic_kernels_plain_uses_of_its_outputs_become_atomic_loads_and_stores(tmp_path, cli):
    """embed_backward.cu: atomicAdd through a pointer into an output, an output stored then scaled
    in place (MLX makes every output atomic once one is), rows the atomics never touch
    left at zero."""
    result = _port(
        cli,
        tmp_path,
        "embed_backward.cu",
        "--case",
        "B=2,T=8,C=32",
        "--shape",
        "dwte=4*C",
        "--shape",
        "dwpe=T*C",
    )
    assert "verified on sim" in result.stdout
    source = (tmp_path / "out" / "embed_backward" / "candidate.toml").read_text()
    assert "device atomic<float>* dwte_ix = dwte" in source
    assert (
        "atomic_store_explicit(&dwpe[t * C + c], atomic_load_explicit(&dwpe[t * C + c], "
        "memory_order_relaxed) * (2.0f), memory_order_relaxed)" in source
    )
    notes = (tmp_path / "out" / "_tasks" / "embed_backward" / "NOTES.md").read_text()
    assert "the rest keep the zeros it starts as" in notes


def test_a_pointer_into_an_in_out_buffer_reads_its_input_and_writes_its_output(tmp_path, cli):
    result = _port(
        cli,
        tmp_path,
        "accumulate_rows.cu",
        "--case",
        "N=6,V=50",
        "--shape",
        "dlogits=N*V",
        "--shape",
        "dloss=N",
    )
    assert "verified on sim" in result.stdout
    source = (tmp_path / "out" / "accumulate_rows" / "candidate.toml").read_text()
    assert (
        "auto dlogits_row = dlogits + row * V; "
        "device float* dlogits_row_out = dlogits_out + row * V;" in source
    )


def test_buffers_taken_as_vectors_are_read_and_written_through_vector_views(tmp_path, cli):
    result = _port(
        cli,
        tmp_path,
        "complex_scale.cu",
        "--case",
        "n=300",
        "--shape",
        "z=2*n",
        "--shape",
        "w=2*n",
        "--shape",
        "out=2*n",
    )
    assert "verified on sim" in result.stdout
    source = (tmp_path / "out" / "complex_scale" / "candidate.toml").read_text()
    assert "auto mlxport_view_w = mlxport_ptr_cast<half2>(w);" in source


NEIGHBOURS = r"""
#include <cstdio>
#define CHECK(call) do { const cudaError_t e = call; if (e != cudaSuccess) exit(1); } while (0)
const int MN = 2;
__global__ void neighbours(const float* x, int* count, int* list, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    for (int j = 0; j < n; j++)
        if (j != i && fabsf(x[i] - x[j]) < 0.5f) list[i * MN + atomicAdd(&count[i], 1)] = j;
}
int main() {
    int n = 64;
    float* x; int *count, *list;
    CHECK(cudaMalloc(&x, sizeof(float) * n));
    CHECK(cudaMalloc(&count, sizeof(int) * n));
    CHECK(cudaMemset(count, 0, sizeof(int) * n));
    int bytes = sizeof(int) * n * MN;
    CHECK(cudaMalloc(&list, bytes));
    neighbours<<<(n + 63) / 64, 64>>>(x, count, list, n);
}
"""


def test_an_overrun_of_a_buffer_the_host_sizes_names_its_size_and_the_flag(tmp_path):
    """At most MN neighbours an element holds for the program's data, not for random inputs:
    the list the host sizes `n * MN` (in a local, through a do-while(0) CHECK) is overrun, and
    the sentence names that size and --shape."""
    src = tmp_path / "neighbours.cu"
    src.write_text(NEIGHBOURS)
    with pytest.raises(UserError, match=r"sizes list as n \* 2 elements.*--shape list=EXPR"):
        built_task(src, kernel="neighbours", cases=[{"n": 64}], heldout=0)


def test_a_pointer_through_a_template_type_names_the_declaration_to_write(tmp_path):
    """llm-awq's quant_kernel takes `scale_type scale` with scale_type = at::Half *: read as a
    scalar, it would lose the scales the kernel writes; the sentence says what to declare."""
    src = tmp_path / "quant.cu"
    src.write_text(
        "template <typename T, typename S>\n"
        "__global__ void quant(const T* x, S scale, int n) { if (threadIdx.x == 0) "
        "scale[blockIdx.x] = x[0]; }\n"
        "void run(const float* x, float* s, int n) { quant<float, float*><<<n, 32>>>(x, s, n); }\n"
    )
    with pytest.raises(UserError, match=r"scale of quant is a pointer through its template type"):
        built_task(src, kernel="quant", cases=[{"n": 4}], template="T=float,S=float *", heldout=0)


def test_the_check_run_draws_integer_inputs_from_their_given_values(tmp_path):
    """cuda-samples' filter_arr writes only where `src[i] > 0`: with zeros (the default for
    integers) it writes nothing; --inputs 'src:int32[1,5)' is what the check run draws."""
    src = tmp_path / "keep.cu"
    src.write_text(
        "__global__ void keep(const int* flag, float* out, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < n && flag[i] > 0) out[i] = 1.0f;\n}\n"
        "void run(const int* f, float* o, int n) { keep<<<(n + 63) / 64, 64>>>(f, o, n); }\n"
    )
    fields = {"kernel": "keep", "cases": [{"n": 100}], "shapes": {"flag": "n", "out": "n"}}
    with pytest.raises(UserError, match="writes none"):
        built_task(src, heldout=0, **fields)
    built = built_task(src, heldout=0, inputs="flag:int32[1,5)", **fields)
    assert [t["shape"] for t in built.task["outputs"]] == [["n"]]
