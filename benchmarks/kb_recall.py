"""Retrieval recall@k of the hardware knowledge base on mlxport/knowledge/eval_questions.toml.

Usage: python benchmarks/kb_recall.py [-k 3]. Prints per-question misses and recall; exits 1
below 0.9.
"""

from __future__ import annotations

import argparse
import sys

from mlxport.knowledge import load_questions, recall_at_k

THRESHOLD = 0.9


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-k", type=int, default=3)
    k = ap.parse_args().k
    recall, misses = recall_at_k(k)
    for m in misses:
        print(
            f"MISS {m.question!r}\n"
            f"  expected: {', '.join(m.expected)}\n"
            f"  got:      {', '.join(m.got)}"
        )
    print(f"recall@{k} = {recall:.3f} on {len(load_questions())} questions ({len(misses)} misses)")
    return 0 if recall >= THRESHOLD else 1


if __name__ == "__main__":
    sys.exit(main())
