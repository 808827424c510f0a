"""Fuzz the CUDA reader: any input gives a CudaFile or a CudaReadError, never a crash or a hang.

The suite runs a fast version; `MLXPORT_FUZZ_LONG=1` runs thousands of examples per strategy.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlxport.translate.reading.reader import CudaFile, CudaReadError, assess, read_cuda, summary

LONG = os.environ.get("MLXPORT_FUZZ_LONG") == "1"
CORPUS = [p.read_text() for p in sorted((Path(__file__).parent / "cuda").glob("*.cu"))]
SETTINGS = settings(
    max_examples=4000 if LONG else 25,
    deadline=None,
    derandomize=not LONG,
    suppress_health_check=list(HealthCheck),
)
SECONDS = 15.0  # per input; the parse itself stops at 10 s

TOKENS = [
    "__global__",
    "__device__",
    "__host__",
    "__shared__",
    "extern",
    "void",
    "float",
    "int",
    "const",
    "*",
    "&",
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    "<",
    ">",
    "<<<",
    ">>>",
    ";",
    ",",
    "=",
    "+=",
    "x",
    "p",
    "k",
    "i",
    "template",
    "typename",
    "T",
    "#define",
    "#if",
    "#endif",
    "#ifdef",
    "\\\n",
    "\n",
    " ",
    '"',
    "'",
    "/*",
    "*/",
    "//",
    "threadIdx.x",
    "__syncthreads()",
    "atomicAdd",
    "__shfl_xor_sync",
    "asm",
    "volatile",
    "namespace",
    "struct",
    "return",
    "for",
    "if",
    "::",
    "##",
    "#",
    "K(",
    "M(",
    "__launch_bounds__(",
    "__align__(",
    "cg::",
    "wmma::",
    "cub::",
    "0xffffffff",
    "1",
    "32",
    "\x00",
    "\ufffd",
]


def check(source: str | bytes) -> None:
    start = time.monotonic()
    try:
        cf = read_cuda(source, name="fuzz.cu")
    except CudaReadError as e:
        assert str(e) and "\n" not in str(e).strip()
    else:
        assert isinstance(cf, CudaFile) and cf.kernels
        summary(cf)
        for k in cf.kernels + cf.device_functions:
            assess(k)
        cf.model_dump_json()
    assert time.monotonic() - start < SECONDS


@SETTINGS
@given(st.text(max_size=3000))
def test_any_text(text: str) -> None:
    check(text)


@SETTINGS
@given(st.binary(max_size=3000))
def test_any_bytes(data: bytes) -> None:
    check(data)


@SETTINGS
@given(st.lists(st.sampled_from(TOKENS), max_size=400).map(" ".join))
def test_token_soup(text: str) -> None:
    check(text)


@SETTINGS
@given(st.sampled_from(CORPUS), st.floats(0, 1))
def test_truncated_real_files(text: str, frac: float) -> None:
    check(text[: int(len(text) * frac)])


@SETTINGS
@given(
    st.sampled_from(CORPUS),
    st.lists(
        st.tuples(st.floats(0, 1), st.integers(0, 40), st.sampled_from(TOKENS + [""])), max_size=8
    ),
)
def test_mutated_real_files(text: str, edits: list[tuple[float, int, str]]) -> None:
    for frac, cut, insert in edits:
        pos = int(len(text) * frac)
        text = text[:pos] + insert + text[pos + cut :]
    check(text)


@SETTINGS
@given(st.integers(1, 60), st.booleans(), st.sampled_from(["(", "{", "[", "<", "K("]))
def test_deep_nesting_and_macros(depth: int, recursive: bool, opener: str) -> None:
    chain = "".join(f"#define M{i}(x) M{i + 1}(x)\n" for i in range(depth))
    last = f"#define M{depth}(x) " + (
        "M0(x)" if recursive else "__global__ void x(float* p) { p[0] = 1; }"
    )
    check(chain + last + "\nM0(kern)\n")
    check("__global__ void k(float* p) { p[0] = " + opener * depth * 50 + " }\n")


def test_parse_and_read_deadlines(monkeypatch) -> None:
    from mlxport.translate.reading import reader

    monkeypatch.setattr(reader, "PARSE_SECONDS", 0.05)
    with pytest.raises(CudaReadError, match="longer than|does not parse|not closed"):
        read_cuda("__global__ void k() {}\n" + "a<" * 400_000)
    monkeypatch.setattr(reader, "PARSE_SECONDS", 10.0)
    monkeypatch.setattr(reader, "READ_SECONDS", 0.0)
    src = "".join(
        f"__global__ void k{i}(float* a) {{ a[threadIdx.x] = {i}; }}\n" for i in range(300)
    )
    with pytest.raises(CudaReadError, match="reading took longer than") as e:
        read_cuda(src)
    assert "\n" not in str(e.value).strip()
