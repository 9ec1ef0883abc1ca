"""Adaptive repeats: after each repeat of a case, stop, take another, or give up as unstable.

Used by every measuring loop (:mod:`specperf.measure.loop`, the parser and stream paths, A/B
arms). It sits below the verdicts: it judges how sure a case is, never whether it regressed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from ..core.limits import DIRECTION, FLOOR, LABELS, tolerance
from ..core.stats import (
    MAD_TO_SIGMA,
    UNSTABLE_REL_MAD,
    Summary,
    median_se,
    summarize,
)


class Reference(Protocol):
    """What a repeat decision needs of a baseline case: its metric summaries."""

    @property
    def metrics(self) -> Mapping[str, Summary]: ...


# A median's standard error is MAD_TO_SIGMA·MAD·√(π/2)/√n (core.stats). A median
# 3 standard errors from its limit would need a 3σ fluke to land on the other side (≈0.1%
# one-sided), so more repeats would not change the verdict.
CLEAR_MARGIN_SE = 3.0


@dataclass(frozen=True)
class RepeatDecision:
    """Whether a case needs more repeats: "stop", "more" or "unstable", and why."""

    action: str
    reason: str


def decide_repeats(values: Mapping[str, Sequence[float]], base: Reference | None,
                   tolerances: Mapping[str, float], *, min_repeats: int,
                   max_repeats: int, confirm_repeats: int | None = None,
                   max_spread: float = UNSTABLE_REL_MAD,
                   fixed: Mapping[str, float] | None = None) -> RepeatDecision:
    """Decide after each repeat whether to stop, take another, or give up as unstable.

    1. Fewer than ``min_repeats`` repeats: more.
    2. Any metric whose relative MAD exceeds ``max_spread`` (default 0.10,
       stats.UNSTABLE_REL_MAD; ``--specperf-max-spread``) is too noisy
       to judge: more, or "unstable" once ``max_repeats`` is reached — a noisy cell
       must never pass or fail.
    3. With a baseline: for each metric with a tolerance, the margin is the median's
       relative distance from its regression limit, in units of the baseline median;
       the median's uncertainty is MAD_TO_SIGMA·MAD·√(π/2)/√n in the same
       units. Any margin within 3 uncertainties (the verdict could still flip): more,
       until ``max_repeats`` (then stop and judge on what there is). Only this run's
       spread counts: more repeats cannot shrink the baseline's.
       ``fixed`` gives, per metric, the relative standard error of the comparison that more
       repeats cannot shrink (the baseline median's and the run-to-run term's, e.g. the
       3 % prior on a first night). Once this run's median is known to within a third of
       it, the verdict's interval is within 6 % of the narrowest any number of repeats
       could make it: stop, and let the verdict say what that interval decides.
    4. A metric past its limit (the case would fail) with fewer than ``confirm_repeats``
       (default: twice ``min_repeats``, within ``max_repeats``): more. Blocking a deploy is
       expensive, and three samples can agree by chance under noise that does not average
       out within a request; the extra repeats are spent only on cells about to fail, and
       give the spread check of rule 2 a fair chance to call them unstable instead.
    5. Otherwise (and always without a baseline once stable): stop.
    """
    n = min((len(v) for v in values.values() if v), default=0)
    if n < min_repeats:
        return RepeatDecision("more", f"{n} of at least {min_repeats} repeats taken.")
    # A median inside its metric's floor (core.limits.FLOOR: a tiny prompt's prefill) cannot
    # regress, so its spread and margin decide nothing.
    summaries = {m: s for m, v in values.items()
                 if v and (s := summarize(v)).median >= FLOOR.get(m, 0.0)}
    # Prefill is one short burst per request (a few ms on a small prompt, amplified by the
    # simulator's time scale): its spread never makes a cell unjudgeable; its wider tolerance
    # and the near-limit rule below take care of it.
    noisy = _noisy({m: s for m, s in summaries.items() if m not in SPREAD_EXEMPT}, n,
                   max_repeats, max_spread)
    if noisy is not None:
        return noisy
    if base is None:
        return RepeatDecision("stop", f"no baseline to compare with; {n} stable repeats taken.")
    confirm = min(max_repeats, confirm_repeats or 2 * min_repeats)
    return _near_limit(summaries, base, tolerances, n, max_repeats, confirm, fixed or {})


SPREAD_EXEMPT = ("ttft_ms",)


def _noisy(summaries: Mapping[str, Summary], n: int, max_repeats: int,
           max_spread: float = UNSTABLE_REL_MAD) -> RepeatDecision | None:
    for metric, summary in summaries.items():
        if summary.rel_mad <= max_spread:
            continue
        spread = (f"{LABELS.get(metric, metric)} spreads too widely: relative MAD "
                  f"{_above(summary.rel_mad, max_spread)} after {n} repeats")
        if n < max_repeats:
            return RepeatDecision("more", f"{spread}; taking more.")
        return RepeatDecision("unstable", f"{spread} (the bound): the cell cannot be judged — "
                              f"quiet the server (other load, clocks) or raise the repeat bound.")
    return None


def _above(value: float, bound: float) -> str:
    """'0.13 > 0.10', with digits enough that the two never print alike ('0.1004 > 0.1000')."""
    for digits in range(2, 7):
        if f"{value:.{digits}f}" != f"{bound:.{digits}f}":
            return f"{value:.{digits}f} > {bound:.{digits}f}"
    return f"{value:g} > {bound:g}"


# This run's median known to a third of what repeats cannot shrink: √(1 + 1/9) = 1.054, so
# the verdict's interval is within 6 % of its narrowest.
FIXED_DOMINATES = 3.0


def _near_limit(summaries: Mapping[str, Summary], base: Reference,
                tolerances: Mapping[str, float], n: int, max_repeats: int,
                confirm: int, fixed: Mapping[str, float]) -> RepeatDecision:
    settled: list[str] = []
    for metric, summary in summaries.items():
        reference = base.metrics.get(metric)
        if metric not in DIRECTION or reference is None or not reference.median:
            continue
        margin, uncertainty = _margin(metric, summary, reference.median,
                                      tolerance(tolerances, metric))
        if margin < 0 and n < confirm:
            return RepeatDecision("more", f"{LABELS.get(metric, metric)} is past its limit "
                                  f"after {n} repeats; confirming with {confirm}.")
        if abs(margin) >= CLEAR_MARGIN_SE * uncertainty:
            continue
        floor = fixed.get(metric, 0.0)
        if floor > 0 and FIXED_DOMINATES * uncertainty <= floor:
            settled.append(f"{LABELS.get(metric, metric)} ({uncertainty:.1%} against "
                           f"{floor:.1%})")
            continue
        near = (f"{LABELS.get(metric, metric)} sits {abs(margin):.1%} from its limit with "
                f"uncertainty {uncertainty:.1%} after {n} repeats")
        if n < max_repeats:
            return RepeatDecision("more", f"{near}; taking more.")
        return RepeatDecision("stop", f"{near}, at the repeat bound: judging on these.")
    if settled:
        return RepeatDecision("stop", f"after {n} repeats more cannot narrow the verdict: near "
                              f"its limit, the median's uncertainty is under a third of what "
                              f"repeats cannot shrink (the baseline's and the run-to-run "
                              f"noise): {', '.join(settled)}.")
    return RepeatDecision("stop", f"verdict clear after {n} repeats: every metric is at least "
                          f"{CLEAR_MARGIN_SE:g} standard errors from its limit.")


def _margin(metric: str, summary: Summary, base_median: float,
            tolerance: float) -> tuple[float, float]:
    """Signed distance of the median from its limit (positive: safe side) and its uncertainty.

    Both are fractions of the baseline median, the unit the tolerance is given in.
    """
    good = DIRECTION[metric] * (summary.median / base_median - 1.0)
    uncertainty = median_se(MAD_TO_SIGMA * summary.mad, summary.n)
    return good + tolerance, uncertainty / abs(base_median)
