"""The comparisons a bisection decides on: a version's change against tonight's good end, and
whether that change is the good end's, the bad end's, or not yet known.

Every comparison in a bisect is a same-night one: both sides are measured tonight on the same
box, so the run-to-run term cancels (``core.noise.NoiseModel.same_night``) and only the
requests' own spread counts. A factor's change is the mean over cases of the difference of
the mean log figure (≈ a relative change), its variance the sum of both sides' request
variance, pooled within cases.

A version is classified per factor as Chromium's Pinpoint does for commits: **bad** when its
change is closer to the bad end's than to the good end's (the midpoint test is confident),
**good** when closer to the good end's, **unknown** when the interval straddles the midpoint:
then the search takes more samples of it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.noise import NoiseModel

# A comparison's z beyond which the bad end differs from the good end (the regression
# reproduced), and below which it surely does not (between: more samples of both ends).
REPRODUCED_Z = 3.0
NOT_REPRODUCED_Z = 1.5
# A version's midpoint z beyond which it is classified good or bad (between: unknown).
CLASSIFY_Z = 2.5
# The smallest relative change of a factor the tool bisects (below: not a regression).
MIN_CHANGE = 0.02
# A floor on a version's per-request log spread: a server whose acceptance is exactly
# repeatable (temperature 0, exact prompts) would otherwise make any difference "certain".
SPREAD_FLOOR = 0.002
# The spread assumed of a version measured once per case (no spread of its own yet).
UNMEASURED_SPREAD = 0.05

# case id → metric → the values of its measured requests.
Figures = Mapping[str, Mapping[str, Sequence[float]]]


@dataclass(frozen=True)
class Factor:
    """A factor bisect follows: its name in sentences, its metric, the way it gets worse."""

    name: str
    metric: str
    worse: int  # +1: a rise is a regression (step time); −1: a fall is (acceptance)
    unit: str


FACTORS: tuple[Factor, ...] = (
    Factor("acceptance", "avg_commit", -1, "tokens/step"),
    Factor("step time", "step_ms", +1, "ms"),
    Factor("prefill", "ttft_ms", +1, "ms"),
)


def factor_named(name: str) -> Factor:
    """The factor called ``name`` (ValueError listing the names otherwise)."""
    for factor in FACTORS:
        if name in (factor.name, factor.metric):
            return factor
    raise ValueError(f"unknown factor {name!r}: expected one of "
                     f"{', '.join(f.name for f in FACTORS)}")


@dataclass(frozen=True)
class Side:
    """One version's figures of one metric, in logs: per case the mean and the count, and the
    pooled per-request variance."""

    means: Mapping[str, float]
    counts: Mapping[str, int]
    var: float
    level: float  # the median figure over the cases' means, in the metric's own unit

    def mean_var(self, case: str) -> float:
        return self.var / self.counts[case]


def side(figures: Figures, metric: str) -> Side | None:
    """``figures`` of ``metric`` as one side of a comparison; None when no case has values."""
    means: dict[str, float] = {}
    counts: dict[str, int] = {}
    ss, df = 0.0, 0
    for case, metrics in figures.items():
        logs = [math.log(v) for v in metrics.get(metric, ()) if v and v > 0]
        if not logs:
            continue
        mean = sum(logs) / len(logs)
        means[case], counts[case] = mean, len(logs)
        ss += sum((x - mean) ** 2 for x in logs)
        df += len(logs) - 1
    if not means:
        return None
    var = max(ss / df if df > 0 else UNMEASURED_SPREAD**2, SPREAD_FLOOR**2)
    level = math.exp(sorted(means.values())[len(means) // 2])
    return Side(means, counts, var, level)


@dataclass(frozen=True)
class Change:
    """A factor's change of one version against the good end: the log difference and its
    standard error (relative, ≈ a fraction), and the cases it was taken over."""

    log: float
    se: float
    cases: int

    @property
    def relative(self) -> float:
        return math.expm1(self.log)

    def interval(self, z: float = 1.96) -> tuple[float, float]:
        """The relative change's interval (default 95 %)."""
        return math.expm1(self.log - z * self.se), math.expm1(self.log + z * self.se)

    def text(self) -> str:
        low, high = self.interval()
        return (f"{100 * self.relative:+.1f} % (95 % interval {100 * low:+.1f} … "
                f"{100 * high:+.1f} %)")

    def to_dict(self) -> dict[str, Any]:
        low, high = self.interval()
        return {"relative": self.relative, "low": low, "high": high, "log": self.log,
                "se": self.se, "cases": self.cases}


def _common(a: Side, b: Side) -> list[str]:
    return sorted(set(a.means) & set(b.means))


def change(good: Side, other: Side, metric: str) -> Change | None:
    """``other`` against ``good``: the mean over shared cases of the log difference. The
    comparison is same-night, so the run term adds nothing (kept explicit: one model)."""
    cases = _common(good, other)
    if not cases:
        return None
    n = len(cases)
    diff = sum(other.means[c] - good.means[c] for c in cases) / n
    var = sum(other.mean_var(c) + good.mean_var(c) for c in cases) / n**2
    var += NoiseModel.same_night().of(metric).comparison_var(cases=n)
    return Change(diff, math.sqrt(var), n)


def midpoint_z(good: Side, version: Side, bad: Side, factor: Factor) -> float | None:
    """How far ``version`` lies past the midpoint between the ends, toward the bad end, in
    standard errors: x_v − (x_g + x_b)/2 per case, signed so that positive is bad-ward."""
    cases = sorted(set(good.means) & set(version.means) & set(bad.means))
    if not cases:
        return None
    n = len(cases)
    bad_dir = sum(bad.means[c] - good.means[c] for c in cases)
    sign = 1.0 if bad_dir >= 0 else -1.0
    mid = sum(version.means[c] - (good.means[c] + bad.means[c]) / 2 for c in cases) / n
    var = sum(version.mean_var(c) + (good.mean_var(c) + bad.mean_var(c)) / 4
              for c in cases) / n**2
    return sign * mid / math.sqrt(var)


def classify(good: Side, version: Side, bad: Side, factor: Factor,
             z: float = CLASSIFY_Z) -> str:
    """"good", "bad" or "unknown": is ``version`` nearer the good end or the bad end?"""
    t = midpoint_z(good, version, bad, factor)
    if t is None:
        return "unknown"
    if t >= z:
        return "bad"
    return "good" if t <= -z else "unknown"


def reproduced(bad_change: Change | None, factor: Factor,
               min_change: float = MIN_CHANGE) -> str:
    """Did ``factor`` get worse from the good end to the bad end? "yes", "no", or "unknown"
    (an effect as large as ``min_change`` the samples cannot yet confirm or rule out)."""
    if bad_change is None:
        return "no"
    worse = factor.worse * bad_change.log
    least = math.log1p(min_change)
    z = worse / bad_change.se
    if z >= REPRODUCED_Z and worse >= least:
        return "yes"
    if z < NOT_REPRODUCED_Z or worse + NOT_REPRODUCED_Z * bad_change.se < least:
        return "no"
    return "unknown"
