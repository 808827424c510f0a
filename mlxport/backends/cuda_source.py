"""The file ``mx.fast.cuda_kernel`` compiles for a candidate (mlx/backend/cuda/custom_kernel.cpp):
its header, MLX's namespace, the generated signature, the template constants, its body. Used to
run a CUDA body where MLX is not: on the CPU executor, or through NVRTC on a machine without a GPU
(``nvrtc_compile``, with NVRTC and the CUDA headers from the ``nvidia-cuda-nvrtc``,
``nvidia-cuda-runtime`` and ``nvidia-cuda-cccl`` wheels). Shapes come as ``const int*`` here (MLX
passes a ``Shape`` array that indexes the same way)."""

from __future__ import annotations

import ctypes
from pathlib import Path

from mlxport.spec import KernelCandidate

# What MLX's preamble (mlx/backend/cuda/device/utils.cuh) gives a body, for NVRTC.
NVRTC_PREAMBLE = (
    "typedef unsigned int uint32_t;\ntypedef unsigned long long uint64_t;\n"
    "#include <cooperative_groups.h>\n"
)

CUDA_TYPES = {"float32": "float", "float16": "__half", "bfloat16": "__nv_bfloat16", "int32": "int"}


def mlx_cuda_source(
    cand: KernelCandidate, launch, dtypes: dict[str, str], name: str = "custom_kernel_port"
) -> str:
    """``launch`` is ``cand.launch(...)`` at the case; ``dtypes`` names each input's dtype."""
    params = []
    for n in cand.input_names:
        params.append(f"    const {CUDA_TYPES[dtypes[n]]}* {n},")
        if f"{n}_shape" in cand.source:
            params.append(f"    const int* {n}_shape,")
    params += [
        f"    {CUDA_TYPES[d]}* {n},"
        for n, d in zip(cand.output_names, launch.output_dtypes, strict=True)
    ]
    consts = "".join(
        f"  using {k} = {CUDA_TYPES[v]};\n"
        if isinstance(v, str)
        else f"  constexpr int {k} = {int(v)};\n"
        for k, v in launch.template
    )
    return (
        "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"
        + cand.header
        + "namespace mlx::core::cu {\n\nnamespace cg = cooperative_groups;\n\n"
        + f"__global__ void {name}(\n"
        + "\n".join(params).rstrip(",")
        + ") {\n"
        + consts
        + "\n"
        + cand.source
        + "\n}\n\n} // namespace mlx::core::cu\n"
    )


def nvrtc_source(cand: KernelCandidate, infos: dict) -> str:
    """What NVRTC compiles for ``cand`` at a case's ``infos`` (``tasks.case_infos``): MLX's file
    with the preamble; scalar inputs become float arrays, as kernel.py passes them."""
    from mlxport.expr import ArrayInfo

    dtypes = {
        n: str(i.dtype) if isinstance(i := infos.get(n), ArrayInfo) else "float32"
        for n in cand.input_names
    }
    return NVRTC_PREAMBLE + mlx_cuda_source(cand, cand.launch(infos), dtypes)


def nvrtc_root() -> Path | None:
    """The folder holding NVRTC's library and the CUDA headers (the wheels' ``nvidia/cu13``)."""
    try:
        import nvidia
    except ImportError:
        return None
    for base in map(Path, nvidia.__path__):
        for root in sorted(base.glob("cu*")):
            if (
                list(root.glob("lib/libnvrtc.so*"))
                and (root / "include" / "cuda_bf16.h").exists()
                and (root / "include" / "cccl").exists()
            ):
                return root
    return None


def nvrtc_compile(source: str, arch: str) -> tuple[bool, str, bytes]:
    """(ok, NVRTC's log with ptxas's resource report, the cubin) for ``source`` compiled as MLX
    compiles custom kernels (``--gpu-architecture=sm_90a`` on compute capability 9)."""
    root = nvrtc_root()
    if root is None:
        raise RuntimeError(
            "NVRTC not found: pip install nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cuda-cccl"
        )
    lib = ctypes.CDLL(str(next(root.glob("lib/libnvrtc.so*"))))
    prog = ctypes.c_void_p()
    lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"port.cu", 0, None, None)
    opts = [
        f"--gpu-architecture={arch}",
        "--device-as-default-execution-space",
        f"-I{root / 'include'}",
        f"-I{root / 'include' / 'cccl'}",
        "--ptxas-options=-v",
        "-std=c++17",
    ]
    try:
        ok = (
            lib.nvrtcCompileProgram(
                prog, len(opts), (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
            )
            == 0
        )
        n = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
        log = ctypes.create_string_buffer(n.value)
        lib.nvrtcGetProgramLog(prog, log)
        cubin = b""
        if ok:
            lib.nvrtcGetCUBINSize(prog, ctypes.byref(n))
            buf = ctypes.create_string_buffer(n.value)
            lib.nvrtcGetCUBIN(prog, buf)
            cubin = buf.raw
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return ok, log.value.decode(errors="replace"), cubin
