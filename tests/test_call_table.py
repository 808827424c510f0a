"""One entry per CUDA function (mlxport/translate/reading/calls.py): for every function in the
table, the note the model reads about it and what the rule translator does with it agree."""

import re

import pytest

from mlxport.translate.reading.calls import CALLS, RULE
from mlxport.translate.reading.features import assess
from mlxport.translate.reading.reader import read_cuda
from mlxport.translate.translator import Untranslatable, translate

KERNEL = (
    "__global__ void k(const {t}* x, {t}* out, int n) {{\n    int i = threadIdx.x;\n{body}\n}}\n"
    "void run(const {t}* x, {t}* out, int n) {{ k<<<(n + 255) / 256, 256>>>(x, out, n); }}\n"
)
# A one-line use of a function, by how its rule is written.
BODIES = {
    "call": "    out[i] = {name}(x[i]);",
    "operator": "    out[i] = {name}(x[i], x[i]);",
    "store": "    {name}(out + i, x[i]);",
    "shuffle": "    out[i] = {name}(0xffffffff, x[i], 1);",
    "old_shuffle": "    out[i] = {name}(x[i], 1);",
    "vote": "    out[i] = {name}(0xffffffff, x[i] > 0.0f);",
    "atomic": "    {name}(out, x[i]);",
}
# The rules the renderer writes with code of its own.
CODE = {
    "__syncthreads": "    out[i] = x[i];\n    {name}();",
    "__barrier_sync": "    out[i] = x[i];\n    {name}(0);",
    "__syncwarp": "    out[i] = x[i];\n    {name}();",
    "__activemask": "    out[i] = x[i] + {name}();",
    "assert": "    {name}(x[i] >= 0.0f);\n    out[i] = x[i];",
    "__assert_fail": '    {name}("x", "k.cu", 3, "k");\n    out[i] = x[i];',
    "printf": '    {name}("%d\\n", x[i]);\n    out[i] = x[i];',
}
ATOMIC_CAS = "    {name}(out, 0, x[i]);"  # compare-and-swap takes the value compared too
SINCOS = "    float s, c;\n    {name}(x[i], &s, &c);\n    out[i] = s + c;"


def _kernel(name: str) -> str:
    entry = CALLS[name]
    if entry.form == "code":
        body = CODE.get(name, SINCOS)
    elif entry.category == "atomic":
        body = ATOMIC_CAS if name == "atomicCAS" else BODIES["atomic"]
    else:
        body = BODIES.get(entry.form, BODIES["call"])
    element = "int" if entry.category == "atomic" else "float"
    return KERNEL.format(t=element, body=body.format(name=name))


def _written(name: str) -> str:
    """What the translation holds where a rule translated the call."""
    entry = CALLS[name]
    if entry.form in ("call", "cast", "shuffle", "old_shuffle", "atomic"):
        return f"{entry.target}("
    if entry.form == "operator":
        return f") {entry.target} ("
    if entry.form in ("unary", "store", "vote"):
        return entry.target.split("{")[0]
    return entry.metal or ""


@pytest.mark.parametrize("name", sorted(CALLS))
def test_the_note_and_the_translator_agree(name):
    entry = CALLS[name]
    source = _kernel(name)
    notes = [r for r in assess(read_cuda(source).kernel("k")) if r.feature.split("(")[0] == name]
    assert len(notes) == 1, notes
    note = notes[0]
    assert note.needs_rewrite == entry.needs_rewrite, note
    if entry.kind != RULE:
        assert note.reason and entry.reason in note.reason, note
        with pytest.raises(Untranslatable) as refused:
            translate(source, kernel="k")
        assert name in str(refused.value), refused.value
        return
    assert note.metal is not None
    body = translate(source, kernel="k").candidate.source
    if entry.metal and entry.metal.startswith("nothing"):
        assert name not in body, body
    else:
        assert _written(name) in body, body
    if entry.target != name:
        assert re.search(rf"(?<![\w:]){re.escape(name)}\s*\(", body) is None, body


def test_every_rule_says_how_it_is_written():
    for name, entry in CALLS.items():
        if entry.kind == RULE:
            assert entry.form and (entry.target or entry.form == "code") and entry.metal, name
        else:
            assert not entry.form and entry.reason, name
