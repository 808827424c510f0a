"""The plan tree (after K-Search): optimisation ideas with rationale, ratings (expected gain,
difficulty, confidence), status, and the candidates that tried them with their measured outcome,
rendered compactly into every prompt. In tree search it is the world model: the frontier is chosen
by rating, and measurements update the ratings."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field

Status = Literal["open", "active", "done", "abandoned", "failed"]
DEFAULT_GAIN = 1.1  # an idea without a readable expected gain


class PlanNode(BaseModel):
    id: str
    idea: str
    rationale: str = ""
    expected_gain: str = ""
    parent: str | None = None
    status: Status = "open"
    note: str = ""
    candidates: list[str] = Field(default_factory=list)
    outcome: str = ""  # the last measured outcome of a candidate tried under it
    difficulty: float = 0.5  # 0 easy .. 1 hard
    confidence: float = 0.5  # 0 .. 1 that the gain is real

    @property
    def gain(self) -> float:
        """The expected speedup factor: '1.5x' is 1.5, '+30%' is 1.3."""
        if m := re.search(r"(\d+(?:\.\d+)?)\s*x", self.expected_gain):
            return float(m[1])
        if m := re.search(r"(\d+(?:\.\d+)?)\s*%", self.expected_gain):
            return 1 + float(m[1]) / 100
        return DEFAULT_GAIN

    @property
    def score(self) -> float:
        """Expected gain per unit of difficulty: what tree search tries first."""
        return max(self.gain - 1.0, 0.01) * self.confidence / max(self.difficulty, 0.05)


class Plan(BaseModel):
    nodes: list[PlanNode] = Field(default_factory=list)

    def get(self, node_id: str) -> PlanNode:
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(node_id)

    @property
    def active(self) -> PlanNode | None:
        return next((n for n in self.nodes if n.status == "active"), None)

    def add(
        self,
        idea: str,
        rationale: str = "",
        expected_gain: str = "",
        parent: str | None = None,
        difficulty: float = 0.5,
        confidence: float = 0.5,
    ) -> PlanNode:
        if parent is not None:
            self.get(parent)
        node = PlanNode(
            id=f"p{len(self.nodes) + 1}",
            idea=idea,
            rationale=rationale,
            expected_gain=expected_gain,
            parent=parent,
            difficulty=difficulty,
            confidence=confidence,
        )
        self.nodes.append(node)
        return node

    def select(self, node_id: str) -> PlanNode:
        node = self.get(node_id)
        if node.status in ("done", "abandoned"):
            raise ValueError(f"idea {node_id} is {node.status}; add a new idea instead")
        for n in self.nodes:
            if n.status == "active":
                n.status = "open"
        node.status = "active"
        return node

    def close(self, node_id: str, status: Status, note: str = "") -> PlanNode:
        node = self.get(node_id)
        node.status = status
        node.note = note
        return node

    def frontier(self, max_difficulty: float = 1.0) -> list[PlanNode]:
        """Open ideas not too hard, under no failed or abandoned idea, best rated first."""

        def blocked(n: PlanNode) -> bool:
            while n.parent is not None:
                n = self.get(n.parent)
                if n.status in ("failed", "abandoned"):
                    return True
            return False

        open_ = [
            n
            for n in self.nodes
            if n.status == "open" and n.difficulty <= max_difficulty and not blocked(n)
        ]
        return sorted(open_, key=lambda n: -n.score)

    def measured(self, node_id: str, improved: bool, outcome: str) -> PlanNode:
        """End a cycle on an idea: done if it improved the best, else failed; its siblings' and
        children's confidence follows the evidence."""
        node = self.get(node_id)
        node.status = "done" if improved else "failed"
        node.outcome = outcome
        node.confidence = 1.0 if improved else 0.0
        for n in self.nodes:
            if n.status == "open" and n.parent == node.parent and n is not node:
                n.confidence = min(1.0, n.confidence * (1.1 if improved else 0.8))
            if n.status == "open" and n.parent == node.id:
                n.confidence = min(1.0, n.confidence * (1.2 if improved else 0.5))
        return node

    def credit(self, node_id: str, candidate_id: str, outcome: str = "") -> PlanNode:
        """Record a candidate as tried under an idea (as the model says, or the idea of a tree
        search's cycle), with its outcome so far."""
        node = self.get(node_id)
        if candidate_id not in node.candidates:
            node.candidates.append(candidate_id)
        node.outcome = outcome or node.outcome
        return node

    def attached(self, candidate_id: str, outcome: str) -> Plan:
        """A copy with a measured outcome on the ideas the candidate was tried under."""
        plan = self.model_copy(deep=True)
        for node in plan.nodes:
            if candidate_id in node.candidates:
                node.outcome = outcome
        return plan

    def render(self) -> str:
        if not self.nodes:
            return "(empty: add ideas with update_plan)"
        children: dict[str | None, list[PlanNode]] = {}
        for n in self.nodes:
            children.setdefault(n.parent, []).append(n)
        lines: list[str] = []

        def walk(parent: str | None, depth: int) -> None:
            for n in children.get(parent, []):
                mark = {"open": " ", "active": ">", "done": "x", "abandoned": "-", "failed": "!"}[
                    n.status
                ]
                rating = f"difficulty {n.difficulty:.1f}, confidence {n.confidence:.1f}"
                gain = (
                    f" (expect {n.expected_gain}; {rating})" if n.expected_gain else f" ({rating})"
                )
                tried = f" tried {','.join(n.candidates[-3:])}" if n.candidates else ""
                outcome = f" -> {n.outcome}" if n.outcome else ""
                note = f" [{n.note}]" if n.note else ""
                lines.append(f"{'  ' * depth}[{mark}] {n.id} {n.idea}{gain}{tried}{outcome}{note}")
                if depth < 6:
                    walk(n.id, depth + 1)

        walk(None, 0)
        return "\n".join(lines)
