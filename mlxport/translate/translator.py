"""The rule-based CUDA -> MLX translator: a CUDA kernel becomes an MSL candidate for
``mx.fast.metal_kernel`` or a CUDA-body candidate for ``mx.fast.cuda_kernel``.

`translate` reads the file (mlxport.translate.reader), binds the kernel's pointers and scalars to a
task's inputs, outputs and params, evaluates the host launch (`<<<grid, block, smem>>>`) into
expressions over the inputs, and rewrites the code (mlxport.translate.msl_rules). What it cannot
translate raises `Untranslatable` naming the construct and its line, never wrong code.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field
from tree_sitter import Node

from mlxport.errors import UserError
from mlxport.expr import names_used
from mlxport.spec import KernelCandidate, KernelTask
from mlxport.translate.binding import Binder, atom
from mlxport.translate.cexpr import TYPE_SIZES, CExprError, lower, simplify, to_c, to_expr
from mlxport.translate.features import assess
from mlxport.translate.launch import LaunchPlan, find_unknown, plan_launch
from mlxport.translate.msl_rules import FnCtx, KernelFacts, MslRender, RenderError
from mlxport.translate.reader import CudaFile, CudaReadError, KernelInfo, read_cuda
from mlxport.translate.tsutil import function_name, line, parse, text, walk

__all__ = ["CudaReadError", "Translation", "Untranslatable", "translate", "translate_task"]

Target = Literal["msl", "cuda"]
# Reader feature categories with no translation rule.
_BLOCKING = {"grid_sync": "cooperative grid sync", "ptx": "inline PTX asm", "tensor_core": "wmma / mma", "cub": "cub",
             "cluster": "thread-block clusters", "dynamic_parallelism": "dynamic parallelism (kernel launch)",
             "texture": "textures", "async_copy": "async copies", "thrust": "thrust", "coop_groups":
             "cooperative groups"}
_CUDA_OK_INCLUDES = ("cuda_fp16", "cuda_bf16", "cooperative_groups", "mma.h", "cuda/")


class Untranslatable(UserError):
    """A construct the rule-based translator has no rule for, named with its line."""

    def __init__(self, construct: str, line: int, reason: str):
        self.construct = construct
        self.line = line
        self.reason = reason
        super().__init__(f"cannot translate {construct} at line {line}: {reason}")


class Translation(BaseModel):
    candidate: KernelCandidate
    notes: list[str] = Field(default_factory=list)
    bindings: dict[str, str] = Field(default_factory=dict)


def translate_task(task: KernelTask, target: Target = "msl") -> Translation:
    """Translate a suite task's own kernel.cu for its entry kernel."""
    src = task.source_text()
    if not src:
        raise UserError(f"task {task.name} has no source folder: load it with mlxport.suite")
    return translate(src, kernel=task.kernel, target=target, task=task)


def translate(source_or_cudafile: str | Path | CudaFile, *, kernel: str | None = None, target: Target = "msl",
              task: KernelTask | None = None) -> Translation:
    if target not in ("msl", "cuda"):
        raise UserError(f"unknown translation target {target!r}: use msl (Metal) or cuda (MLX's CUDA backend)")
    src = _source_text(source_or_cudafile)
    cf = source_or_cudafile if isinstance(source_or_cudafile, CudaFile) else read_cuda(src)
    try:
        return _Translator(src, cf, kernel or (task.kernel if task else None), target, task).run()
    except RenderError as e:
        raise Untranslatable(e.construct, e.line, e.reason) from None
    except CExprError as e:
        raise Untranslatable(e.what, e.line or 0, "the launch math cannot be expressed over the task's "
                             "inputs and params") from None
    except RecursionError:
        raise Untranslatable("deeply nested code", 0, "nesting exceeds the translator's limits") from None


def _source_text(s: str | Path | CudaFile) -> str:
    if isinstance(s, CudaFile):
        path = Path(s.path)
        if not path.is_file():
            raise UserError(f"CudaFile {s.path!r} has no readable source file: pass the source text instead")
        return path.read_text(errors="replace")
    if isinstance(s, Path) or (isinstance(s, str) and "\n" not in s and s.strip().endswith((".cu", ".cuh"))
                               and len(s) < 4096):
        path = Path(s)
        if not path.is_file():
            raise CudaReadError(f"{path} does not exist or is not a file: pass the path of a .cu file")
        return path.read_text(errors="replace")
    if not isinstance(s, str):
        raise CudaReadError(f"cannot read a {type(s).__name__}: pass CUDA source text or a Path")
    return s


class _Translator:
    def __init__(self, src: str, cf: CudaFile, kernel: str | None, target: Target, task: KernelTask | None):
        # the grammar does not know __align__; alignas(N) means the same and keeps byte offsets
        src = re.sub(r"__align__\((\s*\w+\s*)\)", lambda m: f"alignas({m.group(1)})  ", src)
        self.src_text = src
        self.src = src.encode("utf-8", "replace")
        self.cf = cf
        self.target = target
        self.task = task
        self.binder = Binder(task)
        self.notes: list[str] = []
        self.bindings: dict[str, str] = {}
        self.param_consts: list[tuple[str, str]] = []
        self.root = parse(self.src).root_node
        self.info = self._kernel_info(kernel)
        self.node = self._kernel_node()
        self.macros = {m.name: (m.params, m.body) for m in cf.macros}

    # ------------------------------------------------------------------ selection

    def _kernel_info(self, name: str | None) -> KernelInfo:
        kernels = [k for k in self.cf.kernels if k.specialization is None] or self.cf.kernels
        if name is None:
            if len({k.name for k in kernels}) != 1:
                raise UserError(f"the file has {len(kernels)} kernels ({', '.join(k.name for k in kernels)}): "
                                "pass --kernel NAME")
            return kernels[0]
        for k in kernels:
            if k.name == name:
                return k
        raise UserError(f"no __global__ kernel named {name!r}; kernels: {', '.join(k.name for k in kernels)}")

    def _kernel_node(self) -> Node:
        if self.info.macro:
            raise Untranslatable(f"kernel {self.info.name} defined by macro {self.info.macro}", self.info.line,
                                 "expand the macro in the source")
        for n in walk(self.root):
            if n.type != "function_definition" or not any(c.type == "__global__" for c in n.children):
                continue
            name, decl = function_name(n)
            target = decl.child_by_field_name("declarator") if decl is not None else None
            if name == self.info.name and (target is None or target.type != "template_function"):
                return n
        raise Untranslatable(f"kernel {self.info.name}", self.info.line, "its definition was not found in the source")

    def reachable(self) -> set[str]:
        by_name: dict[str, set[str]] = {}
        for d in self.cf.device_functions:
            by_name.setdefault(d.name, set()).update(d.calls)
        out, stack = set(), list(self.info.calls)
        while stack:
            cur = stack.pop()
            if cur in out:
                continue
            out.add(cur)
            stack.extend(by_name.get(cur, set()))
        return out

    def check_grid_sync(self, helpers: set[str]) -> None:
        """`g.sync()` on a grid group (the reader takes any `.sync()` for a block barrier)."""
        fns = [self.node] + [n for defs in self.helper_nodes(helpers).values() for n in defs]
        for fn in fns:
            grids = set()
            for n in walk(fn):
                if n.type == "init_declarator" and re.search(r"this_grid|this_multi_grid",
                                                             text(n.child_by_field_name("value"))):
                    grids.add(text(n.child_by_field_name("declarator")))
                elif n.type == "declaration" and "grid_group" in text(n.child_by_field_name("type")):
                    grids.update(text(d).split("=")[0].strip() for d in n.children_by_field_name("declarator"))
                elif n.type == "call_expression":
                    f = n.child_by_field_name("function")
                    if f is not None and f.type == "field_expression" and text(f.child_by_field_name("field")) == \
                            "sync" and (text(f.child_by_field_name("argument")) in grids or
                                        "grid" in text(f.child_by_field_name("argument"))):
                        raise Untranslatable(f"cooperative grid sync ({text(n)})", line(n),
                                             "Metal has no grid-wide barrier: split the kernel into several "
                                             "dispatches")

    def check_features(self, helpers: set[str]) -> None:
        infos = [self.info] + [d for d in self.cf.device_functions if d.name in helpers]
        cats = {f.name: f.category for k in infos for f in k.features}
        order = list(_BLOCKING)
        rows = sorted((r for k in infos for r in assess(k)), key=lambda r: (
            order.index(cats.get(re.sub(r"\(.*", "", r.feature), "")) if cats.get(re.sub(r"\(.*", "", r.feature))
            in order else len(order), r.line))
        for r in rows:
            feat = re.sub(r"\(.*", "", r.feature)
            cat = cats.get(feat, "")
            if cat in _BLOCKING:
                raise Untranslatable(f"{_BLOCKING[cat]} ({r.feature})", r.line, r.reason or "no Metal equivalent")
            if feat in ("constant_memory", "device_global"):
                raise Untranslatable(f"{feat.replace('_', ' ')} ({r.feature})", r.line, r.reason or
                                     "globals do not exist in metal_kernel bodies: pass the data as an input")
            if r.needs_rewrite and cat == "atomic" and self.target == "msl":
                raise Untranslatable(r.feature, r.line, r.reason)

    # ------------------------------------------------------------------ main

    def run(self) -> Translation:
        helpers = self.reachable()
        self.check_grid_sync(helpers)
        self.check_features(helpers)
        ports = self.ports = self.bind_pointers()
        self.dry_render(helpers, ports)
        plan = self.plan()
        template, block_names = self.templates(plan)
        scalars = self.bind_scalars(plan)
        grid, tg = self.grid(plan, block_names)
        facts = self.facts(ports)
        dynamic, shared_memory = self.dynamic_shared(plan, template, facts)
        if self.target == "msl":
            header, body = self.render_msl(helpers, facts, scalars, block_names, ports)
        else:
            header, body = self.render_cuda(facts, scalars, ports)
        inputs = [t for p, t in ports["in"]] + [n for n in scalars["inputs"] if n not in [t for _, t in ports["in"]]]
        params = set(self.binder.params)
        for e in [*grid, *tg, *template.values(), shared_memory]:
            for n in sorted(names_used(e) if isinstance(e, str) else set()):
                if n in params and n not in inputs:
                    inputs.append(n)
                    self.notes.append(f"param {n} is passed as an input because the launch depends on it")
        outputs = [t for _, t in ports["out"]]
        cand = KernelCandidate(
            language=self.target, name=re.sub(r"\W", "_", self.info.name), source=body, header=header,
            input_names=inputs, output_names=outputs, output_shapes=[self.output_shape(o) for o in outputs],
            output_dtypes=[self.output_dtype(o) for o in outputs], grid=grid, threadgroup=tg, template=template,
            atomic_outputs=facts.atomic and self.target == "msl", init_value=0.0 if facts.atomic else None,
            shared_memory=shared_memory if self.target == "cuda" else 0)
        if dynamic:
            self.notes.append(dynamic)
        return Translation(candidate=cand, notes=self.notes, bindings=self.bindings)

    # ------------------------------------------------------------------ binding

    def bind_pointers(self) -> dict[str, list[tuple[str, str]]]:
        ports: dict[str, list[tuple[str, str]]] = {"in": [], "out": [], "rw": []}
        taken: set[str] = set()
        for p in self.info.params:
            if not (p.is_pointer or p.is_reference):
                continue
            if p.is_reference:
                raise Untranslatable(f"reference parameter `{p.name}`", self.info.line, "kernels take buffers "
                                     "and scalars only")
            if not p.read and not p.written:
                self.notes.append(f"pointer `{p.name}` is unused and dropped")
                continue
            if self.task is None:
                name = p.name
            else:
                name = self.binder.tensor(p.name, p.written and not p.read, taken)
                if name is None and p.written and p.read:
                    name = self.binder.tensor(p.name, False, taken)
                if name is None:
                    pool = [t.name for t in (self.binder.outputs if p.written else self.binder.inputs)
                            if t.name not in taken]
                    if len(pool) == 1 or (pool and p.written is False):
                        name = pool[0]
                if name is None:
                    raise Untranslatable(f"pointer parameter `{p.name}`", self.info.line,
                                         "no task input or output matches it by name")
            taken.add(name)
            if p.written and p.read:
                out = self.binder.output_for_rw(name, taken) if self.task else f"{name}_out"
                if out is None:
                    raise Untranslatable(f"read-write pointer `{p.name}`", self.info.line,
                                         "the task has no output for its written values")
                taken.add(out)
                ports["in"].append((p.name, name))
                ports["out"].append((p.name, out))
                ports["rw"].append((p.name, out))
                self.bindings[p.name] = f"{name} (read) / {out} (written)"
                self.notes.append(f"`{p.name}` is read and written: reads come from input {name}, writes go to "
                                  f"output {out} (assumes each element is read before it is overwritten)")
            elif p.written:
                ports["out"].append((p.name, name))
                self.bindings[p.name] = name
            else:
                ports["in"].append((p.name, name))
                self.bindings[p.name] = name
        if self.task is not None:
            missing = [t.name for t in self.task.outputs if t.name not in taken]
            if missing:
                raise Untranslatable(f"task output {missing[0]}", self.info.line, "no kernel parameter writes it")
        if not ports["out"]:
            raise Untranslatable(f"kernel {self.info.name}", self.info.line, "it writes no pointer parameter")
        return ports

    def type_size(self, name: str) -> ast.expr | None:
        for tp in self.info.template_params:
            if tp.kind == "typename" and tp.name == name:
                t = self.typename_tensor(name)
                return atom(f"{t}.itemsize") if t else None
        host_t = self._host_typenames.get(name) if hasattr(self, "_host_typenames") else None
        if host_t:
            return self.type_size(host_t)
        return None

    def typename_tensor(self, tname: str) -> str | None:
        for p in self.info.params:
            base = re.sub(r"\b(const|volatile|__restrict__|__restrict)\b", "", p.base_type).strip()
            if base == tname and (p.is_pointer or p.is_reference):
                t = self.bindings.get(p.name, "").split(" ")[0]
                src = self.binder.dtype_source(t) if self.task else t
                if src:
                    return src
        return None

    def plan(self) -> LaunchPlan | None:
        try:
            sites_typenames = {}
            for s in self.cf.launches:
                if s.kernel == self.info.name:
                    for tp, arg in zip(self.info.template_params, s.template_args, strict=False):
                        if tp.kind == "typename":
                            sites_typenames[arg.strip()] = tp.name
            self._host_typenames = sites_typenames
            plan = plan_launch(self.cf, self.root, self.info, self.binder, self.type_size)
        except CExprError as e:
            raise Untranslatable(e.what, e.line, "the launch math cannot be expressed over the task's inputs "
                                 "and params") from None
        if plan is None:
            raise Untranslatable(f"kernel {self.info.name}", self.info.line, "the file has no launch of it, so "
                                 "the grid and block sizes are unknown")
        self.notes.extend(plan.notes)
        return plan

    def expr(self, e: ast.expr | None, what: str, ln: int, want_bool: bool = False) -> str | int | bool:
        bad = find_unknown(e)
        if bad is not None:
            raise Untranslatable(bad.what, bad.line or ln, f"needed for {what}, and it cannot be expressed over "
                                 "the task's inputs and params")
        try:
            return to_expr(lower(e, want_bool=want_bool))
        except CExprError as err:
            raise Untranslatable(err.what, ln, f"needed for {what}") from None

    def templates(self, plan: LaunchPlan) -> tuple[dict[str, str | int | bool], list[str | int]]:
        template: dict[str, str | int | bool] = {}
        for tp in self.info.template_params:
            if tp.kind == "typename":
                t = self.typename_tensor(tp.name)
                if t is None:
                    raise Untranslatable(f"template parameter {tp.name}", self.info.line,
                                         "no kernel pointer of this type is bound to a task input")
                template[tp.name] = f"{t}.dtype"
            elif tp.kind == "template":
                raise Untranslatable(f"template template parameter {tp.name}", self.info.line, "not supported")
            else:
                value = plan.targs.get(tp.name)
                if value is None and tp.default:
                    value = ast.parse(tp.default, mode="eval").body if tp.default.isdigit() else None
                if value is None:
                    raise Untranslatable(f"template parameter {tp.name}", self.info.line, "the launch does not set it")
                got = self.expr(value, f"template parameter {tp.name}", plan.line, tp.kind == "bool")
                if tp.kind == "bool" and isinstance(got, str) and got in self.binder.params:
                    # backends see params as 0-d arrays, so a template cannot read one: a body constant can
                    self.param_consts.append((tp.name, got))
                    self.bindings[f"template {tp.name}"] = got
                    self.notes.append(f"template bool {tp.name} follows param {got}: it became a body constant "
                                      f"`const bool {tp.name} = {got};`")
                    continue
                template[tp.name] = got
            self.bindings[f"template {tp.name}"] = str(template[tp.name])
        block: list[str | int] = []
        used = set(re.findall(r"\w+", self.src_text))
        for axis, e in zip("XYZ", plan.threads, strict=True):
            v = self.expr(e, f"block size {axis.lower()}", plan.line)
            if isinstance(v, int):
                block.append(v)
                continue
            same = [k for k, tv in template.items() if tv == v]
            name = same[0] if same else _fresh(f"BLOCK_DIM_{axis}", used | set(template))
            template[name] = v
            block.append(name)
            self.notes.append(f"blockDim.{axis.lower()} fixed at the launch's block size as template {name} = {v}")
        for axis, v in zip("xyz", block, strict=True):
            if isinstance(v, int) and v != 1 and self.target == "msl":
                self.notes.append(f"blockDim.{axis} fixed to {v} (the launch's block size)")
        return template, block

    def bind_scalars(self, plan: LaunchPlan) -> dict:
        out: dict = {"inputs": [], "consts": []}
        for p in self.info.params:
            if p.is_pointer or p.is_reference:
                continue
            value = plan.kargs.get(p.name) if plan else None
            if isinstance(value, CExprError) or value is None:
                value = self.binder.scalar(p.name)
            if value is None and self.task is None:
                value = ast.Name(p.name)
            if value is None:
                raise Untranslatable(f"scalar parameter `{p.name}`", self.info.line,
                                     "no task param or input dimension matches it")
            bad = find_unknown(value)
            if bad is not None:
                raise Untranslatable(bad.what, bad.line, f"needed for kernel parameter `{p.name}`")
            value = simplify(value)
            params = set(self.binder.params) if self.task else {p.name}
            if isinstance(value, ast.Name) and value.id in params:
                out["inputs"].append(value.id)
                out["consts"].append((p, value, value.id))
                self.bindings[p.name] = value.id
                continue
            try:
                lowered = lower(value, want_bool=p.base_type == "bool")
            except CExprError as e:
                raise Untranslatable(e.what, plan.line, f"needed for kernel parameter `{p.name}`") from None
            for n in ast.walk(lowered):
                if isinstance(n, ast.Name) and n.id in params and n.id not in out["inputs"]:
                    out["inputs"].append(n.id)
            out["consts"].append((p, lowered, None))
            self.bindings[p.name] = ast.unparse(lowered)
        return out

    def grid(self, plan: LaunchPlan, block: list[str | int]) -> tuple[list, list]:
        grid, tg = [], []
        for axis, (b, t) in enumerate(zip(plan.blocks, block, strict=True)):
            nb = self.expr(b, f"grid size {'xyz'[axis]}", plan.line)
            nb_ast = ast.parse(str(nb), mode="eval").body
            t_ast = ast.Constant(t) if isinstance(t, int) else ast.Name(t)
            grid.append(to_expr(simplify(ast.BinOp(nb_ast, ast.Mult(), t_ast))))
            tg.append(t)
        self.notes.append("grid = blocks x block size in threads (MLX counts threads), so every threadgroup is "
                          "full and gridDim = threadgroups_per_grid")
        return grid, tg

    def dry_render(self, helpers: set[str], ports: dict) -> None:
        """Render once before the launch analysis, so code constructs are named before launch math."""
        if self.target != "msl":
            return
        facts = KernelFacts(inputs={p for p, _ in ports["in"]}, outputs={p for p, _ in ports["out"]},
                            rw={p: o for p, o in ports["rw"]})
        infos = [self.info] + [d for d in self.cf.device_functions if d.name in helpers]
        facts.atomic = any(f.category == "atomic" for k in infos for f in k.features)
        facts.dynamic = {s.name: "1" for k in infos for s in k.shared if s.dynamic}
        notes, self.notes = self.notes, []
        try:
            self.render_msl(helpers, facts, {"inputs": [], "consts": []}, [1, 1, 1], ports)
        finally:
            self.notes = notes

    def facts(self, ports: dict) -> KernelFacts:
        facts = KernelFacts(inputs={p for p, _ in ports["in"]}, outputs={p for p, _ in ports["out"]},
                            rw={p: o for p, o in ports["rw"]})
        infos = [self.info] + [d for d in self.cf.device_functions if d.name in self.reachable()]
        facts.atomic = any(f.category == "atomic" for k in infos for f in k.features)
        if facts.atomic and self.target == "msl":
            for _, t in ports["out"]:
                spec = self.binder.spec(t)
                dtypes = {spec.resolve_dtype(d) for d in (self.task.dtypes if self.task else ["float32"])} \
                    if spec else {"float32"}
                bad = dtypes - {"float32", "int32", "uint32"}
                if bad:
                    raise Untranslatable(f"atomic output {t}", self.info.line,
                                         f"Metal atomics need float32/int32/uint32 outputs, not {sorted(bad)[0]}")
            self.notes.append("atomics on outputs: atomic_outputs=true (MLX makes every output atomic), "
                              "init_value=0 (the kernel accumulates into zeroed outputs)")
        if facts.rw or facts.atomic:
            facts.barrier_flags = "mem_flags::mem_device | mem_flags::mem_threadgroup"
        if self.task is not None and not any(tp.kind == "typename" for tp in self.info.template_params):
            floats = [p for p in self.info.params if p.is_pointer and re.sub(
                r"\b(const|__restrict__)\b", "", p.base_type).strip() == "float"]
            specs = [self.binder.spec(self.bindings.get(p.name, "").split(" ")[0]) for p in floats]
            float_only = floats and all(s is not None and s.dtype == "T" for s in specs) and \
                set(self.task.dtypes) - {"float32"}
            vectors = [f for f in self.info.features if f.category == "vector"]
            if float_only and self.target == "cuda" and vectors:
                # MLX passes __half/__nv_bfloat16 pointers for 16-bit dtypes: a float4 view of them reads
                # the wrong bytes (seen on an H200: illegal addresses and garbage in float16/bfloat16).
                raise Untranslatable(f"{vectors[0].name} view of a float-only kernel's buffers", vectors[0].line,
                                     f"the task also runs {', '.join(sorted(set(self.task.dtypes) - {'float32'}))}, "
                                     "whose CUDA buffers are 16-bit")
            if float_only and self.target == "msl":
                name = _fresh("T", set(re.findall(r"\w+", self.src_text)))
                facts.generic_float = name
                self._generic = (name, specs[0].name)
                self.notes.append(f"the kernel is written for float but the task runs {', '.join(self.task.dtypes)}: "
                                  f"float became the template type {name} = {specs[0].name}.dtype (arithmetic "
                                  "happens in that type)")
        return facts

    def dynamic_shared(self, plan: LaunchPlan, template: dict, facts: KernelFacts) -> tuple[str, str | int]:
        decls = [s for s in self.info.shared if s.dynamic]
        for d in self.cf.device_functions:
            if d.name in self.reachable():
                decls += [s for s in d.shared if s.dynamic]
        if getattr(self, "_generic", None):
            template[self._generic[0]] = f"{self._generic[1]}.dtype"
        if not decls:
            return "", 0
        if plan.smem is None:
            raise Untranslatable(f"extern __shared__ {decls[0].name}[]", decls[0].line,
                                 "the launch passes no dynamic shared-memory size")
        smem = self.expr(plan.smem, "the dynamic shared-memory size", plan.line)
        if len({d.name for d in decls}) > 1:
            raise Untranslatable(f"extern __shared__ {decls[1].name}[]", decls[1].line,
                                 "several dynamic shared arrays alias one buffer")
        d = decls[0]
        size = TYPE_SIZES.get(d.type)
        elem = None
        if size is None:
            tsz = self.type_size(d.type)
            if tsz is None:
                raise Untranslatable(f"extern __shared__ {d.type} {d.name}[]", d.line, "unknown element size")
            elem = ast.unparse(tsz)
        count = self.expr(ast.BinOp(plan.smem, ast.FloorDiv(), ast.Constant(size) if size else atom(elem)),
                          "the dynamic shared-memory size", plan.line)
        if self.target == "cuda":
            return f"extern __shared__ {d.name}[]: shared_memory = {smem} bytes, as the launch passes", smem
        if isinstance(count, int):
            facts.dynamic[d.name] = str(count)
            note = f"extern __shared__ {d.name}[] sized from the launch: {count} elements"
        else:
            name = _fresh(f"SMEM_{d.name.upper()}", set(re.findall(r"\w+", self.src_text)) | set(template))
            template[name] = count
            facts.dynamic[d.name] = name
            note = f"extern __shared__ {d.name}[] sized from the launch's {smem} bytes: template {name} = {count}"
        return note, smem

    def output_shape(self, name: str) -> list[str | int] | str:
        spec = self.binder.spec(name)
        if spec is None:
            ins = [t for _, t in self.ports["in"]]
            src = self.binder.inputs[0].name if self.binder.inputs else (ins[0] if ins else None)
            if src is None:
                raise Untranslatable(f"output {name}", self.info.line, "its shape is unknown without a task")
            self.notes.append(f"output {name} assumed to have the shape of the first input")
            return f"{src}.shape"
        out: list[str | int] = []
        for d in spec.shape:
            if isinstance(d, int):
                out.append(d)
                continue
            tree = ast.parse(d, mode="eval").body

            def sub(n: ast.expr, d: str = d) -> ast.expr:
                if isinstance(n, ast.Name):
                    got = self.binder.dim(n.id)
                    if got is None:
                        raise Untranslatable(f"output {name} dimension {d}", self.info.line,
                                             "the dimension is not a dimension of any input")
                    return got
                for f, v in ast.iter_fields(n):
                    if isinstance(v, ast.expr):
                        setattr(n, f, sub(v))
                    elif isinstance(v, list):
                        setattr(n, f, [sub(x) if isinstance(x, ast.expr) else x for x in v])
                return n

            out.append(to_expr(simplify(sub(tree))))
        return out

    def output_dtype(self, name: str) -> str:
        if self.task is None:
            return "float32"
        got = self.binder.dtype_expr(name)
        if got is None:
            raise Untranslatable(f"output {name}", self.info.line, "its dtype cannot be expressed")
        return got

    # ------------------------------------------------------------------ code

    def helper_nodes(self, helpers: set[str]) -> dict[str, list[Node]]:
        out: dict[str, list[Node]] = {}
        for n in walk(self.root):
            if n.type != "function_definition" or any(c.type == "__global__" for c in n.children):
                continue
            if not any(c.type in ("__device__",) for c in n.children):
                continue
            name, _ = function_name(n)
            if name in helpers:
                holder = n.parent if n.parent is not None and n.parent.type == "template_declaration" else n
                out.setdefault(name, []).append(holder)
        return out

    def prologue_consts(self, scalars: dict, cuda: bool) -> tuple[list[str], list[str]]:
        """Body-local constants for scalar params: (outer lines, lines inside the body's block)."""
        outer, inner = [], []
        for name, param in self.param_consts:
            outer.append(f"const bool {name} = {param}[0];" if cuda else f"const bool {name} = {param};")
            if param not in scalars["inputs"]:
                scalars["inputs"].append(param)
        for p, value, direct in scalars["consts"]:
            ctype = self.ctype(p.type)
            if direct is not None:
                if direct == p.name and not cuda:
                    continue
                src = f"{direct}[0]" if cuda else direct
                if direct == p.name:
                    outer.append(f"const {ctype} mlxport_{p.name} = {src};")
                    inner.append(f"const {ctype} {p.name} = mlxport_{p.name};")
                else:
                    outer.append(f"const {ctype} {p.name} = {src};")
                continue
            c = to_c(value, lambda t, i: f"{t}_shape[{i}]", self.size_c,
                     lambda n: f"{n}[0]" if cuda else n, "" if cuda else "metal::")
            outer.append(f"const {ctype} {p.name} = {c};")
        return outer, inner

    def size_c(self, tensor: str) -> str:
        nd = self.binder.ndim(tensor)
        if nd is None:
            raise Untranslatable(f"{tensor}.size", self.info.line, "unknown rank")
        return "(" + " * ".join(f"size_t({tensor}_shape[{i}])" for i in range(nd)) + ")" if nd else "1"

    def ctype(self, t: str) -> str:
        t = re.sub(r"\b(const|__restrict__)\b", "", t).strip()
        if self.target == "msl":
            from mlxport.translate.msl_rules import TYPE_MAP
            return TYPE_MAP.get(t, t)
        return t

    def aliases(self, ports: dict, cuda: bool) -> list[str]:
        lines = []
        for p, t in ports["in"]:
            if p != t:
                lines.append(f"auto {p} = {t};")
        for p, t in ports["out"]:
            if p not in dict(ports["rw"]) and p != t:
                lines.append(f"auto {p} = {t};")
        return lines

    def render_msl(self, helpers: set[str], facts: KernelFacts, scalars: dict, block: list, ports: dict
                   ) -> tuple[str, str]:
        nodes = self.helper_nodes(helpers)
        r = MslRender(self.src, self.macros, nodes, facts, self.notes)
        ctx = FnCtx("kernel", name=self.info.name)
        for p in self.info.params:
            if p.is_pointer:
                ctx.spaces[p.name] = frozenset({"device", "constant"}) if p.name in facts.inputs and \
                    p.name not in facts.rw else frozenset({"device"})
        for out in facts.rw.values():
            ctx.spaces[out] = frozenset({"device"})
        body = r.render(self.node.child_by_field_name("body"), ctx)
        # helpers may add variants of helpers they call: render until no new variant appears
        rendered: dict[tuple[str, int, tuple | None], str] = {}
        for _ in range(16):
            before = {k: set(v) for k, v in r.variants.items()}
            rendered = {}
            for name, defs in nodes.items():
                variants = sorted(r.variants.get(name, set()) or {None}, key=str)
                for d in defs:
                    for v in sorted({r.variant_for(d, v) for v in variants}, key=str):
                        rendered[(name, d.id, v)] = r.render_helper(d, v)
            if {k: set(v) for k, v in r.variants.items()} == before:
                break
        if "blockDim" not in r.used_builtins:
            self.notes = [n for n in self.notes if not n.startswith("blockDim.")]
        header = _tidy(self.msl_header(r, nodes, rendered))
        prologue = self.kernel_prologue(r, block, scalars, ports, facts)
        return header, _tidy("\n".join(prologue) + "\n" + body + "\n")

    def kernel_prologue(self, r: MslRender, block: list, scalars: dict, ports: dict, facts: KernelFacts) -> list[str]:
        lines = []
        b = r.used_builtins
        if "threadIdx" in b:
            lines.append("const uint3 threadIdx = thread_position_in_threadgroup;")
        if "blockIdx" in b:
            lines.append("const uint3 blockIdx = threadgroup_position_in_grid;")
        if "blockDim" in b:
            lines.append(f"const uint3 blockDim = uint3({', '.join(str(x) for x in block)});")
        if "gridDim" in b:
            lines.append("const uint3 gridDim = threadgroups_per_grid;")
        lines += self.aliases(ports, cuda=False)
        outer, inner = self.prologue_consts(scalars, cuda=False)
        lines += outer + inner
        for owner, call in r.hoisted_calls.items():
            for o, var, decl in r.helper_shared.get(owner, []):
                if o != owner:
                    continue
                lines.append(self.hoisted_decl(r, owner, var, decl, call))
        return lines

    def hoisted_decl(self, r: MslRender, owner: str, var: str, decl: Node, call: Node) -> str:
        ctx = FnCtx("helper", name=owner)
        ty = r.render(decl.child_by_field_name("type"), ctx)
        d = next(x for x in decl.children_by_field_name("declarator")
                 if _declarator_name(x) == var)
        dims = []
        x = d
        while x is not None and x.type == "array_declarator":
            size = x.child_by_field_name("size")
            dims.insert(0, r.render(size, ctx) if size is not None else "")
            x = x.child_by_field_name("declarator")
        fn = call.child_by_field_name("function")
        targs = fn.child_by_field_name("arguments") if fn is not None and fn.type == "template_function" else None
        tparams = self.helper_template_params(owner)
        subst = dict(zip(tparams, [text(a) for a in targs.named_children], strict=False)) if targs else {}
        out_dims = []
        for dim in dims:
            for k in tparams:
                if re.search(rf"\b{k}\b", dim) and k not in subst:
                    raise Untranslatable(f"__shared__ {var} in {owner}()", line(decl),
                                         f"its size uses template parameter {k} that the kernel's call does not set")
            out_dims.append(re.sub(r"\b\w+\b", lambda m: f"({subst[m.group()]})" if m.group() in subst else m.group(),
                                   dim))
        self.notes.append(f"__shared__ {var} of {owner}() hoisted into the kernel (threadgroup memory is declared in "
                          "kernel scope) and passed to it")
        return f"threadgroup {ty} {owner}_{var}{''.join(f'[{x}]' for x in out_dims)};"

    def helper_template_params(self, owner: str) -> list[str]:
        for d in self.cf.device_functions:
            if d.name == owner and d.template_params:
                return [t.name for t in d.template_params]
        return []

    def msl_header(self, r: MslRender, nodes: dict[str, list[Node]], rendered: dict) -> str:
        ids = {d.id: name for name, defs in nodes.items() for d in defs}
        kernel_ids = {self.node.id}
        if self.node.parent is not None and self.node.parent.type == "template_declaration":
            kernel_ids.add(self.node.parent.id)
        helper_names = set(nodes)
        ctx = FnCtx("helper")

        def top(n: Node) -> str | None:
            t = n.type
            if n.id in ids:
                return "\n".join(v for (name, did, _), v in rendered.items() if did == n.id)
            if t in ("preproc_include", "template_instantiation", "comment"):
                return ""
            if t in ("preproc_def", "preproc_function_def"):
                return self.msl_macro(n)
            if t in ("function_definition", "template_declaration"):
                fn = n if t == "function_definition" else next((c for c in walk(n) if c.type == "function_definition"),
                                                               None)
                if fn is None:
                    return self.top_declaration(n, r, ctx, helper_names)
                return ""
            if t == "declaration":
                return self.top_declaration(n, r, ctx, helper_names)
            if t in ("preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "namespace_definition",
                     "declaration_list", "linkage_specification"):
                return r.copy(n, ctx, top)
            if t in ("struct_specifier", "class_specifier", "type_definition", "alias_declaration",
                     "using_declaration", "static_assert_declaration", "enum_specifier", "expression_statement"):
                return r.render(n, ctx)
            return r.render(n, ctx) if n.is_named and t != "ERROR" else text(n)

        out = r.copy(self.root, ctx, top)
        out = re.sub(r"\n{3,}", "\n\n", out).strip()
        helper_src = _PTR_CAST if "mlxport_ptr_cast" in out + "".join(rendered.values()) or r.ptr_casts else ""
        guards = "".join(f"#ifndef {k}\n#define {k} {v}\n#endif\n" for k, v in _FLOAT_MACROS.items()
                         if re.search(rf"\b{k}\b", out + self.src_text))
        return (helper_src + guards + "\n" + out + "\n").lstrip()

    def top_declaration(self, n: Node, r: MslRender, ctx: FnCtx, helpers: set[str]) -> str:
        fdecl = next((c for c in walk(n) if c.type == "function_declarator"), None)
        if fdecl is not None:
            name = text(fdecl.child_by_field_name("declarator")).split("<")[0].strip()
            if name not in helpers:
                return ""
            return r.render(n, ctx)
        quals = {text(c) for c in walk(n) if c.type in ("type_qualifier", "storage_class_specifier")}
        if quals & {"__constant__", "__device__", "__managed__", "__shared__"}:
            return ""
        body = r.render(n, ctx)
        if quals & {"const", "constexpr"}:
            body = "constant " + re.sub(r"\bconstexpr\b\s*", "", body).replace("const ", "", 1)
        return body

    def msl_macro(self, n: Node) -> str:
        body = text(n)
        for bad in ("__shfl", "atomic", "asm", "__ballot"):
            if bad in body and n.type == "preproc_function_def":
                raise Untranslatable(f"macro `{_first_line(body)}`", line(n), f"it uses {bad}, which macros "
                                         "cannot carry through the translation (expand the macro)")
        for k, v in {"__syncthreads()": "threadgroup_barrier(mem_flags::mem_threadgroup)", "__forceinline__": "inline",
                     "__device__": "", "__restrict__": ""}.items():
            body = body.replace(k, v)
        body = re.sub(r"\b(__half|__nv_bfloat16|__half2)\b", lambda m: {"__half": "half", "__half2": "half2",
                                                                        "__nv_bfloat16": "bfloat"}[m.group()], body)
        return body

    # ------------------------------------------------------------------ CUDA body

    def render_cuda(self, facts: KernelFacts, scalars: dict, ports: dict) -> tuple[str, str]:
        r = _CudaRender(self.src, self.macros, {}, facts, self.notes)
        ctx = FnCtx("kernel", name=self.info.name)
        body = r.render(self.node.child_by_field_name("body"), ctx)
        outer, inner = self.prologue_consts(scalars, cuda=True)
        lines = self.aliases(ports, cuda=True) + outer
        if inner:
            body = "{\n" + "\n".join(inner) + "\n" + body + "\n}"
        header = self.cuda_header()
        self.notes.append("CUDA body: the kernel body runs as written; scalars come from shapes (x_shape) or 0-d "
                          "inputs (name[0]); template arguments are body-local constants")
        return header, "\n".join(lines) + "\n" + body + "\n"

    def cuda_header(self) -> str:
        kernel_ids = {self.node.id}
        keep_kernels = False

        def top(n: Node) -> str | None:
            t = n.type
            if t == "preproc_include":
                path = text(n.child_by_field_name("path")).strip('<>"')
                return text(n) if path.startswith(_CUDA_OK_INCLUDES) else ""
            if t == "template_instantiation":
                return ""
            if t in ("function_definition", "template_declaration"):
                fn = n if t == "function_definition" else next((c for c in n.named_children
                                                                if c.type == "function_definition"), None)
                if fn is None:
                    inner = next((c for c in n.named_children if c.type == "template_declaration"), None)
                    return top(inner) if inner is not None else text(n)
                quals = {c.type for c in fn.children}
                if "__global__" in quals or fn.id in kernel_ids or keep_kernels:
                    return ""
                if "__device__" not in quals:
                    return ""
                return text(n)
            if t == "declaration":
                fdecl = next((c for c in walk(n) if c.type == "function_declarator"), None)
                quals = {c.type for c in walk(n)}
                if fdecl is not None and "__device__" not in quals and "__global__" not in quals:
                    return ""
                if fdecl is not None and "__global__" in quals:
                    return ""
                return text(n)
            if t in ("preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "namespace_definition",
                     "declaration_list", "linkage_specification"):
                return _copy(self.src, n, top)
            return text(n)

        out = _copy(self.src, self.root, top)
        out = re.sub(r"\n{3,}", "\n\n", out).strip()
        guards = "".join(f"#ifndef {k}\n#define {k} {v}\n#endif\n" for k, v in _FLOAT_MACROS.items()
                         if re.search(rf"\b{k}\b", out + text(self.node)))
        return guards + out + "\n"


class _CudaRender(MslRender):
    """CUDA stays CUDA: only read-write pointers are split (reads from the input, writes to `_out`)."""

    def rule(self, node: Node, ctx: FnCtx) -> str | None:
        if node.type in ("assignment_expression", "update_expression"):
            return self.assignment(node, ctx)
        return None

    def leaf(self, node: Node, ctx: FnCtx) -> str:
        return text(node)

    def assignment(self, node: Node, ctx: FnCtx) -> str | None:
        saved = self.facts.atomic
        self.facts.atomic = False
        try:
            return super().assignment(node, ctx)
        finally:
            self.facts.atomic = saved


def _copy(src: bytes, node: Node, skip) -> str:
    if not node.children:
        return text(node)
    out, pos = [], node.start_byte
    for c in node.children:
        out.append(src[pos:c.start_byte].decode("utf-8", "replace"))
        got = skip(c)
        out.append(got if got is not None else _copy(src, c, skip))
        pos = c.end_byte
    out.append(src[pos:node.end_byte].decode("utf-8", "replace"))
    return "".join(out)


def _declarator_name(d: Node) -> str:
    from mlxport.translate.msl_rules import _declared_name
    return _declared_name(d)


def _tidy(code: str) -> str:
    # a `#pragma unroll` whose loop became a single SIMD-group call would not compile
    return re.sub(r"#pragma unroll[^\n]*\n(\s*)(?=[\w.]+ = simd_\w+\()", r"\1", code)


def _fresh(name: str, used: set[str]) -> str:
    out, i = name, 1
    while out in used:
        out = f"{name}_{i}"
        i += 1
    return out


def _first_line(s: str) -> str:
    return s.strip().splitlines()[0][:60]


_FLOAT_MACROS = {"FLT_MAX": "3.402823466e+38F", "FLT_MIN": "1.175494351e-38F", "FLT_EPSILON": "1.192092896e-07F"}

_PTR_CAST = """\
// Pointer casts that keep the operand's address space (CUDA casts name none).
template <typename U, typename P> inline device U* mlxport_ptr_cast(device P* p) { return (device U*)(p); }
template <typename U, typename P> inline const device U* mlxport_ptr_cast(const device P* p) {
  return (const device U*)(p);
}
template <typename U, typename P> inline const constant U* mlxport_ptr_cast(const constant P* p) {
  return (const constant U*)(p);
}
template <typename U, typename P> inline threadgroup U* mlxport_ptr_cast(threadgroup P* p) {
  return (threadgroup U*)(p);
}
template <typename U, typename P> inline const threadgroup U* mlxport_ptr_cast(const threadgroup P* p) {
  return (const threadgroup U*)(p);
}
template <typename U, typename P> inline thread U* mlxport_ptr_cast(thread P* p) { return (thread U*)(p); }
template <typename U, typename P> inline const thread U* mlxport_ptr_cast(const thread P* p) {
  return (const thread U*)(p);
}
"""
