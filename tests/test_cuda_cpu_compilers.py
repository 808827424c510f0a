"""The executor builds with every C++ compiler a user may have: a kernel that includes what real
files include (the C++ library, CUDA's headers, cooperative groups) is preprocessed, compiled
against the executor's headers and linked with each compiler found here, so a compiler or system
header that breaks the build fails here. Compilers not installed are skipped, named;
MLXPORT_TEST_COMPILERS adds commands outside PATH (a GCC unpacked from another distribution,
say), separated by ':'."""

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from mlxport.backends.cuda_cpu import CudaExecutor, Launch

NAMES = [
    *(f"g++-{v}" for v in (12, 13, 14, 15)),
    *(f"clang++-{v}" for v in (16, 17, 18, 19, 20)),
]
EXTRA = [c for c in os.environ.get("MLXPORT_TEST_COMPILERS", "").split(":") if c]

KERNEL = r"""
#include <iostream>
#include <vector>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <algorithm>
#include <type_traits>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

template <typename T>
__global__ void softplus(const T* x, T* y, int n) {
    cg::thread_block block = cg::this_thread_block();
    int i = blockIdx.x * blockDim.x + block.thread_rank();
    if (i < n) y[i] = T(log1pf(expf(float(x[i]))));
}

int main() {
    std::vector<float> h(256, 1.0f);
    std::cout << h.size() << std::endl;
    return 0;
}
"""


def _compiler(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed")
    return found


def _builds(command: str, tmp_path: Path, monkeypatch, run: bool) -> None:
    monkeypatch.setenv("CXX", command)
    path = tmp_path / "softplus.cu"
    path.write_text(KERNEL)
    ex = CudaExecutor()
    try:
        c = ex.compile(ex.source(path), "softplus", ["float"])
        if run:
            x = np.linspace(-4, 4, 200, dtype=np.float32)
            r = ex.run(c, Launch((2, 1, 1), (128, 1, 1)), [x, np.zeros_like(x), np.int32(200)])
            assert r.ok, r.error
            np.testing.assert_allclose(r.buffers["y"], np.log1p(np.exp(x)), rtol=1e-6)
    finally:
        ex.close()


@pytest.mark.parametrize("name", NAMES)
def test_the_executor_builds_and_runs_with(name, tmp_path, monkeypatch):
    _builds(_compiler(name), tmp_path, monkeypatch, run=True)


@pytest.mark.parametrize("command", EXTRA or ["(none)"])
def test_the_executor_builds_with_a_compiler_outside_path(command, tmp_path, monkeypatch):
    """Built only: a toolchain of another distribution links against its own C library, which the
    worker here may not load."""
    if not EXTRA:
        pytest.skip("MLXPORT_TEST_COMPILERS names no compiler")
    _builds(command, tmp_path, monkeypatch, run=False)


def test_a_cxx_library_on_the_search_path_is_not_expanded(tmp_path):
    """A compiler may put its C++ library's folders on the search path whatever -nostdinc++ says
    (the GPU machines' CXX is a script adding -isystem /usr/include/c++/13 and its platform
    folder): the preprocessing pass must still not expand <iostream>, whose
    <bits/os_defines.h> needs the C library's __GLIBC_PREREQ."""
    cxx = _compiler("g++")
    search = subprocess.run(
        [cxx, "-E", "-x", "c++", "-v", "-"], input="", capture_output=True, text=True
    ).stderr
    library = [Path(d.strip()) for d in search.splitlines() if "/c++/" in d]
    library = tuple(d for d in library if d.is_dir())
    if not library:
        pytest.skip(f"{cxx} names no C++ library folder")
    path = tmp_path / "softplus.cu"
    path.write_text(KERNEL)
    ex = CudaExecutor()
    try:
        source = ex.source(path, library)
        assert {"iostream", "vector"} <= set(source.dropped_includes)
        ex.compile(source, "softplus", ["float"])
    finally:
        ex.close()


def test_a_compiler_that_fortifies_by_default(tmp_path, monkeypatch):
    """Ubuntu's GCC defines _FORTIFY_SOURCE when optimising: the C library's printf becomes an
    inline wrapper, which the executor's own printf must not clash with."""
    _builds(f"{_compiler('g++')} -D_FORTIFY_SOURCE=2", tmp_path, monkeypatch, run=True)
