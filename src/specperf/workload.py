"""What is measured: text classes, cases, and prompts of exact token length."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Case:
    """One cell of the matrix: a text class at a context length, fixed output length."""

    text_class: str
    context: int
    output_tokens: int

    @property
    def id(self) -> str:
        return f"{self.text_class}-ctx{self.context}"

    def to_dict(self) -> dict[str, Any]:
        return {"text_class": self.text_class, "context": self.context,
                "output_tokens": self.output_tokens, "id": self.id}
