"""Parse the knowledge-base markdown (front matter + `##` sections) and the source registry."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

KB_DIR = Path(__file__).parent
DOCS_DIR = KB_DIR / "docs"
SOURCES_FILE = KB_DIR / "sources.toml"

_SOURCE_LINE = re.compile(r"^Source:\s*(.+)$")
_APPLIES_LINE = re.compile(r"^Applies to:\s*(.+)$")
_TAG = re.compile(r"\b(S\d+[a-z]?|MLXI|MLXCEL)\b")


@dataclass(frozen=True)
class Section:
    id: str  # "<doc id>#<slug>"
    doc_id: str
    doc_title: str
    heading: str
    text: str  # body without Source/Applies lines
    source_line: str  # the raw text after "Source:", "" if none
    source_tags: tuple[str, ...]
    applies_to: tuple[str, ...]
    tags: tuple[str, ...] = field(default=())

    @property
    def title(self) -> str:
        return f"{self.doc_title} > {self.heading}"


def slugify(heading: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", heading.lower()).strip("-")


def _parse_value(raw: str) -> str | list[str]:
    raw = raw.strip()
    if raw.startswith("[") and raw.endswith("]"):
        return [v.strip().strip("'\"") for v in raw[1:-1].split(",") if v.strip()]
    return raw.strip("'\"")


def parse_front_matter(text: str) -> tuple[dict[str, str | list[str]], str]:
    """Minimal YAML subset: `key: value` or `key: [a, b]` between `---` lines."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise ValueError("knowledge doc must start with a '---' front-matter block")
    end = lines.index("---", 1)
    meta: dict[str, str | list[str]] = {}
    for line in lines[1:end]:
        if line.strip():
            key, _, value = line.partition(":")
            meta[key.strip()] = _parse_value(value)
    return meta, "\n".join(lines[end + 1 :])


def _as_list(value: str | list[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    return tuple(value) if isinstance(value, list) else (value,)


def source_tags(text: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(_TAG.findall(text)))


def _make_section(meta: dict, heading: str, body: list[str]) -> Section:
    source_line, applies, kept = "", _as_list(meta.get("applies_to")), []
    for line in body:
        if m := _SOURCE_LINE.match(line.strip()):
            source_line = m.group(1).strip()
        elif m := _APPLIES_LINE.match(line.strip()):
            applies = tuple(v.strip() for v in m.group(1).split(","))
        else:
            kept.append(line)
    text = "\n".join(kept).strip()
    tags = tuple(dict.fromkeys(source_tags(source_line) + source_tags(text)))
    return Section(
        id=f"{meta['id']}#{slugify(heading)}",
        doc_id=str(meta["id"]),
        doc_title=str(meta["title"]),
        heading=heading,
        text=text,
        source_line=source_line,
        source_tags=tags,
        applies_to=applies,
        tags=_as_list(meta.get("tags")),
    )


def parse_doc(path: Path) -> list[Section]:
    meta, body = parse_front_matter(path.read_text(encoding="utf-8"))
    for key in ("id", "title"):
        if key not in meta:
            raise ValueError(f"{path.name}: front matter lacks '{key}'")
    sections: list[Section] = []
    heading, lines = None, []
    for line in body.splitlines():
        if line.startswith("## "):
            if heading is not None:
                sections.append(_make_section(meta, heading, lines))
            heading, lines = line[3:].strip(), []
        elif heading is not None:
            lines.append(line)
    if heading is not None:
        sections.append(_make_section(meta, heading, lines))
    return sections


@cache
def load_sources() -> dict[str, dict[str, str]]:
    return tomllib.loads(SOURCES_FILE.read_text(encoding="utf-8"))


def cite(tag: str) -> str:
    src = load_sources().get(tag)
    if src is None:
        return tag
    url = f" <{src['url']}>" if src.get("url") else ""
    return f"{tag}: {src['title']} [{src['kind']}]{url}"


def doc_paths() -> list[Path]:
    return sorted(DOCS_DIR.glob("*.md"))


@cache
def load_doc_sections() -> tuple[Section, ...]:
    return tuple(s for p in doc_paths() for s in parse_doc(p))


_DIGIT = re.compile(r"\d")


def lint_doc(path: Path) -> list[str]:
    """Problems that break the sourcing rule: a figure (any digit) in a section without a Source
    line, an unknown source tag, or figures outside any section."""
    problems = []
    meta, body = parse_front_matter(path.read_text(encoding="utf-8"))
    intro = body.split("\n## ", 1)[0]
    if any(_DIGIT.search(line) for line in intro.splitlines() if not line.startswith("# ")):
        problems.append(f"{path.name}: figures before the first section have no source")
    for s in parse_doc(path):
        if _DIGIT.search(s.text) and not s.source_line:
            problems.append(f"{s.id}: has figures but no 'Source:' line")
        if s.source_line and not source_tags(s.source_line):
            problems.append(f"{s.id}: 'Source:' line names no known tag")
        problems += [
            f"{s.id}: unknown source tag {t}" for t in s.source_tags if t not in load_sources()
        ]
    return problems
