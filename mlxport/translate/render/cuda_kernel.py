"""The CUDA-body candidate for ``mx.fast.cuda_kernel``: the kernel body as written (only
read-write pointers are split), preceded by aliases and constants, and a header with the file's
device functions, types and CUDA includes.

A float-only kernel that the task also runs on 16-bit dtypes gets MLX's 16-bit pointers: its
``reinterpret_cast<float4*>(p)[i]`` views become ``mlxport_view4(p)[i]``, which reads and writes
four elements of the buffer's own type as a float4, so the arithmetic stays in float. An atomic
kernel's tiny float32 outputs are staged in device memory (``stage_small_outputs``). A tuning
variant declares the buffers ``__restrict__`` (``restrict_buffers``)."""

from __future__ import annotations

import re
from collections.abc import Callable

from tree_sitter import Node

from mlxport.cuda_syntax import declared_name, text, walk
from mlxport.spec import KernelCandidate
from mlxport.translate.bind.job import KernelJob
from mlxport.translate.bind.kernel_facts import KernelFacts
from mlxport.translate.bind.kernel_scope import device_macros, device_qualified
from mlxport.translate.bind.ports import Ports, alias_lines
from mlxport.translate.bind.result import Translation, Untranslatable
from mlxport.translate.bind.scalars import Scalars, prologue_consts
from mlxport.translate.render.base import (
    FnCtx,
    TreeRender,
    float_limit_guards,
    namespace_lines,
    splice,
)

_CUDA_OK_INCLUDES = ("cuda_fp16", "cuda_bf16", "cooperative_groups", "mma.h", "cuda/")
_VIEW = re.compile(r"reinterpret_cast\s*<\s*(const\s+)?float([24])\s*\*\s*>")
# Vector views over a buffer of any element type: a float2/float4 read or written as one access.
VIEW_HELPERS = """\
template <typename T, int N> struct alignas(N * sizeof(T)) mlxport_pack { T v[N]; };
template <typename T, int N, typename F> struct mlxport_vec_ref {
    T* p;
    __device__ operator F() const {
        const mlxport_pack<T, N> u = *reinterpret_cast<const mlxport_pack<T, N>*>(p);
        F f; float* o = reinterpret_cast<float*>(&f);
        for (int k = 0; k < N; ++k) o[k] = static_cast<float>(u.v[k]);
        return f;
    }
    __device__ const mlxport_vec_ref& operator=(const F& f) const {
        mlxport_pack<T, N> u; const float* i = reinterpret_cast<const float*>(&f);
        for (int k = 0; k < N; ++k) u.v[k] = static_cast<T>(i[k]);
        *reinterpret_cast<mlxport_pack<T, N>*>(p) = u;
        return *this;
    }
};
template <typename T, int N, typename F> struct mlxport_vec_view {
    T* p;
    __device__ mlxport_vec_ref<T, N, F> operator[](long long i) const { return {p + N * i}; }
};
template <typename T> __device__ mlxport_vec_view<T, 2, float2> mlxport_view2(T* p) { return {p}; }
template <typename T> __device__ mlxport_vec_view<T, 4, float4> mlxport_view4(T* p) { return {p}; }
"""

STAGE = "mlxport_stage"  # per-call scratch in device memory; element 0 is the blocks' ticket
STAGE_SLOTS = 1024  # sized like the expert reduce_sum's scratch, which MLX keeps in device memory


def stage_small_outputs(body: str, outputs: list[tuple[str, int]]) -> str:
    """The body with its tiny outputs' writes landing in the stage; the last block to finish
    copies them out. MLX keeps a tiny output in host-visible memory, where every block's atomic
    crosses the bus (on an H200, 1024 blocks' atomics took 1181 us against the expert port's 16)."""
    finals = "".join(f"float* const mlxport_final_{name} = {name};\n" for name, _ in outputs)
    offsets, at = {}, 1
    for name, size in outputs:
        offsets[name], at = at, at + size
    shadows = "".join(f"float* const {name} = {STAGE} + {offsets[name]};\n" for name, _ in outputs)
    copies = "".join(
        f"    for (int k = 0; k < {size}; ++k) mlxport_final_{name}[k] = "
        f"reinterpret_cast<volatile float*>({STAGE} + {offsets[name]})[k];\n"
        for name, size in outputs
    )
    return (
        "{\n"
        + finals
        + "{\n"
        + shadows
        + "auto mlxport_body = [&]() {\n"
        + body
        + "\n};\nmlxport_body();\n}\n"
        "__threadfence();  // this thread's updates of the stage are visible before its block "
        "takes a ticket\n"
        "__syncthreads();\n"
        "if (threadIdx.x + threadIdx.y + threadIdx.z == 0 &&\n"
        f"    atomicAdd(reinterpret_cast<unsigned int*>({STAGE}), 1u) == "
        "gridDim.x * gridDim.y * gridDim.z - 1) {\n"
        "    __threadfence();\n" + copies + "}\n}"
    )


# What MLX writes between a candidate's header and its body (mlx/backend/cuda/custom_kernel.cpp):
# the namespace, the signature's words and types, the template constants. A buffer named like one
# of these would be rewritten there too.
_SIGNATURE_WORDS = frozenset(
    {
        "namespace",
        "mlx",
        "core",
        "cu",
        "cg",
        "cooperative_groups",
        "__global__",
        "void",
        "const",
        "__grid_constant__",
        "Shape",
        "Strides",
        "int",
        "constexpr",
        "bool",
        "true",
        "false",
        "using",
        "float",
        "double",
        "__half",
        "__nv_bfloat16",
        "complex64_t",
        "cuComplex",
        "int8_t",
        "int16_t",
        "int32_t",
        "int64_t",
        "uint8_t",
        "uint16_t",
        "uint32_t",
        "uint64_t",
    }
)


def restrict_buffers(translation: Translation) -> Translation | None:
    """The CUDA translation with its buffers as ``__restrict__`` kernel parameters; None where a
    buffer's name could clash with what MLX writes around the signature.

    MLX declares them ``const T* x`` and ``T* out``. Without __restrict__ the compiler must assume
    that a store through ``out`` may change what ``x`` holds, so it neither reads ``x`` through the
    read-only path nor issues a later load ahead of an earlier store. The promise holds in every
    call: each output is a fresh buffer and inputs are never written (a read-write pointer is an
    input and a separate output). MLX writes the signature right after the header, so
    ``#define x __restrict__ x`` at the header's end qualifies the parameter and ``#undef x`` at the
    body's start ends the rewrite before any use of the name."""
    cand = translation.candidate
    names = [*cand.input_names, *cand.output_names]
    if cand.language != "cuda" or set(names) & (_SIGNATURE_WORDS | set(cand.template)):
        return None
    defines = "".join(f"#define {n} __restrict__ {n}\n" for n in names)
    undefs = "".join(f"#undef {n}\n" for n in names)
    restricted = KernelCandidate.model_validate(
        {
            **cand.model_dump(),
            "header": cand.header + "\n" + defines,
            "source": undefs + cand.source,
        }
    )
    note = (
        "buffers are __restrict__ kernel parameters "
        "(MLX's outputs are fresh and its inputs never written)"
    )
    return translation.model_copy(
        update={"candidate": restricted, "notes": [*translation.notes, note]}
    )


class CudaRender(TreeRender):
    def rule(self, node: Node, ctx: FnCtx) -> str | None:
        if self.facts.generic_float is not None and node.type == "call_expression":
            fn = node.child_by_field_name("function")
            m = (
                _VIEW.fullmatch(text(fn))
                if fn is not None and fn.type == "template_function"
                else None
            )
            args = node.child_by_field_name("arguments")
            if m and args is not None and len(args.named_children) == 1:
                return f"mlxport_view{m.group(2)}({self.render(args.named_children[0], ctx)})"
        return super().rule(node, ctx)


def render_cuda(
    job: KernelJob,
    facts: KernelFacts,
    scalars: Scalars,
    ports: Ports,
    staged: list[tuple[str, int]] | None = None,
) -> tuple[str, str]:
    """(header, body); ``staged``: tiny outputs (name, elements) whose writes go through the
    stage."""
    r = CudaRender(job.src, facts, job.notes)
    body = r.render(job.node.child_by_field_name("body"), FnCtx("kernel", name=job.info.name))
    if facts.generic_float is not None and re.search(r"\bfloat[24]\s*\*", body):
        raise Untranslatable(
            "float vector pointer",
            job.info.line,
            "a float-only kernel run on 16-bit dtypes gets "
            "16-bit buffers; only reinterpret_cast<float2/float4*>(p)[i] views are rewritten",
        )
    outer, inner = prologue_consts(job, scalars, cuda=True)
    lines = alias_lines(ports) + namespace_lines(job.node) + outer
    if inner:
        body = "{\n" + "\n".join(inner) + "\n" + body + "\n}"
    if staged:
        body = stage_small_outputs(body, staged)
        job.notes.append(
            f"atomics into {', '.join(n for n, _ in staged)} land in a per-call stage in device "
            f"memory ({STAGE}, zeroed by init_value); the last block to finish copies the result "
            "out"
        )
    header = _header(job)
    if "mlxport_view" in body:
        header = VIEW_HELPERS + header
        job.notes.append(
            "float2/float4 views of the buffers read and write their own element type as float "
            "vectors (mlxport_view4): the arithmetic stays in float"
        )
    if r.reads_back:
        header = r.READ_BACK["cuda"] + header
    job.notes.append(
        "CUDA body: the kernel body runs as written; scalars come from shapes (x_shape) or 0-d "
        "inputs (name[0]); template arguments are body-local constants"
    )
    return header, "\n".join(lines) + "\n" + body + "\n"


def _header(job: KernelJob) -> str:
    qualifiers = device_macros(job.root)

    def top(n: Node) -> str:
        t = n.type
        if t == "preproc_include":
            path = text(n.child_by_field_name("path")).strip('<>"')
            return text(n) if path.startswith(_CUDA_OK_INCLUDES) else ""
        if t == "template_instantiation":
            return ""
        if t in ("function_definition", "template_declaration"):
            return _top_function(n, job.node, top, qualifiers)
        if t == "declaration":
            fdecl = next((c for c in walk(n) if c.type == "function_declarator"), None)
            quals = {c.type for c in walk(n)}
            if fdecl is not None and "__device__" not in quals and "__global__" not in quals:
                return ""
            if fdecl is not None and "__global__" in quals:
                return ""
            if _declares(n, job.constants) and "__constant__" in text(n):
                return ""  # the host fills it at run time: the kernel takes it as an input
            return text(n)
        if (
            t == "linkage_specification"
            and n.child_by_field_name("body") is not None
            and n.child_by_field_name("body").type != "declaration_list"
        ):
            # extern "C" f(): the linkage goes with what it names
            return top(n.child_by_field_name("body"))
        if t in (
            "preproc_if",
            "preproc_ifdef",
            "preproc_else",
            "preproc_elif",
            "namespace_definition",
            "declaration_list",
            "linkage_specification",
        ):
            return _copy(job.src, n, top)
        return text(n)

    out = _copy(job.src, job.root, top)
    out = re.sub(r"\n{3,}", "\n\n", out).strip()
    return float_limit_guards(out + text(job.node)) + out + "\n"


def _declares(n: Node, names: list[str]) -> bool:
    return any(declared_name(d) in names for d in n.children_by_field_name("declarator"))


def _top_function(n: Node, kernel: Node, top: Callable[[Node], str], macros: set[str]) -> str:
    """A file-scope (template) function: device functions stay, kernels and host code go."""
    fn = (
        n
        if n.type == "function_definition"
        else next((c for c in n.named_children if c.type == "function_definition"), None)
    )
    if fn is None:
        inner = next((c for c in n.named_children if c.type == "template_declaration"), None)
        return top(inner) if inner is not None else text(n)
    quals = {c.type for c in fn.children}
    if "__global__" in quals or fn.id == kernel.id or not device_qualified(fn, macros):
        return ""
    return text(n)


def _copy(src: bytes, node: Node, top: Callable[[Node], str]) -> str:
    return splice(src, node, top) if node.children else text(node)
