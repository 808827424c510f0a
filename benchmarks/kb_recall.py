"""Retrieval recall@k of the hardware knowledge base on mlxport/knowledge/eval_questions.toml.

Usage: python benchmarks/kb_recall.py [-k 3] [--heldout]. Prints per-question misses and recall;
exits 1 below 0.9. --heldout scores heldout_questions.toml, phrasings the ranking was never tuned
on.
"""

from __future__ import annotations

import argparse
import sys

from mlxport.knowledge import load_questions, recall_at_k

THRESHOLD = 0.9


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-k", type=int, default=3)
    ap.add_argument("--heldout", action="store_true", help="the held-out question set")
    args = ap.parse_args()
    k = args.k
    recall, misses = recall_at_k(k, heldout=args.heldout)
    first, _ = recall_at_k(1, heldout=args.heldout)
    for m in misses:
        print(
            f"MISS {m.question!r}\n"
            f"  expected: {', '.join(m.expected)}\n"
            f"  got:      {', '.join(m.got)}"
        )
    print(
        f"recall@{k} = {recall:.3f}, recall@1 = {first:.3f} on "
        f"{len(load_questions(args.heldout))} questions ({len(misses)} misses at {k})"
    )
    return 0 if recall >= THRESHOLD else 1


if __name__ == "__main__":
    sys.exit(main())
