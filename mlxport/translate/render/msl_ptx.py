"""Inline PTX in MSL: the subset the CPU executor interprets (``backends/cuda_cpu/ptx.py`` reads
it; this writes what it read). Each operand and declared register is a ``ulong`` holding its
bits; a load or store goes through its pointer operand cast to the element type (the cast keeps
the pointer's address space), a predicate is a ``bool`` and a guard an ``if``, ``%laneid`` the
SIMD lane. Outputs are written after the statement, as GCC's operands are."""

from __future__ import annotations

import re

from mlxport.backends.cuda_cpu.ptx import (
    SUBSET,
    Arg,
    Instruction,
    Program,
    Unsupported,
    parse_asm,
    reg_name,
    type_bits,
    write,
)
from mlxport.cuda_syntax import ancestors, line
from mlxport.translate.render.base import FnCtx, RenderError
from mlxport.translate.render.msl_warp import lane_id

_CONDITIONALS = ("preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "preproc_elifdef")
_UNSIGNED = {8: "uchar", 16: "ushort", 32: "uint", 64: "ulong"}
_SIGNED = {8: "char", 16: "short", 32: "int", 64: "long"}
_FLOATS = {"f32": ("float", "uint"), "f16": ("half", "ushort"), "bf16": ("bfloat", "ushort")}
_ROUND = {"rn": "rint", "rz": "trunc", "rd": "floor", "ru": "ceil"}
# a special register: (its value in MSL, the CUDA built-ins it reads)
_BUILTIN_OF = {"tid": "threadIdx", "ntid": "blockDim", "ctaid": "blockIdx", "nctaid": "gridDim"}


def asm_msl(r, node, ctx: FnCtx) -> str:
    """MSL for one ``asm`` statement, or a RenderError naming the instruction outside the
    subset."""
    try:
        program = parse_asm(node, lambda n: r.render(n, ctx))
        return _Writer(r, program, ctx).statement()
    except Unsupported as e:
        why = f"{e.why}: " if e.why else ""
        error = RenderError(
            f"inline PTX `{e.shown}`",
            line(node),
            f"{why}outside the subset the translator writes as MSL ({SUBSET})",
        )
        if not any(a.type in _CONDITIONALS for a in ancestors(node)):
            raise error from None
        # in a branch of an #if, which Metal's preprocessor decides as CUDA's did: a branch it
        # drops (DeepSpeed's for CUDA before 11) is no reason to refuse the kernel, and one it
        # keeps stops the compile here, naming the instruction
        return "\n#error " + re.sub(r"[^\w `.,:;%()\[\]{}+-]", " ", str(error)) + "\n"


class _Writer:
    def __init__(self, r, program: Program, ctx: FnCtx):
        self.r, self.program, self.ctx = r, program, ctx
        self.addresses = {i.address for i in program.body if i.op in ("ld", "st")}
        self.names = {}
        for i, op in enumerate(program.operands):
            self.names[i] = f"mlxport_ptx_r{op.tied if op.tied is not None else i}"

    def statement(self) -> str:
        operands = self.program.operands
        lines = ["{"]
        for i, op in enumerate(operands):
            if i in self.addresses:
                self._address_operand(i)
                continue
            if op.letter == "d" or (op.tied is not None and operands[op.tied].letter == "d"):
                raise Unsupported(f"whose operand %{i} is a double (Metal has none)")
            if op.tied is not None:
                value = _bits_in(operands[op.tied].letter, op.expr)
                lines.append(f"{self.names[i]} = {value};")
            elif op.output and not op.inout:
                lines.append(f"ulong {self.names[i]} = 0;")
            else:
                lines.append(f"ulong {self.names[i]} = {_bits_in(op.letter, op.expr)};")
        lines += [self.instruction(ins) for ins in self.program.body]
        for i, op in enumerate(operands):
            if op.output:
                lines.append(f"{op.expr} = {_bits_out(op.letter, self.names[i])};")
        return " ".join([*lines, "}"])

    def _address_operand(self, i: int) -> None:
        op = self.program.operands[i]
        if op.letter != "l" or op.output:
            raise Unsupported(f'whose address operand %{i} is not a pointer input ("l")')
        self.r.ptr_casts = True

    def instruction(self, ins: Instruction) -> str:
        return write(ins, "ulong", lambda i: "{ " + self.action(i) + " }")

    def action(self, ins: Instruction) -> str:
        if ins.op in ("ld", "st"):
            return self.memory(ins)
        if ins.op == "mov":
            bits = _UNSIGNED[type_bits(ins.type)]
            return f"{self.dst(ins.dst[0])} = ulong({bits}({self.value(ins.src[0])}));"
        if ins.op == "setp":
            a, b = (_typed(ins.type, self.value(x)) for x in ins.src)
            return f"{reg_name(ins.dst[0].name)} = {a} {ins.cmp} {b};"
        if ins.op == "cvt":
            return self.convert(ins)
        raise Unsupported("a fence outside a barrier (Metal fences only at barriers)")

    def memory(self, ins: Instruction) -> str:
        bits = type_bits(ins.type)
        signed = ins.type.startswith("s")
        elem = (_SIGNED if signed else _UNSIGNED)[bits]
        base = self.program.operands[ins.address].expr
        if ins.offset:
            base = f"mlxport_ptr_cast<uchar>({base}) + {ins.offset}"
        out = [f"auto mlxport_p = mlxport_ptr_cast<{elem}>({base});"]
        if ins.op == "ld":
            load = "ulong(long(mlxport_p[{}]))" if signed else "ulong(mlxport_p[{}])"
            out += [f"{self.dst(a)} = {load.format(j)};" for j, a in enumerate(ins.dst)]
        else:
            out += [f"mlxport_p[{j}] = {elem}({self.value(a)});" for j, a in enumerate(ins.src)]
        return " ".join(out)

    def convert(self, ins: Instruction) -> str:
        x = _typed(ins.source_type, self.value(ins.src[0]))
        d = ins.type
        if d == "f64":
            raise Unsupported("to a double (Metal has none)")
        if d in _FLOATS:
            result = f"ulong(as_type<{_FLOATS[d][1]}>({_FLOATS[d][0]}(mlxport_x)))"
        elif ins.source_type in _FLOATS:
            bits, signed = type_bits(d), d.startswith("s")
            t = (_SIGNED if signed else _UNSIGNED)[bits]
            hi = 2 ** (bits - 1) - 1 if signed else 2**bits - 1
            lo = -(2 ** (bits - 1)) if signed else 0
            y = f"{_ROUND[ins.rounding]}(mlxport_x)"
            value = (
                f"(isnan(mlxport_x) ? {t}(0) : {y} >= {float(hi)!r}f ? {t}({_literal(hi)}) : "
                f"{y} <= {float(lo)!r}f ? {t}({_literal(lo)}) : {t}({y}))"
            )
            result = f"ulong(long({value}))" if signed else f"ulong({value})"
        else:
            signed = d.startswith("s")
            t = (_SIGNED if signed else _UNSIGNED)[type_bits(d)]
            result = f"ulong(long({t}(mlxport_x)))" if signed else f"ulong({t}(mlxport_x))"
        return f"auto mlxport_x = {x}; {self.dst(ins.dst[0])} = {result};"

    def dst(self, arg: Arg) -> str:
        if arg.kind == "operand":
            if arg.index in self.addresses:
                raise Unsupported(f"writing %{arg.index}, a pointer it also reads through")
            return self.names[arg.index]
        return reg_name(arg.name)

    def value(self, arg: Arg) -> str:
        if arg.kind == "operand":
            if arg.index in self.addresses:
                raise Unsupported(f"reading the bits of %{arg.index}, a pointer")
            return self.names[arg.index]
        if arg.kind == "reg":
            return reg_name(arg.name)
        if arg.kind == "special":
            return self.special(arg.name)
        if arg.name[:2].lower() == "0f":
            return f"ulong(0x{arg.name[2:]}u)"
        if arg.name[:2].lower() == "0d":
            raise Unsupported("with a double immediate (Metal has no double)")
        try:
            number = int(arg.name.rstrip("uU"), 0)
        except ValueError:
            raise Unsupported(f"reading the immediate {arg.name}") from None
        return f"ulong({_literal(number & (2**64 - 1))})"

    def special(self, name: str) -> str:
        lane = f"ulong({lane_id(self.ctx)})"
        if name == "laneid":
            return lane
        if name.startswith("lanemask_"):
            masks = {
                "eq": "(1ul << L)",
                "lt": "((1ul << L) - 1ul)",
                "le": "((1ul << (L + 1ul)) - 1ul)",
                "gt": "~((1ul << (L + 1ul)) - 1ul)",
                "ge": "~((1ul << L) - 1ul)",
            }
            return f"({masks[name[9:]].replace('L', lane)} & 0xFFFFFFFFul)"
        reg, _, axis = name.partition(".")
        builtin = _BUILTIN_OF[reg]
        if self.ctx.kind == "kernel":
            self.r.used_builtins.add(builtin)
        return f"ulong({builtin}.{axis})"


def _literal(v: int) -> str:
    return f"{v}ul" if v >= 2**63 else f"{v}l"


def _typed(t: str, bits: str) -> str:
    """A register's bits as a value of the PTX type ``t``."""
    if t in _FLOATS:
        value, container = _FLOATS[t]
        return f"as_type<{value}>({container}({bits}))"
    if t == "f64":
        raise Unsupported("on doubles (Metal has none)")
    width = type_bits(t)
    return f"{(_SIGNED if t.startswith('s') else _UNSIGNED)[width]}({bits})"


def _bits_in(letter: str, expr: str) -> str:
    """An input operand's value as a register's bits."""
    if letter == "f":
        return f"ulong(as_type<uint>(float({expr})))"
    if letter in ("r", "h"):
        return f"ulong({'uint' if letter == 'r' else 'ushort'}({expr}))"
    return f"ulong({expr})"


def _bits_out(letter: str, reg: str) -> str:
    """An output register's bits as the value its operand is assigned."""
    if letter == "f":
        return f"as_type<float>(uint({reg}))"
    return {"r": f"uint({reg})", "h": f"ushort({reg})"}.get(letter, reg)
