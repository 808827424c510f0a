"""``mlxport tasks new NAME``: a task folder that already checks, ready to be edited."""

from __future__ import annotations

from pathlib import Path

from mlxport.tasks.folder import TaskError

KERNEL_CU = """\
// {name}: replace this kernel with the one to port. Keep the host launch code:
// the reader uses it to learn the launch geometry.
#include <cuda_runtime.h>

#define BLOCK 256

__global__ void {name}_kernel(const float* __restrict__ x, float* __restrict__ out, float scale,
                              int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] * scale;
}}

void {name}(const float* x, float* out, float scale, int n, cudaStream_t stream) {{
    {name}_kernel<<<(n + BLOCK - 1) / BLOCK, BLOCK, 0, stream>>>(x, out, scale, n);
}}
"""

TASK_TOML = """\
name = "{name}"
description = "Describe in one line what the kernel computes."
kernel = "{name}_kernel"
dtypes = ["float32", "float16", "bfloat16"]
target_speedup = 1.0

[baselines]
native = "reference:reference"   # the strongest native MLX path
naive = "reference:naive"        # what a user writes today

[[inputs]]
name = "x"
shape = ["N"]
init = {{ kind = "uniform", low = 0.5, high = 2.0 }}

[[params]]
name = "scale"
type = "float"
default = 1.5

[[outputs]]
name = "out"
shape = ["N"]

[tolerance.float32]
atol = 1e-6
rtol = 1e-6
[tolerance.float16]
atol = 1e-3
rtol = 1e-3
[tolerance.bfloat16]
atol = 1e-2
rtol = 1e-2

[cost]
bytes = "2 * N * itemsize"
flops = "N"

[cases]
visible = [{{ N = 4096 }}, {{ N = 65536 }}]
heldout = [{{ N = 1000 }}, {{ N = 77777 }}]
bench = [{{ N = 16777216 }}]
"""

REFERENCE_PY = """\
import mlx.core as mx


def reference(x: mx.array, *, scale: float) -> mx.array:
    return x * scale


def naive(x: mx.array, *, scale: float) -> mx.array:
    return (x.astype(mx.float32) * scale).astype(x.dtype)
"""

MSL_PORT = """\
language = "msl"
name = "{name}"
input_names = ["x", "scale"]
output_names = ["out"]
output_shapes = ["x.shape"]
output_dtypes = ["x.dtype"]
grid = ["x.size", 1, 1]
threadgroup = [256, 1, 1]
source = \"\"\"
uint i = thread_position_in_grid.x;
out[i] = x[i] * scale;
\"\"\"
"""


def scaffold(name: str, parent: Path) -> Path:
    if not name.isidentifier():
        raise TaskError(f"task name {name!r} must be a valid identifier such as my_kernel")
    folder = Path(parent) / name
    if folder.exists():
        raise TaskError(f"{folder} already exists: pick another name or remove it")
    if not Path(parent).is_dir():
        raise TaskError(f"{parent} is not a folder: create it or pass --dir")
    (folder / "ports").mkdir(parents=True)
    (folder / "kernel.cu").write_text(KERNEL_CU.format(name=name))
    (folder / "task.toml").write_text(TASK_TOML.format(name=name))
    (folder / "reference.py").write_text(REFERENCE_PY)
    (folder / "ports" / "msl.toml").write_text(MSL_PORT.format(name=name))
    return folder
