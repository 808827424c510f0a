"""What a translation returns, and the error for a construct it has no rule for."""

from __future__ import annotations

from pydantic import BaseModel, Field

from mlxport.errors import UserError
from mlxport.spec import KernelCandidate


class Untranslatable(UserError):
    """A construct the rule-based translator has no rule for, named with its line."""

    def __init__(self, construct: str, line: int, reason: str):
        self.construct = construct
        self.line = line
        self.reason = reason
        super().__init__(f"cannot translate {construct} at line {line}: {reason}")


class Translation(BaseModel):
    candidate: KernelCandidate
    notes: list[str] = Field(default_factory=list)
    bindings: dict[str, str] = Field(default_factory=dict)
