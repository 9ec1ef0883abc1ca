"""The performance model: throughput = avg commit / step time, step time = a + b·context.

Two factors multiply, so a change in tok/s splits exactly in log space::

    log(tok_s' / tok_s) ≈ log(commit' / commit) − log(step' / step) + rest

``rest`` is what neither acceptance nor step time explains (prefill, client,
transport). :func:`attribute` returns the three shares.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class ContextFit:
    """Least-squares line step_ms = a + b · context over one text class's cases."""

    a_ms: float
    b_ms_per_token: float
    residual_ms: float
    n_points: int

    @property
    def b_ms_per_1k(self) -> float:
        return 1000.0 * self.b_ms_per_token

    def predict_step_ms(self, context: float) -> float:
        return self.a_ms + self.b_ms_per_token * context

    def to_dict(self) -> dict[str, Any]:
        return {"a_ms": self.a_ms, "b_ms_per_token": self.b_ms_per_token,
                "residual_ms": self.residual_ms, "n_points": self.n_points}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ContextFit:
        return cls(float(data["a_ms"]), float(data["b_ms_per_token"]),
                   float(data.get("residual_ms", 0.0)), int(data.get("n_points", 0)))


def fit_context(points: Sequence[tuple[float, float]]) -> ContextFit | None:
    """Fit (context, step_ms) points; None with fewer than two distinct contexts."""
    if len({x for x, _ in points}) < 2:
        return None
    x = np.array([p[0] for p in points], dtype=float)
    y = np.array([p[1] for p in points], dtype=float)
    b, a = np.polyfit(x, y, 1)
    resid = y - (a + b * x)
    return ContextFit(float(a), float(b), float(np.sqrt(np.mean(resid**2))), len(points))


@dataclass(frozen=True)
class Attribution:
    """How a tok/s change splits into acceptance, step time and the unexplained rest."""

    tok_ratio: float
    commit_ratio: float
    step_ratio: float

    @property
    def acceptance_log(self) -> float:
        return math.log(self.commit_ratio)

    @property
    def step_log(self) -> float:
        return -math.log(self.step_ratio)

    @property
    def rest_log(self) -> float:
        return math.log(self.tok_ratio) - self.acceptance_log - self.step_log

    def share(self, part: str) -> float:
        """Fraction of the log tok/s change due to ``part`` (acceptance, step, rest)."""
        total = math.log(self.tok_ratio)
        if total == 0:
            return 0.0
        value: float = getattr(self, f"{part}_log")
        return value / total


def attribute(tok_ratio: float, commit_ratio: float, step_ratio: float) -> Attribution:
    """Split a tok/s ratio (new / old) into its acceptance and step-time parts."""
    return Attribution(tok_ratio, commit_ratio, step_ratio)


def predict_tok_s(avg_commit: float, step_ms: float, output_tokens: int,
                  prefill_ms: float = 0.0) -> float:
    """tok/s a request should see from its acceptance and step time (plus prefill)."""
    steps = (output_tokens - 1) / avg_commit
    return output_tokens / ((prefill_ms + steps * step_ms) / 1000.0)
