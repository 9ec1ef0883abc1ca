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

from .stats import median_se


@dataclass(frozen=True)
class ContextFit:
    """Line step_ms = a + b · context over one text class's cases, with its uncertainty.

    ``a_se_ms``, ``b_se_ms_per_token`` and ``cov_ab`` are the standard errors of a and b and
    their covariance (None when the points carried no spread, as in baselines written
    before fits knew their error).
    """

    a_ms: float
    b_ms_per_token: float
    residual_ms: float
    n_points: int
    a_se_ms: float | None = None
    b_se_ms_per_token: float | None = None
    cov_ab: float | None = None
    dof: int = 0  # degrees of freedom of the errors (pooled repeats)

    @property
    def b_ms_per_1k(self) -> float:
        return 1000.0 * self.b_ms_per_token

    @property
    def b_se_ms_per_1k(self) -> float | None:
        return None if self.b_se_ms_per_token is None else 1000.0 * self.b_se_ms_per_token

    def predict_step_ms(self, context: float) -> float:
        return self.a_ms + self.b_ms_per_token * context

    def predict_se_ms(self, context: float) -> float:
        """Standard error of the predicted step time at ``context`` (0 when unknown)."""
        if self.a_se_ms is None or self.b_se_ms_per_token is None:
            return 0.0
        var = self.a_se_ms**2 + (context * self.b_se_ms_per_token) ** 2 \
            + 2.0 * context * (self.cov_ab or 0.0)
        return math.sqrt(max(var, 0.0))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"a_ms": self.a_ms, "b_ms_per_token": self.b_ms_per_token,
                               "residual_ms": self.residual_ms, "n_points": self.n_points}
        if self.b_se_ms_per_token is not None:
            out.update(a_se_ms=self.a_se_ms, b_se_ms_per_token=self.b_se_ms_per_token,
                       cov_ab=self.cov_ab, dof=self.dof)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ContextFit:
        def opt(key: str) -> float | None:
            return None if data.get(key) is None else float(data[key])

        return cls(float(data["a_ms"]), float(data["b_ms_per_token"]),
                   float(data.get("residual_ms", 0.0)), int(data.get("n_points", 0)),
                   opt("a_se_ms"), opt("b_se_ms_per_token"), opt("cov_ab"),
                   int(data.get("dof", 0)))


def fit_context(points: Sequence[tuple[float, float]]) -> ContextFit | None:
    """Fit (context, step_ms) points; None with fewer than two distinct contexts."""
    if len({x for x, _ in points}) < 2:
        return None
    x = np.array([p[0] for p in points], dtype=float)
    y = np.array([p[1] for p in points], dtype=float)
    b, a = np.polyfit(x, y, 1)
    resid = y - (a + b * x)
    return ContextFit(float(a), float(b), float(np.sqrt(np.mean(resid**2))), len(points))


# -- fits that know their uncertainty -------------------------------------------------------


# The smallest relative error of a case's step-time median in a fit: between two cases of a
# loaded 2-core CI box the simulator's 28 ms step moved 0.26 ms (0.9 %) while each case's own
# repeats agreed within 0.03 ms; half a percent per case is the floor a slope is judged with.
CASE_DRIFT = 0.005


@dataclass(frozen=True)
class Spread:
    """Repeats of one metric at one point: their median and relative scatter."""

    median: float
    rel_var_sum: float  # Σ (value / mean − 1)² over the repeats
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        arr = np.asarray(values, dtype=float)
        mean = float(np.mean(arr))
        rel = float(np.sum((arr / mean - 1.0) ** 2)) if mean else 0.0
        return cls(float(np.median(arr)), rel, len(arr))


def pooled_rel_sd(spreads: Sequence[Spread]) -> tuple[float, int]:
    """Relative standard deviation pooled over points (and its degrees of freedom): the
    step noise is alike across contexts, and three repeats alone would say little."""
    dof = sum(s.n - 1 for s in spreads)
    if dof <= 0:
        return 0.0, 0
    return math.sqrt(sum(s.rel_var_sum for s in spreads) / dof), dof


def median_rel_se(spread: Spread, rel_sd: float) -> float:
    """Relative standard error of a point's median."""
    return median_se(rel_sd, max(spread.n, 1))


def fit_spreads(points: Sequence[tuple[float, Spread]]) -> ContextFit | None:
    """Weighted least squares of step_ms medians on context, with standard errors.

    Each median weighs by its standard error (from the pooled relative scatter of the
    repeats), never less than :data:`CASE_DRIFT` of its value: the contexts are measured one
    after another, and what moves the server between them (clocks, load, a loaded client)
    moves a whole case, which its own repeats cannot see. With more than two contexts a
    scatter beyond those errors (the line does not fit) widens them by √(χ²/dof). So a slope
    over contexts 7 tokens apart carries the error it deserves even when each case's repeats
    agree to a hundredth of a millisecond.
    """
    if len({x for x, _ in points}) < 2:
        return None
    rel_sd, dof = pooled_rel_sd([s for _, s in points])
    x = np.array([p[0] for p in points], dtype=float)
    y = np.array([s.median for _, s in points], dtype=float)
    se = np.array([max(median_rel_se(s, rel_sd), CASE_DRIFT) * abs(s.median) for _, s in points])
    w = 1.0 / se**2
    design = np.vstack([np.ones_like(x), x]).T
    cov = np.linalg.inv(design.T @ (design * w[:, None]))
    a, b = cov @ (design.T @ (w * y))
    resid = y - (a + b * x)
    if len(points) > 2:
        cov = cov * max(1.0, float(np.sum(w * resid**2)) / (len(points) - 2))
    return ContextFit(float(a), float(b), float(np.sqrt(np.mean(resid**2))), len(points),
                      float(np.sqrt(cov[0, 0])), float(np.sqrt(cov[1, 1])), float(cov[0, 1]),
                      dof)


def rel_se(values: Sequence[float]) -> float:
    """Relative standard error of the median of ``values`` (0 with fewer than two)."""
    spread = Spread.of(values)
    sd, dof = pooled_rel_sd([spread])
    return median_rel_se(spread, sd) if dof else 0.0


def rest_ratio(tok_s: float, avg_commit: float, step_ms: float, output_tokens: int,
               prefill_ms: float = 0.0) -> float:
    """Observed tok/s over what acceptance and step time predict: the model's rest (client,
    transport). 1.0 when the model explains the observation."""
    return tok_s / predict_tok_s(avg_commit, step_ms, output_tokens, prefill_ms)


def fit_repeats(points: Sequence[tuple[float, Sequence[float]]]) -> ContextFit | None:
    """:func:`fit_spreads` of (context, step_ms repeats) points; points without repeats are
    left out."""
    return fit_spreads([(x, Spread.of(values)) for x, values in points if len(values)])


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
