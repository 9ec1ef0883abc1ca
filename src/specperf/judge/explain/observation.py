"""What production showed: one observation of tok/s and its two factors (``specperf explain``).

Offline it comes from flags (a dashboard's figures); live, from the server's own metrics over
a window (:mod:`specperf.servers.livemetrics`). :mod:`specperf.judge.explain` judges it
against what the baseline predicts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Observation:
    """What production did: tok/s per request, and what is known of its two factors.

    ``context`` is the prompt length in tokens; ``sources`` says where each figure came from
    (a flag, or the server's metric)."""

    text_class: str
    context: float
    tok_s: float
    avg_commit: float | None = None
    step_ms: float | None = None
    output_tokens: int | None = None
    concurrency: float = 1.0
    sources: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"text_class": self.text_class, "context": self.context, "tok_s": self.tok_s,
                "avg_commit": self.avg_commit, "step_ms": self.step_ms,
                "output_tokens": self.output_tokens, "concurrency": self.concurrency,
                "sources": dict(self.sources)}
