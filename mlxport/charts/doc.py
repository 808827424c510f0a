"""A report as a list of blocks, written out as Markdown or as HTML from the same blocks, so the two
say the same. Inline text may hold `code` and **bold**, spelled as Markdown spells them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html import escape


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2


@dataclass(frozen=True)
class Para:
    text: str


@dataclass(frozen=True)
class Table:
    head: list[str]
    rows: list[list[str]]


@dataclass(frozen=True)
class Code:
    text: str
    language: str = ""


@dataclass(frozen=True)
class Item:
    text: str
    children: list[Item] = field(default_factory=list)


@dataclass(frozen=True)
class Items:
    items: list[Item]


Block = Heading | Para | Table | Code | Items


def markdown(blocks: list[Block]) -> str:
    return "".join(_md(b) + "\n" for b in blocks)


def _md(b: Block) -> str:
    if isinstance(b, Heading):
        return f"{'#' * b.level} {b.text}\n"
    if isinstance(b, Para):
        return b.text + "\n"
    if isinstance(b, Table):
        rows = [b.head, ["---"] * len(b.head), *b.rows]
        return "".join("| " + " | ".join(map(_md_cell, r)) + " |\n" for r in rows)
    if isinstance(b, Code):
        return f"```{b.language}\n{b.text.strip()}\n```\n"
    return "".join(_md_items(b.items, 0))


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _md_items(items: list[Item], depth: int) -> list[str]:
    out = []
    for it in items:
        out.append(f"{'  ' * depth}- {it.text}\n")
        out += _md_items(it.children, depth + 1)
    return out


def html(blocks: list[Block]) -> str:
    return "\n".join(map(_html, blocks))


def _html(b: Block) -> str:
    if isinstance(b, Heading):
        return f"<h{b.level}>{inline(b.text)}</h{b.level}>"
    if isinstance(b, Para):
        return f"<p>{inline(b.text)}</p>"
    if isinstance(b, Table):
        head = "".join(f"<th>{inline(h)}</th>" for h in b.head)
        rows = "".join(
            "<tr>" + "".join(f"<td>{inline(c)}</td>" for c in r) + "</tr>" for r in b.rows
        )
        return (
            f'<div class="scroll"><table><thead><tr>{head}</tr></thead>'
            f"<tbody>{rows}</tbody></table></div>"
        )
    if isinstance(b, Code):
        lang = escape(b.language)
        return f'<pre><code class="language-{lang}">{escape(b.text.strip())}</code></pre>'
    return _html_items(b.items)


def _html_items(items: list[Item]) -> str:
    if not items:
        return ""
    inner = "".join(f"<li>{inline(it.text)}{_html_items(it.children)}</li>" for it in items)
    return f"<ul>{inner}</ul>"


_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*(.+?)\*\*")


def inline(text: str) -> str:
    """Markdown's inline `code` and **bold** as HTML, everything else escaped."""
    parts = _CODE.split(text)  # odd indices: the insides of `code`
    return "".join(
        f"<code>{escape(p)}</code>" if i % 2 else _BOLD.sub(r"<b>\1</b>", escape(p))
        for i, p in enumerate(parts)
    )
