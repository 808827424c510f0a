"""Inline PTX in device code as C++ the executor runs: a small, documented subset, interpreted
exactly, every memory access through the executor's checked pointers.

The subset (what real kernels' memory helpers use, DeepSpeed's and the CUDA samples'):

- ``ld`` and ``st`` of one, two or four values (``.v2``, ``.v4``) of 8 to 64 bits, in the global,
  shared or generic space, with any cache hint (``.ca .cg .cs .lu .cv .wb .wt .nc .L1:: .L2::``);
  the address is ``[%n]`` or ``[%n+imm]`` where operand n is a pointer: a checked one, so bounds,
  alignment (of the whole vector), written masks and races are judged as for C++ accesses;
- ``cvt`` between 8- to 64-bit integers, f32 and f64 (a float to an integer with one of
  ``.rni .rzi .rmi .rpi``, saturated, NaN to 0);
- ``mov`` of a register, an immediate or ``%laneid``, ``%tid``, ``%ntid``, ``%ctaid``,
  ``%nctaid``, ``%lanemask_*``; ``setp`` (eq ne lt le gt ge lo ls hi hs) into a predicate;
  ``@p`` and ``@!p`` guards; ``.reg`` declarations; ``{ }`` scopes; ``membar`` and ``fence``;
- operands ``"r" "h" "l" "f" "d" "n"``, outputs ``=`` and ``+``, inputs tied to an output
  (``"0"``), named operands; an empty template (a compiler barrier) does nothing.

Anything else (another instruction, qualifier, constraint, an address that is not a pointer)
becomes a call that stops the thread when it runs, naming the instruction: the host's own
instructions never reach the compiler, and a statement the kernel never runs does not stop it.
Outputs are written after the statement, as GCC's operands are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tree_sitter import Node

SUBSET = "ld/st of 1, 2 or 4 values through a pointer, mov, cvt, setp and predicates"
_BITS = {"r": 32, "h": 16, "l": 64, "f": 32, "d": 64, "n": 64}
_TYPES = {
    "b8": "uint8_t",
    "u8": "uint8_t",
    "s8": "int8_t",
    "b16": "uint16_t",
    "u16": "uint16_t",
    "s16": "int16_t",
    "f16": "uint16_t",
    "bf16": "uint16_t",
    "b32": "uint32_t",
    "u32": "uint32_t",
    "s32": "int32_t",
    "f32": "float",
    "f16x2": "uint32_t",
    "bf16x2": "uint32_t",
    "b64": "uint64_t",
    "u64": "uint64_t",
    "s64": "int64_t",
    "f64": "double",
}
_CACHE = {"ca", "cg", "cs", "lu", "cv", "wb", "wt", "nc", "volatile", "weak"}
_SPACES = {"global", "shared", "shared::cta"}
_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_CMP |= {"lo": "<", "ls": "<=", "hi": ">", "hs": ">="}
_AXES = ("x", "y", "z")
_SPECIAL = {"laneid": "uint64_t(::cusim::lane())"}
for _reg, _fn in (("tid", "thread_idx"), ("ntid", "block_dim"), ("ctaid", "block_idx")):
    for _a in _AXES:
        _SPECIAL[f"{_reg}.{_a}"] = f"uint64_t(::cusim::{_fn}().{_a})"
for _a in _AXES:
    _SPECIAL[f"nctaid.{_a}"] = f"uint64_t(::cusim::grid_dim().{_a})"
_ONE = "uint64_t(1)"
_MASKS = {
    "eq": f"{_ONE}<<l",
    "lt": f"({_ONE}<<l)-1",
    "le": f"({_ONE}<<(l+1))-1",
    "gt": f"~(({_ONE}<<(l+1))-1)",
    "ge": f"~(({_ONE}<<l)-1)",
}
for _m, _e in _MASKS.items():
    _SPECIAL[f"lanemask_{_m}"] = (
        f"[]{{uint64_t l=::cusim::lane(); return uint64_t({_e}) & 0xFFFFFFFFull;}}()"
    )
_IMM = re.compile(r"-?(?:0[xX][0-9a-fA-F]+|\d+)[uU]?|0[fF][0-9a-fA-F]{8}|0[dD][0-9a-fA-F]{16}")


class Unsupported(Exception):
    """What of a statement is outside the subset (a clause on the instruction, or nothing), and
    the instruction where it is known."""

    def __init__(self, why: str = "", shown: str | None = None):
        super().__init__(why)
        self.why, self.shown = why, shown


@dataclass
class Operand:
    letter: str  # the register kind: r h l f d n
    output: bool
    inout: bool
    tied: int | None  # an input tied to output n ("0")
    expr: str  # the expression, rendered
    node: Node | None = None  # the expression as written


@dataclass(frozen=True)
class Arg:
    """A value an instruction reads or writes: an operand (``name`` its number), a declared
    register, a special register (``laneid``, ``tid.x``) or an immediate (its literal)."""

    kind: str  # operand | reg | special | imm
    name: str

    @property
    def index(self) -> int:
        return int(self.name)


@dataclass
class Instruction:
    """One statement of the subset: ``op`` is ld st mov setp cvt fence reg, or a scope brace."""

    op: str
    shown: str = ""  # the statement as written, operands as %n
    guard: tuple[bool, str] | None = None  # (negated, predicate register)
    dst: list[Arg] = field(default_factory=list)  # ld's values, mov/cvt's target, setp's pred
    src: list[Arg] = field(default_factory=list)  # st's values, mov/cvt's source, setp's two
    type: str = ""  # the PTX type (u32, f32, ...); cvt's destination type
    source_type: str = ""  # cvt's source type
    rounding: str = "rn"  # cvt's rounding (rn rz rd ru)
    count: int = 1  # ld/st values
    shared: bool = False  # ld/st in the shared space
    address: int = 0  # ld/st: the pointer operand
    offset: int = 0  # ld/st: bytes past it
    cmp: str = ""  # setp's comparison, as C writes it
    regs: list[tuple[str, int]] = field(default_factory=list)  # .reg: (name, bits; 0 a pred)


@dataclass
class Program:
    """An ``asm`` statement read: its operands and its instructions in order."""

    operands: list[Operand]
    body: list[Instruction]


def parse_asm(node: Node, render) -> Program:
    """The ``asm`` statement as the subset reads it (``render`` renders an operand's expression);
    raises Unsupported naming what is outside it."""
    template = ""
    try:
        template = _literal(node.child_by_field_name("assembly_code"))
        operands, names = _operands(node, render)
        extended = bool(operands) or _extended(node)
        statements = _statements(_substituted(template, names, extended))
        return Program(operands, _parsed(statements, operands))
    except Unsupported as e:
        if e.shown is None:
            e.shown = " ".join(template.replace(";", " ").split()[:4]) or "asm"
        raise


def asm_cxx(node: Node, render, origin: str) -> str:
    """C++ for one ``asm`` statement (``render``: the rewriter's, for the operands' expressions;
    ``origin``: "line N of F"), kept on one line: what the subset says it does, or a call that
    stops the thread naming what is outside it."""
    try:
        return _program(parse_asm(node, render), origin)
    except Unsupported as e:
        why = f", {e.why}," if e.why else ""
        sentence = (
            f"inline PTX `{e.shown}` ({origin}){why} is outside what the CPU executor interprets "
            f"({SUBSET}): write it in CUDA C++"
        )
        return f"::cusim::ptx::unsupported({_c_string(sentence)})"


def _what(shown: str, origin: str) -> str:
    """The C string naming an instruction or operand and where it is, for the header's faults."""
    return _c_string(f"inline PTX `{shown}` ({origin})")


def _extended(node: Node) -> bool:
    return any(c.type.endswith("_list") for c in node.children)


def _c_string(text: str) -> str:
    """A C string literal of ``text`` (the user's template among it): every character outside
    printable ASCII, a quote and a backslash as an octal escape."""
    return '"' + "".join(c if " " <= c <= "~" and c not in '"\\' else _octal(c) for c in text) + '"'


def _octal(c: str) -> str:
    return "".join(f"\\{b:03o}" for b in c.encode())


_ESCAPES = {"\\n": "\n", "\\t": "\t", "\\\\": "\\", '\\"': '"', "\\'": "'", "\\r": ""}


def _literal(code: Node | None) -> str:
    """The template's text: its string literals joined, C escapes read."""
    if code is None:
        raise Unsupported("whose template is not a string literal")
    parts = [code] if code.type == "string_literal" else code.named_children
    out = []
    for lit in parts:
        if lit.type != "string_literal" or not lit.text.startswith(b'"'):
            raise Unsupported("whose template is not a plain string literal")
        for c in lit.named_children:
            text = c.text.decode()
            if c.type == "escape_sequence":
                if text not in _ESCAPES:
                    raise Unsupported(f"whose template holds the escape {text}")
                out.append(_ESCAPES[text])
            else:
                out.append(text)
    return "".join(out)


def _operands(node: Node, render) -> tuple[list[Operand], dict[str, int]]:
    operands: list[Operand] = []
    names: dict[str, int] = {}
    for part, output in (("output_operands", True), ("input_operands", False)):
        group = node.child_by_field_name(part)
        for op in group.children_by_field_name("operand") if group is not None else []:
            constraint = _literal(op.child_by_field_name("constraint"))
            value = op.child_by_field_name("value")
            symbol = op.child_by_field_name("symbol")
            if symbol is not None:
                names[symbol.text.decode()] = len(operands)
            operand = _operand(constraint, output, render(value), len(operands))
            operand.node = value
            operands.append(operand)
    return operands, names


def _operand(constraint: str, output: bool, expr: str, index: int) -> Operand:
    m = re.fullmatch(r"([=+]?)&?([rhlfdn]|\d+)", constraint)
    if m is None or output != bool(m.group(1)):
        raise Unsupported(f'whose operand %{index} has the constraint "{constraint}"')
    kind = m.group(2)
    if kind.isdigit():
        return Operand("", False, False, int(kind), expr)
    return Operand(kind, output, m.group(1) == "+", None, expr)


def _substituted(template: str, names: dict[str, int], extended: bool) -> str:
    """Operand references as ``#n``; ``%%`` as ``%`` (a basic asm's text is taken as it is)."""
    if not extended:
        return template

    def ref(m: re.Match[str]) -> str:
        what = m.group(1)
        if what == "%":
            return "%"
        if what.isdigit():
            return f"#{what}"
        if what.startswith("[") and what[1:-1] in names:
            return f"#{names[what[1:-1]]}"
        raise Unsupported(f"with the operand reference %{what}")

    return re.sub(r"%(%|\d+|\[\w+\]|.)", ref, template)


def _statements(text: str) -> list[str]:
    """The template as statements and scope braces, comments gone."""
    text = re.sub(r"//[^\n]*", "", text)
    out, pos = [], 0
    while pos < len(text):
        ch = text[pos]
        if ch.isspace():
            pos += 1
        elif ch in "{}":
            out.append(ch)
            pos += 1
        else:
            end = text.find(";", pos)
            if end < 0:
                end = len(text)
            stmt = " ".join(text[pos:end].split())
            if stmt:
                out.append(stmt)
            pos = end + 1
    return out


# ------------------------------------------------------------------------------------- reading


def _parsed(statements: list[str], operands: list[Operand]) -> list[Instruction]:
    for i, op in enumerate(operands):
        if op.tied is not None and (op.tied >= len(operands) or not operands[op.tied].output):
            raise Unsupported(f"whose operand %{i} is tied to %{op.tied}, not an output")
    regs: dict[str, int] = {}  # declared register -> its bits (0: a predicate)
    out = []
    for stmt in statements:
        if stmt in "{}":
            out.append(Instruction(stmt))
            continue
        try:
            ins = _instruction(stmt, operands, regs)
        except Unsupported as e:
            raise Unsupported(e.why, _shown(stmt)) from None
        ins.shown = _shown(stmt)
        out.append(ins)
    return out


def _shown(stmt: str) -> str:
    return re.sub(r"#(\d+)", r"%\1", stmt)


def _instruction(stmt: str, operands: list[Operand], regs: dict[str, int]) -> Instruction:
    if stmt.startswith(".reg "):
        return _declare(stmt, regs)
    guard = None
    if m := re.match(r"@(!?)(%?[A-Za-z_$][\w$]*)\s+", stmt):
        if regs.get(m.group(2)) != 0:
            raise Unsupported(f"guarded by {m.group(2)}, not a declared predicate")
        guard = (bool(m.group(1)), m.group(2))
        stmt = stmt[m.end() :]
    opcode, _, rest = stmt.partition(" ")
    args = _split(rest)
    parts = opcode.split(".")
    name = parts[0]
    if name in ("ld", "st"):
        ins = _memory(name, parts[1:], args, operands, regs)
    elif name == "mov" and len(parts) == 2 and parts[1] in _TYPES and len(args) == 2:
        dst, src = _destination(args[0], operands, regs), _value(args[1], operands, regs)
        ins = Instruction("mov", dst=[dst], src=[src], type=parts[1])
    elif name == "setp" and len(parts) == 3 and parts[1] in _CMP and parts[2] in _TYPES:
        if len(args) != 3 or regs.get(args[0]) != 0:
            raise Unsupported("whose first operand is not one declared predicate")
        src = [_value(x, operands, regs) for x in args[1:]]
        ins = Instruction("setp", dst=[Arg("reg", args[0])], src=src, type=parts[2])
        ins.cmp = _CMP[parts[1]]
    elif name == "cvt" and len(args) == 2:
        d, s, rounding = _conversion(parts[1:])
        dst, src = _destination(args[0], operands, regs), _value(args[1], operands, regs)
        ins = Instruction("cvt", dst=[dst], src=[src], type=d, source_type=s, rounding=rounding)
    elif name in ("membar", "fence") and not args:
        ins = Instruction("fence")
    else:
        raise Unsupported("")
    ins.guard = guard
    return ins


_ROUND_TO_INT = {"rni": "rn", "rzi": "rz", "rmi": "rd", "rpi": "ru"}


def _conversion(mods: list[str]) -> tuple[str, str, str]:
    """(destination, source, rounding) of ``cvt.MODS.D.S`` between numbers: a float to an
    integer takes one integer rounding (and saturates, .sat or not); a float result rounds to
    nearest; an integer to an integer wraps."""
    if len(mods) < 2 or not {mods[-1], mods[-2]} <= set(_TYPES) - {
        "f16",
        "bf16",
        "f16x2",
        "bf16x2",
    }:
        raise Unsupported("between types other than 8- to 64-bit integers, f32 and f64")
    d, s, rest = mods[-2], mods[-1], set(mods[:-2])
    rounding = "rn"
    if _TYPES[d] in ("float", "double"):
        ok = rest <= {"rn"}
    elif _TYPES[s] in ("float", "double"):
        ok = len(rest - {"sat"}) == 1 and (rest - {"sat"}) <= set(_ROUND_TO_INT)
        rounding = _ROUND_TO_INT.get(next(iter(rest - {"sat"}), ""), "rn")
    else:
        ok = not rest
    if not ok:
        raise Unsupported(f"with the modifiers {', '.join(sorted(rest)) or 'none'}")
    return d, s, rounding


def _declare(stmt: str, regs: dict[str, int]) -> Instruction:
    m = re.fullmatch(r"\.reg \.(\w+) (.+)", stmt)
    if m is None or (m.group(1) != "pred" and m.group(1) not in _TYPES):
        raise Unsupported("")
    out = Instruction("reg")
    for reg in (r.strip() for r in m.group(2).split(",")):
        if not re.fullmatch(r"%?[A-Za-z_][\w]*", reg):
            raise Unsupported(f"declaring {reg}")
        regs[reg] = 0 if m.group(1) == "pred" else type_bits(m.group(1))
        out.regs.append((reg, regs[reg]))
    return out


def _memory(
    name: str, mods: list[str], args: list[str], operands: list[Operand], regs: dict[str, int]
) -> Instruction:
    if not mods or mods[-1] not in _TYPES:
        raise Unsupported("without one of the types the subset reads")
    count = 1
    for mod in mods[:-1]:
        if mod in ("v2", "v4"):
            count = int(mod[1])
        elif mod not in _CACHE and mod not in _SPACES and not re.fullmatch(r"L[12]::\w+", mod):
            raise Unsupported(f"with the qualifier .{mod}")
    if any(m == "L2::cache_hint" for m in mods) or len(args) != 2:
        raise Unsupported("")
    values, where = (args[0], args[1]) if name == "ld" else (args[1], args[0])
    m = re.fullmatch(r"\[\s*#(\d+)\s*(?:\+\s*(-?\d+|0[xX][0-9a-fA-F]+))?\s*\]", where)
    if m is None:
        raise Unsupported("whose address is not [%n] or [%n+offset] of a pointer operand")
    k, offset = int(m.group(1)), int(m.group(2) or "0", 0)
    if k >= len(operands):
        raise Unsupported(f"naming %{k}, which is no operand")
    items = _split(values[1:-1]) if values.startswith("{") and values.endswith("}") else [values]
    if len(items) != count:
        raise Unsupported(f"moving {len(items)} values where its type says {count}")
    ins = Instruction(name, type=mods[-1], count=count, address=k, offset=offset)
    ins.shared = bool({"shared", "shared::cta"} & set(mods))
    if name == "ld":
        ins.dst = [_destination(r, operands, regs) for r in items]
    else:
        ins.src = [_value(r, operands, regs) for r in items]
    return ins


def _split(text: str) -> list[str]:
    """Operands at the top level: commas inside {} and [] stay."""
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "{[" and 1 or ch in "}]" and -1 or 0
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return [*out, cur.strip()] if cur.strip() else out


def type_bits(t: str) -> int:
    """The bits of a PTX type (``u32`` 32, ``f16x2`` 32)."""
    return int(re.search(r"\d+", t).group()) * (2 if t.endswith("x2") else 1)


def _destination(arg: str, operands: list[Operand], regs: dict[str, int]) -> Arg:
    if m := re.fullmatch(r"#(\d+)", arg):
        k = int(m.group(1))
        if k >= len(operands) or not operands[k].output:
            raise Unsupported(f"writing %{k}, which is not an output operand")
        return Arg("operand", str(k))
    if regs.get(arg, 0):
        return Arg("reg", arg)
    raise Unsupported(f"writing {arg}, which is no output or declared register")


def _value(arg: str, operands: list[Operand], regs: dict[str, int]) -> Arg:
    if m := re.fullmatch(r"#(\d+)", arg):
        if int(m.group(1)) >= len(operands):
            raise Unsupported(f"reading %{m.group(1)}, which is no operand")
        return Arg("operand", m.group(1))
    if regs.get(arg, 0):
        return Arg("reg", arg)
    if arg.startswith("%") and arg[1:] in _SPECIAL:
        return Arg("special", arg[1:])
    if _IMM.fullmatch(arg):
        return Arg("imm", arg)
    raise Unsupported(f"reading {arg}")


def reg_name(reg: str) -> str:
    """A declared register's name in C++ and MSL."""
    return "ptx_" + reg.lstrip("%").replace("$", "_S")


# ------------------------------------------------------------------------------------ C++


def _program(program: Program, origin: str) -> str:
    operands = program.operands
    # a GNU statement expression, not a lambda: a lambda cannot capture an anonymous union's
    # members, which operands name (llm-awq's "=h"(h.int16))
    lines = ["({"]
    for i, op in enumerate(operands):
        lines.append(_bind(i, op, operands))
    for ins in program.body:
        lines.append(_cxx(ins, origin))
    for i, op in enumerate(operands):
        if op.output:
            lines.append(
                f"::cusim::ptx::out<{_BITS[op.letter]}>(({op.expr}), r{i}, "
                f"{_what(f'%{i}', origin)});"
            )
    lines.append("(void)0; })")
    return " ".join(lines)


def _bind(i: int, op: Operand, operands: list[Operand]) -> str:
    if op.tied is not None:
        letter = operands[op.tied].letter
        value = f"::cusim::ptx::in<{_BITS[letter]}>(({op.expr}))"
        return f"r{op.tied} = {value}; auto& r{i} = r{op.tied};"
    if op.output and not op.inout:
        return f"::cusim::ptx::Reg r{i}{{}};"
    return f"::cusim::ptx::Reg r{i} = ::cusim::ptx::in<{_BITS[op.letter]}>(({op.expr}));"


def write(ins: Instruction, register: str, action) -> str:
    """One instruction as a statement, C++ for the executor or MSL for a translation: braces as
    they are, `.reg` as declarations (predicates as bools, others of type ``register``), anything
    else as ``action(ins)`` under its predicate guard."""
    if ins.op in "{}":
        return ins.op
    if ins.op == "reg":
        return " ".join(
            f"bool {reg_name(r)} = false;" if bits == 0 else f"{register} {reg_name(r)}{{}};"
            for r, bits in ins.regs
        )
    guard = ""
    if ins.guard is not None:
        guard = f"if ({'!' if ins.guard[0] else ''}{reg_name(ins.guard[1])}) "
    return guard + action(ins)


def _cxx(ins: Instruction, origin: str) -> str:
    return write(ins, "::cusim::ptx::Reg", lambda i: _cxx_action(i, origin))


def _cxx_action(ins: Instruction, origin: str) -> str:
    if ins.op in ("ld", "st"):
        what = _what(opcode(ins), origin)
        shared = "true" if ins.shared else "false"
        call = (
            f"::cusim::ptx::{ins.op}<{_TYPES[ins.type]}, {ins.count}, {shared}>"
            f"(r{ins.address}, {ins.offset}, {what}"
        )
        if ins.op == "ld":
            return call + ", {" + ", ".join(f"&{_cxx_dst(a)}" for a in ins.dst) + "});"
        return call + ", {" + ", ".join(_cxx_value(a, origin) for a in ins.src) + "});"
    if ins.op == "mov":
        dst = _cxx_dst(ins.dst[0])
        value = f"{_cxx_value(ins.src[0], origin)} & ::cusim::ptx::mask({type_bits(ins.type)})"
        return f"{{ {dst}.bits = {value}; {dst}.kind = 0; }}"
    if ins.op == "setp":
        t = _TYPES[ins.type]
        a, b = (_cxx_value(x, origin) for x in ins.src)
        return (
            f"{reg_name(ins.dst[0].name)} = ::cusim::ptx::as<{t}>({a}) "
            f"{ins.cmp} ::cusim::ptx::as<{t}>({b});"
        )
    if ins.op == "cvt":
        dst = _cxx_dst(ins.dst[0])
        convert = (
            f"::cusim::ptx::cvt<{_TYPES[ins.type]}, {_TYPES[ins.source_type]}, "
            f"::cusim::values::rnd::{ins.rounding}>"
        )
        value = f"{convert}({_cxx_value(ins.src[0], origin)})"
        return f"{{ {dst}.bits = {value}; {dst}.kind = 0; }}"
    return "__atomic_thread_fence(__ATOMIC_SEQ_CST);"  # fence


def opcode(ins: Instruction) -> str:
    """The instruction's opcode as written (``ld.global.ca.v4.u32``)."""
    return re.sub(r"^@!?\S+\s+", "", ins.shown).split(" ")[0]


def _cxx_dst(arg: Arg) -> str:
    return f"r{arg.name}" if arg.kind == "operand" else reg_name(arg.name)


def _cxx_value(arg: Arg, origin: str) -> str:
    if arg.kind == "operand":
        return f"r{arg.name}.value({_what(f'%{arg.name}', origin)})"
    if arg.kind == "reg":
        return f"{reg_name(arg.name)}.bits"
    if arg.kind == "special":
        return _SPECIAL[arg.name]
    if arg.name[:2].lower() in ("0f", "0d"):
        return f"uint64_t(0x{arg.name[2:]}ull)"
    return f"uint64_t(int64_t({arg.name.rstrip('uU')}ll))"
