"""The verdict contract: one set of status words and one rule, for every judge.

Every judge — a case, a context fit, a sweep factor, exact acceptance, a parser or stream
path, nightly drift — answers with these words (README "The verdict contract"):

- **pass**: no change we are sure of (or a point estimate inside the tolerance);
- **noted**: a change we are sure of, but inside the tolerance: shown, never a failure;
- **regression**: beyond the tolerance in the bad direction, with confidence;
- **improved**: beyond the tolerance in the good direction, with confidence;
- **undetermined**: the evidence straddles the tolerance and no more can be had: a skip
  that names what would decide, never a pass or a fail.

The tolerance says *what matters*; the statistics (an interval, a sequential test) say only
*whether we are sure*. A regression is stored as ``"fail"``, the word every record and view
has always read (``record/results.schema.json``): :data:`REGRESSION` is that word, so the
mapping lives here and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass

PASS = "pass"
NOTED = "noted"
REGRESSION = "fail"  # the contract's "regression", in the word results.json stores
IMPROVED = "improved"
UNDETERMINED = "undetermined"
STATUSES = (PASS, NOTED, REGRESSION, IMPROVED, UNDETERMINED)
# The contract's name for each stored word (sentences and docs say "regression").
NAMES = {PASS: "pass", NOTED: "noted", REGRESSION: "regression", IMPROVED: "improved",
         UNDETERMINED: "undetermined"}

# A sequential test's decision about "the change is beyond the tolerance" (core/sequential):
# "regressed" (it is), "clean" (it is not), "more" (undecided, no more evidence to be had).
SEQUENTIAL = ("regressed", "clean", "more")


@dataclass(frozen=True)
class Change:
    """A relative change of a metric (e.g. −0.05: it fell 5 %) and its confidence interval.

    ``low``/``high`` None: a point estimate whose certainty is not stated (a case's medians of
    repeats that settled): judged by its position alone, and never "noted". ``low == high ==
    estimate``: a change known exactly (exact acceptance): any non-zero change is sure.
    """

    estimate: float
    low: float | None = None
    high: float | None = None

    @classmethod
    def exact(cls, estimate: float) -> Change:
        return cls(estimate, estimate, estimate)


def status(change: Change, direction: int, tolerance: float,
           sequential: str | None = None) -> str:
    """The contract's status of ``change`` for a metric of ``direction`` (+1: must not fall,
    −1: must not rise) against ``tolerance`` (a fraction).

    ``sequential``, when given, is a sequential test's decision on "beyond the tolerance in
    the bad direction" (:data:`SEQUENTIAL`): "regressed" is a regression; "clean" rules one
    out, leaving improved / noted / pass to the interval; "more" falls back to the interval.
    """
    if sequential == "regressed":
        return REGRESSION
    # In "worse" coordinates: positive is the bad direction.
    worse = -direction * change.estimate
    if change.low is None or change.high is None:
        if sequential != "clean" and worse > tolerance:
            return REGRESSION
        return IMPROVED if worse < -tolerance else PASS
    low, high = sorted((-direction * change.low, -direction * change.high))
    if low > tolerance and sequential != "clean":
        return REGRESSION
    if high < -tolerance:
        return IMPROVED
    if high > tolerance and sequential != "clean":
        return UNDETERMINED  # could be beyond the tolerance, could be inside: not decided
    return NOTED if low > 0 or high < 0 else PASS


def slope_limit(tolerance: float, slope: float, far_step_ms: float, far: float,
                step_tolerance: float | None) -> float:
    """The limit of a slope's rise (a fraction): its own ``tolerance``, widened where that
    is stricter than the step-time tolerance at the farthest point measured.

    A slope of nearly zero (a CPU server whose step time hardly grows over the contexts
    measured) makes any relative limit a hair: 60 % of 0.3 ms per 1k is 0.2 ms at 1k context,
    far inside the noise of one step. A slope change that moves the baseline's step time
    ``far_step_ms`` at the farthest point ``far`` by less than ``step_tolerance`` leaves every
    measured step time inside the tolerance the user set for it, so it is inside tolerance
    here too: the limit is at least ``step_tolerance · far_step_ms / (slope · far)``.
    """
    if step_tolerance is None or slope <= 0 or far <= 0 or far_step_ms <= 0:
        return tolerance
    return max(tolerance, step_tolerance * far_step_ms / (slope * far))
