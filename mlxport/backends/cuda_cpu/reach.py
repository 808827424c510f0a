"""What of a file's device code one kernel needs: the kernel, and the device functions and structs
it names, directly or through each other, by namespace; every other definition is blanked, so a
kernel of the file that cannot run here, or a helper needing a library the executor lacks, does not
stop it."""

from __future__ import annotations

import re

from mlxport.backends.cuda_cpu.source import DeviceSource

_MARKER = re.compile(r"^# \d+ .*$", re.M)


def only(source: DeviceSource, kernel: str, names: str = "") -> str:
    """The text with every other kernel's definition blanked, and every device function, type and
    file-scope ``using`` or typedef the kernel does not name: a kernel of the file that cannot run
    here (inline PTX, say), a helper that needs a library the executor lacks, or what only the host
    code uses, does not stop the others. ``names``: more text the kernel is built with (its
    template arguments), whose names are kept too."""
    chars = list(source.text)
    keep = {kernel}
    outside = [(0, len(source.text))]  # structs' members and globals may call helpers too
    for a, b in sorted(x for spans in source.spans.values() for x in spans):
        start, end = outside.pop()
        outside += [(start, a), (b, end)]
    index: dict[str, list[str]] = {}
    for key in source.spans:
        if key.startswith("~"):
            index.setdefault(key.rpartition("::")[2].lstrip("~"), []).append(key)
    todo: list[tuple[str, list[str]]] = [
        # the preprocessor's line markers name files, not code (`# 1 ".../gflags/gflags.h"`)
        ("", [_MARKER.sub("", source.text[a:b]) for a, b in outside] + [names]),
        # the kernel's own namespace: `silu(x)` in vllm::act_kernel is vllm::silu
        (
            _namespace_of(source, kernel),
            [source.text[a:b] for a, b in source.spans.get(kernel, [])],
        ),
    ]
    while todo:
        scope, texts = todo.pop()
        for text in texts:
            for word in set(re.findall(r"[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*", text)):
                for key in _named(re.sub(r"\s+", "", word), scope, index):
                    if key not in keep:
                        keep.add(key)
                        spans = source.spans[key]
                        todo.append(
                            (key[1:].rpartition("::")[0], [source.text[a:b] for a, b in spans])
                        )
    for name, spans in source.spans.items():
        if name in keep:
            continue
        for a, b in spans:
            chars[a:b] = ["\n" if c == "\n" else " " for c in chars[a:b]]
    return "".join(chars)


def _named(word: str, scope: str, index: dict[str, list[str]]) -> list[str]:
    """The helpers and types `word` may name from inside namespace `scope` (``index``: last name
    -> span keys): `a::f` those whose qualified name ends so (and `a` itself: `x128::size` names
    the type x128); a plain `f` those of its own namespace or the enclosing ones, else the global
    and anonymous ones."""
    if "::" in word:
        last = word.rpartition("::")[2]
        return [
            k for k in index.get(last, []) if k[1:] == word or k.endswith("::" + word)
        ] + _named(word.split("::")[0], scope, index)
    keys = [(key[1:].rpartition("::")[0], key) for key in index.get(word, [])]
    # innermost first wins
    own = [k for ns, k in keys if ns and (scope == ns or scope.startswith(ns + "::"))]
    return own or [k for ns, k in keys if ns == "" or ns.endswith("(anon)")]


def _namespace_of(source: DeviceSource, kernel: str) -> str:
    sig = source.kernels.get(kernel)
    return sig.name.rpartition("::")[0] if sig is not None else ""
