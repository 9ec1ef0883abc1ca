"""The comparisons a bisection decides on: a version's change against tonight's good end, and
whether that change is the good end's, the bad end's, or not yet known.

Every comparison in a bisect is a same-night one: both sides are measured tonight on the same
box, so the run-to-run term cancels (``core.noise.NoiseModel.same_night``) and only the
requests' own spread counts. A factor's change is the mean over cases of the difference of
the mean log figure (≈ a relative change), its variance the sum of both sides' request
variance, pooled within cases; its degrees of freedom are Welch–Satterthwaite's, and every
threshold below is a normal z turned into Student's t at those degrees, so three requests per
case do not make a spread look surer than it is.

A version is classified per factor as Chromium's Pinpoint does for commits: **bad** when its
change is closer to the bad end's than to the good end's (the midpoint test is confident),
**good** when closer to the good end's, **unknown** when the interval straddles the midpoint:
then the search takes more samples of it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..core import interval
from ..core.limits import format_ci, format_percent
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


# What the user feels, bisected only when no factor above moved: a cost outside the decode
# (a parser's post-processing, a proxy) shows in tok/s alone.
THROUGHPUT = Factor("tok/s", "tok_s", -1, "tok/s")
ALL_FACTORS: tuple[Factor, ...] = (*FACTORS, THROUGHPUT)


def factor_named(name: str) -> Factor:
    """The factor called ``name`` (ValueError listing the names otherwise)."""
    for factor in ALL_FACTORS:
        if name in (factor.name, factor.metric):
            return factor
    raise ValueError(f"unknown factor {name!r}: expected one of "
                     f"{', '.join(f.name for f in ALL_FACTORS)}")


@dataclass(frozen=True)
class Side:
    """One version's figures of one metric, in logs: per case the mean and the count, and the
    pooled per-request variance."""

    means: Mapping[str, float]
    counts: Mapping[str, int]
    var: float
    df: float  # of ``var``: requests less one per case (inf for the assumed spread)
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
    return Side(means, counts, var, float(df) if df > 0 else math.inf, level)


def welch_df(parts: Sequence[tuple[float, float]]) -> float:
    """Welch–Satterthwaite degrees of freedom of a sum of variances, each ``(var, df)``
    (core/interval.py's, the one every judge uses)."""
    return interval.satterthwaite(parts)


def t_threshold(z: float, df: float) -> float:
    """The Student-t bound at ``df`` with the one-sided tail of a normal ``z``."""
    if not math.isfinite(df):
        return z
    return interval.one_sided(0.5 * math.erfc(-z / math.sqrt(2)), df)


def _parts(side: Side, cases: Sequence[str], weight: float) -> tuple[float, float]:
    """``side``'s variance in a mean over ``cases`` (times ``weight``), with its df."""
    return weight * sum(side.mean_var(c) for c in cases) / len(cases) ** 2, side.df


@dataclass(frozen=True)
class Change:
    """A factor's change of one version against the good end: the log difference and its
    standard error (relative, ≈ a fraction), and the cases it was taken over."""

    log: float
    se: float
    cases: int
    df: float = math.inf

    @property
    def relative(self) -> float:
        return math.expm1(self.log)

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        """The relative change's interval (default 95 %; Student's t at the change's df)."""
        return interval.relative(self.log, self.se, self.df, level)

    def t(self) -> float:
        """The change in standard errors."""
        return self.log / self.se

    def sure(self, z: float) -> bool:
        """Whether the change exceeds ``z`` normal standard errors' worth of confidence (its
        t beyond Student's bound with the same tail at its df)."""
        return self.t() >= t_threshold(z, self.df)

    def text(self) -> str:
        low, high = self.interval()
        return f"{format_percent(self.relative)} ({format_ci(low, high)})"

    def to_dict(self) -> dict[str, Any]:
        low, high = self.interval()
        return {"relative": self.relative, "low": low, "high": high, "log": self.log,
                "se": self.se, "df": self.df if math.isfinite(self.df) else None,
                "cases": self.cases}


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
    parts = [_parts(other, cases, 1.0), _parts(good, cases, 1.0)]
    run_var = NoiseModel.same_night().of(metric).comparison_var(cases=n)
    return Change(diff, interval.se_of(*(v for v, _ in parts), run_var), n, welch_df(parts))


def _midpoint(good: Side, version: Side, bad: Side
              ) -> tuple[float, tuple[float, float], list[tuple[float, float]]] | None:
    """x_v − (x_g + x_b)/2 over the shared cases (signed bad-ward), the version's own
    variance part and the ends' parts, each (var, df)."""
    cases = sorted(set(good.means) & set(version.means) & set(bad.means))
    if not cases:
        return None
    n = len(cases)
    sign = 1.0 if sum(bad.means[c] - good.means[c] for c in cases) >= 0 else -1.0
    mid = sum(version.means[c] - (good.means[c] + bad.means[c]) / 2 for c in cases) / n
    return (sign * mid, _parts(version, cases, 1.0),
            [_parts(good, cases, 0.25), _parts(bad, cases, 0.25)])


def midpoint(good: Side, version: Side, bad: Side) -> Change | None:
    """How far ``version`` lies past the midpoint between the ends, toward the bad end:
    x_v − (x_g + x_b)/2 over the shared cases, positive bad-ward, with its error and df."""
    found = _midpoint(good, version, bad)
    if found is None:
        return None
    mid, own, ends = found
    parts = [own, *ends]
    return Change(mid, interval.se_of(*(v for v, _ in parts)), len(version.means),
                  welch_df(parts))


def ends_dominate(good: Side, version: Side, bad: Side) -> bool:
    """Whether the ends' requests, not the version's, carry most of the midpoint's variance:
    then more requests of the version alone cannot decide it."""
    found = _midpoint(good, version, bad)
    return found is not None and sum(v for v, _ in found[2]) > found[1][0]


def classify(good: Side, version: Side, bad: Side, z: float = CLASSIFY_Z) -> str:
    """"good", "bad" or "unknown": is ``version`` nearer the good end or the bad end?"""
    mid = midpoint(good, version, bad)
    if mid is None:
        return "unknown"
    if mid.sure(z):
        return "bad"
    return "good" if replace(mid, log=-mid.log).sure(z) else "unknown"


def reproduced(bad_change: Change | None, factor: Factor,
               min_change: float = MIN_CHANGE) -> str:
    """Did ``factor`` get worse from the good end to the bad end? "yes", "no", or "unknown"
    (an effect as large as ``min_change`` the samples cannot yet confirm or rule out)."""
    if bad_change is None:
        return "no"
    worse = factor.worse * bad_change.log
    least = math.log1p(min_change)
    worse_change = replace(bad_change, log=worse)
    if worse_change.sure(REPRODUCED_Z) and worse >= least:
        return "yes"
    reach = t_threshold(NOT_REPRODUCED_Z, bad_change.df) * bad_change.se
    if not worse_change.sure(NOT_REPRODUCED_Z) or worse + reach < least:
        return "no"
    return "unknown"
