"""Measured device ceilings (``mlxport doctor --calibrate``): copy bandwidth and matmul rate,
stored per device so benchmarks report a fraction of what the device really reaches.

Copy bandwidth is the faster of MLX's own copy (``x + 0``) and a 16-byte-vector copy kernel
launched the way every port is (``mx.fast.cuda_kernel`` / ``metal_kernel``), both timed with the
benchmark's own timer. MLX's elementwise kernels alone understate some devices: on an H200 the
vector copy moves bytes markedly faster.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

from mlxport.backends.base import cache_root
from mlxport.spec import KernelCandidate


def _cuda_copy(load: str, store: str, nvec: int) -> str:
    """Each thread copies ``nvec`` 16-byte vectors, all loads issued before any store."""
    return f"""
const unsigned long long base = (unsigned long long)blockIdx.x * blockDim.x * {nvec} + threadIdx.x;
const uint4* src = reinterpret_cast<const uint4*>(x);
uint4* dst = reinterpret_cast<uint4*>(out);
uint4 v[{nvec}];
#pragma unroll
for (int k = 0; k < {nvec}; ++k) {{
    const unsigned long long i = base + (unsigned long long)k * blockDim.x;
    if (i < NV) v[k] = {load}(src + i);
}}
#pragma unroll
for (int k = 0; k < {nvec}; ++k) {{
    const unsigned long long i = base + (unsigned long long)k * blockDim.x;
    if (i < NV) {store};
}}
"""


_MSL_COPY = """
uint i = thread_position_in_grid.x;
if (i < NV) {
    reinterpret_cast<device float4*>(out)[i] = reinterpret_cast<const device float4*>(x)[i];
}
"""


def copy_candidate(
    language: str,
    *,
    load: str = "__ldg",
    store: str = "dst[i] = v[k]",
    nvec: int = 4,
    name: str = "mlxport_copy",
) -> KernelCandidate:
    """A plain copy of an array whose size in bytes is a multiple of 16, as a candidate, so it
    runs exactly as ports run. The CUDA one's cache hints (``load``, ``store``) and vectors per
    thread (``nvec``) vary only in ``benchmarks/port_variants.py``; the MSL one is tested on the
    simulator."""
    cuda = language == "cuda"
    return KernelCandidate(
        language=language,
        name=name,
        input_names=["x"],
        output_names=["out"],
        output_shapes=["x.shape"],
        output_dtypes=["x.dtype"],
        template={"NV": "x.size * x.itemsize // 16"},
        grid=[f"ceildiv(NV, {256 * nvec}) * 256" if cuda else "NV", 1, 1],
        threadgroup=[256, 1, 1],
        source=_cuda_copy(load, store, nvec) if cuda else _MSL_COPY,
    )


def device_name(backend: str) -> str:
    """The name calibrations are stored under: MLX's name for the GPU, else the backend's."""
    import mlx.core as mx

    info = dict(mx.device_info(mx.gpu)) if hasattr(mx, "device_info") else {}
    return str(info.get("device_name", backend))


def path() -> Path:
    return cache_root() / "calibration.json"


def load(device_name: str) -> dict[str, Any] | None:
    """The calibration measured on this device, if any: one cache may serve several machines."""
    return _stored().get(device_name)


def _stored() -> dict[str, dict[str, Any]]:
    p = path()
    if not p.is_file():
        return {}
    data = json.loads(p.read_text())
    if "devices" not in data:  # the single-device format written before 2026-11-30
        return {data["device_name"]: data} if "device_name" in data else {}
    return data["devices"]


def copy_seconds(nbytes: int, how: str = "kernel", iters: int = 20) -> float:
    """Median seconds to copy ``nbytes`` of traffic (half read, half written), on the default GPU,
    with the benchmark's timer. ``how``: "kernel" (the vector copy candidate) or "mlx" (x + 0)."""
    import mlx.core as mx

    from mlxport.backends import mlx_kernel, timer

    n = max(4, nbytes // 8 // 4 * 4)  # float32 elements, a multiple of 4
    sets = [{"x": mx.random.normal((n,))} for _ in range(2)]
    mx.eval([s["x"] for s in sets])
    if how == "mlx":

        def fn(s):
            return s["x"] + 0
    else:
        fn = mlx_kernel.caller(copy_candidate("cuda" if mx.cuda.is_available() else "msl"), sets[0])
    return statistics.median(timer.samples({how: fn}, sets, warmup=3, iters=iters)[how])


def measure(backend: str, size_mb: int = 512, iters: int = 20) -> dict[str, Any]:
    """Run on the device: a large copy both ways (bytes read + written) and a bf16 matmul, stored
    under the device's name (``backend`` where MLX reports none, as the backend worker does)."""
    import mlx.core as mx

    from mlxport.backends import timer

    nbytes = 2 * size_mb * 1024 * 1024
    kernel_gbs = nbytes / copy_seconds(nbytes, "kernel", iters) / 1e9
    mlx_gbs = nbytes / copy_seconds(nbytes, "mlx", iters) / 1e9
    m = 8192
    sets = [
        {
            "a": mx.random.normal((m, m)).astype(mx.bfloat16),
            "b": mx.random.normal((m, m)).astype(mx.bfloat16),
        }
    ]
    mx.eval(sets[0]["a"], sets[0]["b"])
    mm = timer.samples({"matmul": lambda s: s["a"] @ s["b"]}, sets, warmup=2, iters=iters)["matmul"]
    result = {
        "device_name": device_name(backend),
        "copy_gbs": max(kernel_gbs, mlx_gbs),
        "copy_kernel_gbs": kernel_gbs,
        "mlx_copy_gbs": mlx_gbs,
        "copy_bytes": nbytes,
        "bf16_matmul_tflops": 2 * m**3 / statistics.median(mm) / 1e12,
        "timing_basis": timer.basis(),
        "mlx_version": mx.__version__,
        "date": time.strftime("%Y-%m-%d"),
    }
    devices = {**_stored(), result["device_name"]: result}
    p = path()
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps({"devices": devices}, indent=2))
    return result
