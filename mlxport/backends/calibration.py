"""Measured device ceilings (``mlxport doctor --calibrate``): copy bandwidth and matmul rate,
stored per device so benchmarks report a fraction of what the device really reaches."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any


def path() -> Path:
    root = Path(os.environ.get("MLXPORT_CACHE", Path.home() / ".cache" / "mlxport"))
    return root / "calibration.json"


def load() -> dict[str, Any] | None:
    p = path()
    return json.loads(p.read_text()) if p.is_file() else None


def measure(size_mb: int = 1024, iters: int = 20) -> dict[str, Any]:
    """Run on the device: a large copy (bytes read + written) and a bf16/fp32 matmul."""
    import mlx.core as mx

    n = size_mb * 1024 * 1024 // 4
    x = mx.random.normal((n,))
    mx.eval(x)

    def best(fn) -> float:
        mx.eval(fn())
        mx.synchronize()
        times = []
        for _ in range(iters):
            t0 = time.perf_counter()
            mx.eval(fn())
            mx.synchronize()
            times.append(time.perf_counter() - t0)
        return sorted(times)[len(times) // 2]

    copy_s = best(lambda: x + 0)  # one read, one write per element
    m = 8192
    a = mx.random.normal((m, m)).astype(mx.bfloat16)
    b = mx.random.normal((m, m)).astype(mx.bfloat16)
    mm_s = best(lambda: a @ b)
    info = dict(mx.device_info()) if hasattr(mx, "device_info") else {}
    result = {"device_name": str(info.get("device_name", "unknown")), "copy_gbs": 2 * n * 4 / copy_s / 1e9,
              "bf16_matmul_tflops": 2 * m**3 / mm_s / 1e12, "mlx_version": mx.__version__,
              "date": time.strftime("%Y-%m-%d")}
    p = path()
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(result, indent=2))
    return result
