"""Hardware and porting knowledge base: markdown docs, the Apple GPU chip table, BM25 search.

Light on purpose (stdlib, pydantic, numpy, bm25s imported lazily): tools and workers import it.
"""

from mlxport.knowledge.chips import (
    ChipProfile,
    detect_chip,
    hardware_profile,
    list_chips,
    local_datasheet,
)
from mlxport.knowledge.evaluation import Miss, load_questions, recall_at_k
from mlxport.knowledge.index import Hit, all_sections, format_hits, search

__all__ = [
    "ChipProfile",
    "Hit",
    "Miss",
    "all_sections",
    "detect_chip",
    "format_hits",
    "hardware_profile",
    "list_chips",
    "load_questions",
    "local_datasheet",
    "recall_at_k",
    "search",
]
