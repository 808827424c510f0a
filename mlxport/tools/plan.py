"""The plan tree (after K-Search): optimisation ideas with rationale, expected gain, status, and
the candidates that tried them, rendered compactly into every prompt."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Status = Literal["open", "active", "done", "abandoned"]


class PlanNode(BaseModel):
    id: str
    idea: str
    rationale: str = ""
    expected_gain: str = ""
    parent: str | None = None
    status: Status = "open"
    note: str = ""
    candidates: list[str] = Field(default_factory=list)
    outcome: str = ""  # measured, attached by the assess step


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

    def add(self, idea: str, rationale: str = "", expected_gain: str = "", parent: str | None = None) -> PlanNode:
        if parent is not None:
            self.get(parent)
        node = PlanNode(id=f"p{len(self.nodes) + 1}", idea=idea, rationale=rationale, expected_gain=expected_gain,
                        parent=parent)
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

    def attach(self, candidate_id: str, outcome: str) -> None:
        """Record a measured outcome on the active idea (if any)."""
        node = self.active
        if node is None:
            return
        if candidate_id not in node.candidates:
            node.candidates.append(candidate_id)
        node.outcome = outcome

    def render(self) -> str:
        if not self.nodes:
            return "(empty: add ideas with update_plan)"
        children: dict[str | None, list[PlanNode]] = {}
        for n in self.nodes:
            children.setdefault(n.parent, []).append(n)
        lines: list[str] = []

        def walk(parent: str | None, depth: int) -> None:
            for n in children.get(parent, []):
                mark = {"open": " ", "active": ">", "done": "x", "abandoned": "-"}[n.status]
                gain = f" (expect {n.expected_gain})" if n.expected_gain else ""
                tried = f" tried {','.join(n.candidates[-3:])}" if n.candidates else ""
                outcome = f" -> {n.outcome}" if n.outcome else ""
                note = f" [{n.note}]" if n.note else ""
                lines.append(f"{'  ' * depth}[{mark}] {n.id} {n.idea}{gain}{tried}{outcome}{note}")
                if depth < 6:
                    walk(n.id, depth + 1)

        walk(None, 0)
        return "\n".join(lines)
