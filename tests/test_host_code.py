"""Host code followed at a case without running it: helpers with loops, dim3 fields set in the
branch the case takes, type aliases of dispatch macros, casts to a launcher's template type."""

import pytest

from mlxport.translate.host.evaluate import evaluate_launch
from mlxport.translate.host.values import HostEvalError

KERNEL = "__global__ void k(const float* x, float* y, float eps, int n) {}\n"


def _launch(host: str, **case):
    return evaluate_launch(KERNEL + host, "k", case)


def test_a_helper_with_a_loop_is_run_at_the_case():
    launch = _launch(
        """
static int next_power_of_2(int x) {
    int n = 1;
    while (n < x) {
        n *= 2;
    }
    return n;
}
static int log2_ceil(int v) { int l = 0; for (; (1 << l) < v; ++l) {} return l; }
void run(const float* x, float* y, int ncols, int nrows) {
    const int pad = next_power_of_2(ncols);
    const dim3 block_dims(pad, 1, 1);
    k<<<nrows, block_dims, pad * sizeof(int)>>>(x, y, 0.5f, 1 << log2_ceil(ncols));
}""",
        ncols=200,
        nrows=64,
    )
    assert launch.block == (256, 1, 1)
    assert launch.grid == (64, 1, 1)
    assert launch.shared_bytes == 1024
    assert launch.args[3].value == 256


def test_math_outside_its_domain_gives_what_c_gives():
    launch = _launch(
        """
void run(const float* x, float* y, int n) {
    k<<<1, 32>>>(x, y, floorf(log2f((float)n)) + sqrtf(-1.0f) * 0, n);
}""",
        n=0,
    )
    # log2f(0) is -inf in C, where Python's math raises; NaN * 0 is NaN
    assert str(launch.args[2].value) == "nan"
    launch = _launch(
        "void run(const float* x, float* y, int n) { k<<<1, 32>>>(x, y, "
        "floorf(log2f((float)n)), n); }",
        n=0,
    )
    assert launch.args[2].value == float("-inf")
    # an infinity cast to an integer is no number: C leaves it undefined
    launch = _launch(
        "void run(const float* x, float* y, int n) { k<<<1, 32>>>(x, y, 0.5f, "
        "1u << (unsigned) floorf(log2f((float) n))); }",
        n=0,
    )
    assert "casts -inf to an integer" in launch.args[3].value.why


def test_a_helper_that_never_ends_is_named_instead_of_hanging():
    with pytest.raises(
        HostEvalError,
        match=r"forever\(\) is host code the executor does not evaluate: it runs more",
    ):
        _launch(
            """
int forever(int x) { while (x > 0) { x += 1; } return x; }
void run(const float* x, float* y, int n) { k<<<forever(n), 32>>>(x, y, 0.5f, n); }""",
            n=4,
        )


def test_dim3_fields_set_in_the_branch_the_case_takes():
    host = """
void run(const float* x, float* y, int n) {
    dim3 grid;
    dim3 block;
    if (n <= 1024) {
        block.x = n;
    } else {
        grid.x = n / 512;
        block.x = 512;
    }
    k<<<grid, block>>>(x, y, 0.5f, n);
}"""
    small, large = _launch(host, n=256), _launch(host, n=4096)
    assert (small.grid, small.block) == ((1, 1, 1), (256, 1, 1))
    assert (large.grid, large.block) == ((8, 1, 1), (512, 1, 1))


def test_a_dispatch_macros_alias_sizes_shared_memory_and_a_functional_cast_keeps_the_float():
    """apex's style: `using accscalar_t = at::acc_type<scalar_t, true>;` inside a dispatch macro,
    a launcher template instantiated with it, `U(epsilon)` passed to the kernel."""
    launch = _launch(
        """
template <typename T, typename U>
void host_apply(const T* x, T* y, int n, double epsilon) {
    int nshared = 4 * sizeof(U);
    k<<<n, 128, nshared>>>(x, y, U(epsilon), n);
}
void entry(at::Tensor x, at::Tensor y, int n, double epsilon) {
    DISPATCH_FLOAT_AND_HALF(x.scalar_type(), "entry",
        using accscalar_t = at::acc_type<scalar_t, true>;
        host_apply<scalar_t, accscalar_t>(
            x.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), n, epsilon);)
}""",
        n=16,
        epsilon=1e-5,
    )
    assert launch.shared_bytes == 16
    assert launch.args[2].value == pytest.approx(1e-5)


def test_torchs_warp_size_is_32():
    launch = _launch(
        """
void run(const float* x, float* y, int n) { k<<<n, C10_WARP_SIZE * 4>>>(x, y, 0.5f, n); }""",
        n=3,
    )
    assert launch.block == (128, 1, 1)


def test_the_launch_in_the_branch_the_case_takes_with_named_template_arguments():
    source = """template <typename T, int BLOCK>
__global__ void k(const T* x, T* y, int cols) {}
template <typename T>
void run(const T* x, T* y, int rows, int cols) {
    constexpr int SMALL = 128, LARGE = 512;
    if (cols <= 1024) {
        k<T, SMALL><<<rows, SMALL>>>(x, y, cols);
    } else {
        k<T, LARGE><<<rows, LARGE>>>(x, y, cols);
    }
}"""
    small = evaluate_launch(source, "k", {"rows": 4, "cols": 1000}, types={"T": "float"})
    large = evaluate_launch(source, "k", {"rows": 4, "cols": 4097}, types={"T": "float"})
    assert (small.block, small.template_args) == ((128, 1, 1), ["T", "128"])
    assert (large.block, large.template_args) == ((512, 1, 1), ["T", "512"])


def test_a_case_whose_branches_launch_nothing_says_so():
    with pytest.raises(
        HostEvalError, match=r"never launches k: each launch \(line 4\) is in a branch the case"
    ):
        _launch(
            """
void run(const float* x, float* y, int n) {
    if (n > 0) k<<<n, 32>>>(x, y, 0.5f, n);
}""",
            n=0,
        )


@pytest.mark.parametrize(
    "changes",
    [
        "for (int i = 0; i < ndim; ++i) { n *= x_size[i]; }",
        "while (n < limit) n *= 2;",
        "for (int i = 0; i < 4; ++i) { if (x_size[i] > 0) break; n += 1; }",
        "if (limit > ndim) { n = limit; }",
        "switch (ndim) { case 3: n += 1; break; }",
    ],
)
def test_what_a_loop_or_an_undecided_branch_changes_is_unknown_not_its_old_value(changes):
    """Host loops are not run, and a branch on a value the case does not give is not taken:
    a name either may change is unknown (the case can bind it), never silently its old value."""
    host = f"""
void run(const float* x, float* y, const int* x_size, int ndim, int limit) {{
    int n = 1;
    {changes}
    k<<<(n + 255) / 256, 256>>>(x, y, 0.5f, n);
}}"""
    with pytest.raises(HostEvalError, match=r"n is changed in the (loop|branch|switch) at line"):
        _launch(host)
    assert _launch(host, n=4096).grid == (16, 1, 1)


def test_allocations_inside_error_checking_wrappers_size_their_buffers():
    """A CHECK(call) macro's block with the call in an initialiser, or a check(call, ...)
    function: the allocation inside sizes the buffer as one standing alone does."""
    launch = _launch(
        """
void run(int n) {
    float *x_dev, *y_dev;
    { const cudaError_t error = cudaMalloc((void**)&x_dev, n * sizeof(float));
      if (error != cudaSuccess) { exit(1); } }
    check(cudaMalloc(&y_dev, 2 * n * sizeof(float)), "cudaMalloc", __LINE__);
    k<<<(n + 255) / 256, 256>>>(x_dev, y_dev, 0.5f, n);
}""",
        n=1000,
    )
    assert [launch.args[0].value.nbytes, launch.args[1].value.nbytes] == [4000, 8000]


def test_wrappers_as_macros_expand_them_and_a_local_size_is_the_cases_names():
    """What CHECK macros expand to, `(check(cudaMalloc(...), "f.cu", 12))` and
    `do { ... } while (0)`, a cast of the pointer, and a byte count held in a local: each
    buffer's size is an expression over the case's names (the output's shape, `n * 10`)."""
    launch = _launch(
        """
const int MN = 10;
int n;
void run() {
    float *x_dev, *y_dev;
    int bytes = sizeof(float) * n * MN;
    (check(cudaMalloc(reinterpret_cast<void **>(&x_dev), n * sizeof(float)), "f.cu", 5));
    do { const cudaError_t e = cudaMalloc(&y_dev, bytes); if (e) exit(1); } while (0);
    k<<<(n + 255) / 256, 256>>>(x_dev, y_dev, 0.5f, n);
}""",
        n=100,
    )
    x, y = (a.value for a in launch.args[:2])
    assert (x.nbytes, y.nbytes) == (400, 4000)
    assert (x.size_text, y.size_text) == ("n * 4", "(4 * n * 10)")


def test_a_program_is_followed_as_run_with_no_arguments():
    """Options read from the command line keep their defaults: the program run as it is."""
    launch = _launch(
        """
int main(int argc, char** argv) {
    int n = 1 << 12, block = 128;
    if (argc > 2) { n = atoi(argv[1]); block = atoi(argv[2]); }
    for (int i = 1; i < argc; i++) { if (argv[i][0] == 'b') block = 256; }
    float *x, *y;
    cudaMalloc(&x, n * sizeof(float));
    cudaMalloc(&y, n * sizeof(float));
    k<<<n / block, block>>>(x, y, 0.5f, n);
}"""
    )
    assert (launch.grid, launch.block) == ((32, 1, 1), (128, 1, 1))


def test_a_loop_the_case_decides_is_run():
    """`while (nth < ncols) nth *= 2;` (llama.cpp's block size) at a case that gives ncols."""
    host = """
void run(const float* x, float* y, int ncols) {
    int nth = 32;
    while (nth < ncols && nth < 1024) nth *= 2;
    int pad = 0;
    for (int i = 0; i < 3; i++) { pad += nth; }
    k<<<1, nth, pad>>>(x, y, 0.5f, ncols);
}"""
    launch = _launch(host, ncols=200)
    assert (launch.block, launch.shared_bytes) == ((256, 1, 1), 768)
    assert _launch(host, ncols=5000).block == (1024, 1, 1)


def test_a_launch_in_a_for_loop_is_its_first_iteration():
    """Learn-CUDA's reduction launches once per stride: `for (int stride = 1; ...)` gives the
    launch's stride argument its first value."""
    launch = _launch(
        """
void run(const float* x, float* y, int n) {
    for (int stride = 1; stride < n; stride *= 2) k<<<(n + 255) / 256, 256>>>(x, y, stride, n);
}""",
        n=1000,
    )
    assert [a.value for a in launch.args[2:]] == [1, 1000]


def test_a_launch_through_a_pointer_a_picker_function_returns_is_the_kernels():
    """exllamav2's norms: `fp kernel = pick_kernel(bpw); kernel<<<grid, block>>>(...)`, where
    pick_kernel returns an instance of the kernel."""
    launch = evaluate_launch(
        """
template <int bpw> __global__ void k(const float* x, float* y, float eps, int n) {}
typedef void (*fp_k)(const float*, float*, float, int);
fp_k pick_kernel(int bpw) {
    if (bpw == 1) return k<1>;
    if (bpw == 2) return k<2>;
    return NULL;
}
void run(const float* x, float* y, int rows, int n) {
    dim3 block, grid;
    block.x = 256;
    grid.x = rows;
    fp_k kernel = pick_kernel(n / 512);
    kernel<<<grid, block>>>(x, y, 1e-5f, n);
}""",
        "k",
        {"rows": 6, "n": 1024},
    )
    assert (launch.grid, launch.block, launch.args[3].value) == ((6, 1, 1), (256, 1, 1), 1024)


def test_a_templated_launcher_called_by_a_templated_one_sizes_t_as_the_kernel_is_built():
    """DeepSpeed's `launch_gated_activation<T>` calls `launch_gated_activation_impl<T, Act>`,
    whose block is `cols / (16 / sizeof(T))`: T is the type the kernel is built with."""
    launch = evaluate_launch(
        """
template <typename T> __global__ void k(const T* x, T* y, float eps, int n) {}
template <typename T, int A> void inner(const T* x, T* y, int n) {
    constexpr int vec = 16 / sizeof(T);
    k<T><<<1, n / vec>>>(x, y, 0.5f, n);
}
template <typename T> void outer(const T* x, T* y, int n) { inner<T, 1>(x, y, n); }
""",
        "k",
        {"n": 512},
        types={"T": "float"},
    )
    assert launch.block == (128, 1, 1)


def test_a_file_constant_computed_from_a_bound_size_follows_the_case():
    """brucefan1983's reductions: `const int N = 100000000; const int M = sizeof(real) * N;` at
    file scope and `cudaMalloc(&d_x, M)`. With N bound to 41, M was still 400 MB: the original ran
    on a buffer the op never has, and a size it fails at passed as one it runs at."""
    source = """
    const int N = 100000000;
    const int M = sizeof(float) * N;
    __global__ void k(float* d_x) { d_x[threadIdx.x] = 1.f; }
    int main() {
        float* d_x;
        cudaMalloc(&d_x, M);
        k<<<(N + 127) / 128, 128>>>(d_x);
    }
    """
    launch = evaluate_launch(source, "k", {"N": 41})
    assert launch.args[0].value.nbytes == 41 * 4 and launch.grid == (1, 1, 1)
