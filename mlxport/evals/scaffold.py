"""``mlxport tasks new``: a task folder that already checks, ready to be edited."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from mlxport.tasks import TaskError

KERNEL_CU = """\
// {name}: replace this kernel with the one to port. Keep the host launch code:
// the reader uses it to learn the launch geometry.
#include <cuda_runtime.h>

#define BLOCK 256

__global__ void {name}_kernel(const float* __restrict__ x, float* __restrict__ out, float scale, int n) {{
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


_TENSOR = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?::\s*(\w+))?\s*\[([^\]]*)\]\s*$")
DEFAULT_TOLERANCE = {"float32": (1e-4, 1e-4), "float16": (2e-3, 2e-3), "bfloat16": (2e-2, 2e-2)}


def task_name_for(path: Path) -> str:
    """A task name (a Python identifier: it names the op in kernel.py) from a file name."""
    return re.sub(r"\W", "_", path.stem).lstrip("0123456789") or "kernel"


def task_from_flags(
    cu: Path,
    folder: Path,
    *,
    reference: str,
    inputs: str,
    outputs: str,
    cases: list[str],
    heldout: list[str],
    kernel: str | None,
    dtypes: list[str],
) -> Path:
    """Write a task folder for a .cu file given on the command line (``port --reference ...``)."""
    if not cu.is_file():
        raise TaskError(f"no CUDA file {cu}: pass the path of a .cu file")
    if ":" not in reference:
        raise TaskError(f"--reference {reference!r} must look like module_or_file.py:function")
    ref_mod, ref_fn = reference.rsplit(":", 1)
    if not cases:
        raise TaskError("give at least one --case such as 'R=256,C=1024'")
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(cu, folder / "kernel.cu")
    ref_path = Path(ref_mod)
    if ref_path.suffix == ".py":
        if not ref_path.is_file():
            raise TaskError(f"no reference file {ref_path}")
        shutil.copy(ref_path, folder / "reference.py")
        ref_mod = "reference"
    else:
        (folder / "reference.py").write_text(f"from {ref_mod} import {ref_fn}  # noqa: F401\n")
        ref_mod = "reference"
    if kernel is None:
        from mlxport.translate.reading.reader import read_cuda

        kernels = read_cuda(cu.read_text(), name=cu.name).kernels
        kernel = next((k.name for k in kernels if k.kind == "global"), None)
    lines = [
        f'name = "{folder.name}"',
        f'description = "Port of {cu.name}"',
        f'kernel = "{kernel}"',
        f'reference = "{ref_mod}:{ref_fn}"',
        f"dtypes = {json.dumps(dtypes)}",
        "",
        "[baselines]",
        f'native = "{ref_mod}:{ref_fn}"',
        f'naive = "{ref_mod}:{ref_fn}"',
        "",
    ]
    for kind, spec in (("inputs", inputs), ("outputs", outputs)):
        for name, dtype, dims in _tensors(spec, f"--{kind}"):
            lines += [
                f"[[{kind}]]",
                f'name = "{name}"',
                f'dtype = "{dtype}"',
                f"shape = {json.dumps(dims)}",
                "",
            ]
    for d in dtypes:
        atol, rtol = DEFAULT_TOLERANCE.get(d, (1e-4, 1e-4))
        lines += [f"[tolerance.{d}]", f"atol = {atol}", f"rtol = {rtol}", ""]
    first_out = _tensors(outputs, "--outputs")[0]
    lines += [
        "[cost]",
        f'bytes = "{" * ".join(first_out[2]) or "1"} * itemsize * 2"',
        "",
        "[cases]",
        f"visible = [{', '.join(_case(c) for c in cases)}]",
        f"heldout = [{', '.join(_case(c) for c in heldout)}]",
    ]
    (folder / "task.toml").write_text("\n".join(lines) + "\n")
    return folder


def _tensors(spec: str, flag: str) -> list[tuple[str, str, list[str]]]:
    out = []
    for part in filter(None, (p.strip() for p in spec.split(";"))):
        m = _TENSOR.match(part)
        if not m:
            raise TaskError(
                f"{flag} entry {part!r} must look like name[dims] or name:dtype[dims], e.g. x[R,C]"
            )
        dims = [d.strip() for d in m.group(3).split(",") if d.strip()]
        out.append((m.group(1), m.group(2) or "T", dims))
    if not out:
        raise TaskError(f"{flag} needs at least one tensor, e.g. 'x[R,C];w[C]'")
    return out


def _case(text: str) -> str:
    items = []
    for kv in filter(None, (p.strip() for p in text.split(","))):
        key, _, value = kv.partition("=")
        if not key.strip().isidentifier() or not value.strip().lstrip("-").isdigit():
            raise TaskError(f"case entry {kv!r} must look like NAME=INTEGER, e.g. R=256")
        items.append(f"{key.strip()} = {int(value)}")
    return "{ " + ", ".join(items) + " }"
