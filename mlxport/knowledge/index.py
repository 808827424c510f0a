"""BM25 retrieval over knowledge-base sections (docs/*.md plus the generated chip sections)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from pydantic import BaseModel

from mlxport.knowledge.chips import ChipProfile, chip_sections, chip_text, hardware_profile
from mlxport.knowledge.docs import Section, cite, load_doc_sections, load_sources, slugify

_RAW = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_STOP_WORDS = """a an and are as at be by can do does for from how i in is it its my of on or
    should that the this to use used using has have what when where which why will with you your me
    we get there than then into"""
_STOP = frozenset(_STOP_WORDS.split())
# CUDA vocabulary a porting model uses -> the Metal words the knowledge base uses.
_SYNONYMS = {
    "warp": ("simd", "simdgroup"),
    "shared": ("threadgroup",),
    "smem": ("threadgroup", "shared"),
    "block": ("threadgroup",),
    "syncthreads": ("threadgroup_barrier", "barrier"),
    "shfl": ("simd_shuffle", "shuffle"),
    "lane": ("simd",),
    "tflop": ("fp32", "tflops"),
    "flop": ("fp32", "tflops"),
    "gpu_cores": ("cores",),
}
# A second BM25 over headings (BM25F-like): a section's topic outweighs passing mentions in long
# text.
_HEADING_WEIGHT = 1.0


_LEMMA = {
    "maximum": "max",
    "minimum": "min",
    "shmem": "smem",
    "warps": "warp",
    "reduction": "reduce",  # the suffix stripper leaves "reduction" and "reduce" apart
    "reductions": "reduce",
}
# Metal spells it "simdgroup" in names (simdgroup_barrier, simdgroup_matrix) and "SIMD-group" in
# prose: both give the same words, so a query in either spelling finds both.
_SIMDGROUP = re.compile(r"\bsimd[- ]group", re.IGNORECASE)
_COMPOUNDS = {"simdgroup": ("simd", "group")}
_SUFFIXES = ("ations", "ation", "ing", "ed", "es", "s")


def _stem(tok: str) -> str:
    """Tiny suffix stripper (no stemmer dependency): compile/compiles/compiled/compilation ->
    compil."""
    tok = _LEMMA.get(tok, tok)
    if not tok.isalpha() or len(tok) <= 4:
        return tok
    if tok.endswith("ies"):
        return tok[:-3] + "y"
    for suffix in _SUFFIXES:
        if (
            tok.endswith(suffix)
            and len(tok) - len(suffix) >= 4
            and not tok.endswith(("ss", "us", "is"))
        ):
            tok = tok[: -len(suffix)]
            break
    if tok.endswith("e") and len(tok) > 4:
        tok = tok[:-1]
    if len(tok) >= 4 and tok[-1] == tok[-2] and tok[-1] not in "ls":
        tok = tok[:-1]  # padd -> pad, but keep "all", "pass"
    return tok


def tokenize(text: str) -> list[str]:
    """Lowercase words; identifiers also yield their `_` and camelCase parts (and stay whole)."""
    out: list[str] = []
    for raw in _RAW.findall(_SIMDGROUP.sub("simdgroup", text)):
        parts = [p for chunk in raw.split("_") for p in _CAMEL.findall(chunk)]
        parts += [c for p in parts for c in _COMPOUNDS.get(p.lower(), ())]
        for tok in dict.fromkeys([raw, *parts]):
            tok = tok.lower()
            if tok and tok not in _STOP:
                out.append(_stem(tok))
    return out


@cache
def _stemmed_synonyms() -> dict[str, tuple[str, ...]]:
    return {_stem(k): tuple(_stem(v) for v in vs) for k, vs in _SYNONYMS.items()}


def _query_tokens(query: str) -> list[str]:
    toks = tokenize(query)
    return toks + [syn for t in toks for syn in _stemmed_synonyms().get(t, ())]


def _section_tokens(s: Section) -> list[str]:
    return (
        tokenize(s.heading) + tokenize(s.doc_title) + tokenize(" ".join(s.tags)) + tokenize(s.text)
    )


class Hit(BaseModel):
    id: str  # "<doc id>#<section slug>"
    title: str
    text: str
    sources: list[str]
    score: float
    source_line: str = ""


@dataclass(frozen=True)
class _Index:
    sections: tuple[Section, ...]
    body: object  # bm25s.BM25 over whole sections
    headings: object  # bm25s.BM25 over section headings


def all_sections() -> tuple[Section, ...]:
    return (*load_doc_sections(), *chip_sections())


@cache
def _index() -> _Index:
    # Built in memory: ~140 sections parse and index in ~50 ms, so a disk cache would not pay for
    # itself.
    import bm25s

    sections = all_sections()
    body = bm25s.BM25(k1=1.2, b=0.75)
    body.index([_section_tokens(s) for s in sections], show_progress=False)
    headings = bm25s.BM25(k1=1.2, b=0.75)
    headings.index([tokenize(s.heading) for s in sections], show_progress=False)
    return _Index(sections, body, headings)


def section_ids() -> list[str]:
    return [s.id for s in _index().sections]


def _base_name(p: ChipProfile) -> str:
    return p.name.split(" (")[0].lower()


def _chip_factor(s: Section, p: ChipProfile) -> float:
    applies = {a.lower() for a in s.applies_to}
    keys = {_base_name(p), p.generation.lower(), p.gpu_family.lower()}
    if s.doc_id == "chips" and "all" not in applies:
        return (
            1.3 if s.heading.lower() == _base_name(p) else 0.2
        )  # this chip's spec row vs another's
    if applies & keys:
        return 1.3
    if applies & {"all", "metal"} or not applies:
        return 1.0
    return 0.5  # written for other generations or for the CUDA backend


def _to_hit(s: Section, score: float) -> Hit:
    return Hit(
        id=s.id,
        title=s.title,
        text=s.text,
        sources=[cite(t) for t in s.source_tags],
        score=round(score, 4),
        source_line=s.source_line,
    )


def _rank(query: str, chip: ChipProfile | None) -> list[tuple[Section, float]]:
    idx = _index()
    tokens = _query_tokens(query)
    if not tokens:
        raise ValueError(
            f"the query {query!r} has no words to search for: ask about something, e.g. "
            f"'simd_shuffle_xor' or 'threadgroup memory limit'"
        )
    scores = idx.body.get_scores(tokens) + _HEADING_WEIGHT * idx.headings.get_scores(tokens)
    ranked = []
    for s, score in zip(idx.sections, scores, strict=True):
        factor = _chip_factor(s, chip) if chip else 1.0
        ranked.append((s, float(score) * factor))
    ranked.sort(key=lambda pair: -pair[1])
    return [pair for pair in ranked if pair[1] > 0]


def ranked_ids(query: str, k: int = 3, chip: str | None = None) -> list[str]:
    """Ids of the top-k sections as ranked (no prepended chip profile); used by the evaluation."""
    return [s.id for s, _ in _rank(query, hardware_profile(chip) if chip else None)[:k]]


def search(query: str, k: int = 3, chip: str | None = None) -> list[Hit]:
    """Top-k sections for `query`. With `chip`, that chip's profile comes first, followed by k
    sections ranked with that chip's generation boosted and other generations damped."""
    profile = hardware_profile(chip) if chip else None
    ranked = _rank(query, profile)
    if profile is None:
        return [_to_hit(s, score) for s, score in ranked[:k]]
    head_id = f"chips#{slugify(_base_name(profile))}"
    rest = [_to_hit(s, score) for s, score in ranked if s.id != head_id][:k]
    top = max((score for _, score in ranked[:1]), default=0.0)
    head = Hit(
        id=head_id,
        title=f"Apple GPU chip table > {profile.name}",
        text=chip_text(profile),
        sources=profile.sources,
        score=round(top, 4),
        source_line="",
    )
    return [head, *rest]


def _trim(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[:limit]
    end = max(cut.rfind(". "), cut.rfind("\n"))
    return (cut[: end + 1] if end > limit // 2 else cut).rstrip() + " [...]"


def _short(title: str, limit: int = 48) -> str:
    return title if len(title) <= limit else title[: limit - 3].rstrip() + "..."


def _source_summary(hit: Hit, most: int = 4) -> str:
    tags = re.findall(r"^(\S+?):", "\n".join(hit.sources), flags=re.M)
    known = load_sources()
    names = [f"{t} {_short(known[t]['title'])}" if t in known else t for t in tags[:most]]
    more = f"; +{len(tags) - most} more" if len(tags) > most else ""
    return "; ".join(names) + more


def format_hits(hits: list[Hit], max_chars: int = 1200) -> str:
    """Compact text for a model prompt: id, title, trimmed text and a Source line per hit."""
    if not hits:
        return "No matching knowledge-base section."
    blocks = []
    for i, h in enumerate(hits, 1):
        src = _source_summary(h)
        detail = f" [{h.source_line}]" if h.source_line and "(" in h.source_line else ""
        blocks.append(f"[{i}] {h.id}: {h.title}\n{_trim(h.text, max_chars)}\nSource: {src}{detail}")
    return "\n\n".join(blocks)
