"""Retrieval evaluation: question -> expected-section pairs in eval_questions.toml (the set the
ranking is tuned on) and heldout_questions.toml (phrasings never tuned on), scored by recall@k."""

from __future__ import annotations

import tomllib

from pydantic import BaseModel

from mlxport.knowledge.docs import KB_DIR

QUESTIONS_FILE = KB_DIR / "eval_questions.toml"
HELDOUT_FILE = KB_DIR / "heldout_questions.toml"


class Question(BaseModel):
    question: str
    expected: list[str]  # any of these section ids counts as a hit
    chip: str | None = None


class Miss(BaseModel):
    question: str
    expected: list[str]
    got: list[str]


def load_questions(heldout: bool = False) -> list[Question]:
    path = HELDOUT_FILE if heldout else QUESTIONS_FILE
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return [Question(**q) for q in data["q"]]


def recall_at_k(k: int = 3, heldout: bool = False) -> tuple[float, list[Miss]]:
    """Fraction of questions with an expected section among the top k ranked sections (for
    chip-scoped questions the ranking with that chip's boost; the profile `search` prepends does not
    count)."""
    from mlxport.knowledge.index import ranked_ids

    questions = load_questions(heldout)
    misses = []
    for q in questions:
        got = ranked_ids(q.question, k=k, chip=q.chip)
        if not set(got) & set(q.expected):
            misses.append(Miss(question=q.question, expected=q.expected, got=got))
    return 1 - len(misses) / len(questions), misses
