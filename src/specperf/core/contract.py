"""The verdict contract: one set of status words and one rule, for every judge.

Every judge — a case, a context fit, a sweep factor, exact acceptance, a parser or stream
path, the predict-and-reconcile check, nightly drift — answers with these words (README "The
verdict contract"), and with no others (:data:`STATUSES`):

- **pass**: no change we are sure of (or a point estimate inside the tolerance);
- **noted**: a change we are sure of, but inside the tolerance: shown, never a failure;
- **regression**: beyond the tolerance in the bad direction, with confidence;
- **improved**: beyond the tolerance in the good direction, with confidence;
- **undetermined**: the evidence straddles the tolerance, or there is none to compare (no
  baseline figure, a figure the server did not report): never a pass or a fail; the sentence
  names what would decide.

The tolerance says *what matters*; the statistics (an interval, a sequential test) say only
*whether we are sure*. A regression is stored as ``"fail"``, the word every record and view
has always read (``record/results.schema.json``): :data:`REGRESSION` is that word, so the
mapping lives here and nowhere else.

Why a status was given, where the words alone would mislead, is a **reason** beside it
(:data:`REASONS`): a comparison with nothing in the baseline to compare is undetermined with
reason ``no-baseline``; a path comparison whose figure the server did not report is
undetermined with reason ``unmeasured`` (its test errors: infrastructure, never a failure); a
reconcile row off the baseline's context curve that this run's own step time explains is
noted with reason ``explained`` (the case's step-time verdict speaks for it).

Statuses of several parts (a case's metrics, a sweep's factors, a verdict and its exact
acceptance, the draft positions, the concurrency levels) are combined by :func:`combine`, with
one priority order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum


class Status(str, Enum):
    """The contract's five words, as results.json stores them: a type mypy checks, so a
    misspelt status is an error before it is a wrong verdict (tests/test_contract.py). A
    str, so it compares, hashes, formats and serialises as its word."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    PASS = "pass"
    NOTED = "noted"
    REGRESSION = "fail"  # the contract's "regression", in the word results.json stores
    IMPROVED = "improved"
    UNDETERMINED = "undetermined"


PASS = Status.PASS
NOTED = Status.NOTED
REGRESSION = Status.REGRESSION
IMPROVED = Status.IMPROVED
UNDETERMINED = Status.UNDETERMINED
STATUSES = tuple(Status)
# The contract's name for each stored word (sentences and docs say "regression").
NAMES: dict[str, str] = {PASS: "pass", NOTED: "noted", REGRESSION: "regression",
                         IMPROVED: "improved", UNDETERMINED: "undetermined"}
# combine(): the first status of this order found among the parts is the whole's.
PRIORITY = (REGRESSION, UNDETERMINED, IMPROVED, NOTED, PASS)

# Reasons beside a status, and the one status each goes with.
NO_BASELINE = "no-baseline"
UNMEASURED = "unmeasured"
EXPLAINED = "explained"
REASONS = {NO_BASELINE: UNDETERMINED, UNMEASURED: UNDETERMINED, EXPLAINED: NOTED}
# The words a record may hold as a verdict's status: the contract's, and the two reasons older
# records wrote as statuses (record/results.schema.json); the store refuses any other.
RECORDED: tuple[str, ...] = (*STATUSES, NO_BASELINE, UNMEASURED)

# A sequential test's decision about "the change is beyond the tolerance" (core/sequential):
# "regressed" (it is), "clean" (it is not), "more" (undecided, no more evidence to be had).
SEQUENTIAL = ("regressed", "clean", "more")


def combine(statuses: Iterable[str]) -> Status:
    """The status of a whole from its parts' statuses: regression > undetermined > improved >
    noted > pass (:data:`PRIORITY`).

    A regression anywhere is the whole's regression: a part that fails fails the whole. An
    undetermined part comes next, before any improvement: a whole with an undecided part
    cannot be called better, nor a plain pass (the undecided part may hide a regression).
    An improvement beyond the tolerance outranks a change noted inside it, and a noted
    change a pass, so the whole shows the largest sure change. No parts at all is
    undetermined: nothing was judged. A word outside :data:`STATUSES` is a ValueError.
    """
    found = set(statuses)
    unknown = found - set(STATUSES)
    if unknown:
        raise ValueError(f"not a verdict contract status: {sorted(unknown)}; the contract's "
                         f"words are {[str(s) for s in STATUSES]}")
    return next((s for s in PRIORITY if s in found), UNDETERMINED)


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

    def worse(self, direction: int) -> tuple[float, float]:
        """The interval (the point, twice, when none is stated) in "worse" coordinates:
        positive is the bad direction of a metric of ``direction``, low end first."""
        if self.low is None or self.high is None:
            point = -direction * self.estimate
            return point, point
        low, high = sorted((-direction * self.low, -direction * self.high))
        return low, high


def status(change: Change, direction: int, tolerance: float,
           sequential: str | None = None) -> Status:
    """The contract's status of ``change`` for a metric of ``direction`` (+1: must not fall,
    −1: must not rise) against ``tolerance`` (a fraction).

    ``sequential``, when given, is a sequential test's decision on "beyond the tolerance in
    the bad direction" (:data:`SEQUENTIAL`), judged by :func:`sequential_status` with the
    interval as its own decisive one: "regressed" is a regression; an interval wholly beyond
    the tolerance is a regression whatever the test says (a "clean" SPRT never overrides it);
    "clean" turns an interval that straddles the tolerance into a pass (never "noted": only
    an interval wholly inside the tolerance shows a change inside it); "more" leaves it
    undetermined. A point estimate has no certainty of its own, so for it the test's decision
    is the certainty: "regressed" is a regression and "clean" rules one out.
    """
    if change.low is None or change.high is None:
        return _point_status(-direction * change.estimate, tolerance, sequential)
    if sequential is not None:
        return sequential_status(change, change, direction, tolerance, sequential)
    low, high = change.worse(direction)
    if low > tolerance:
        return REGRESSION
    if high < -tolerance:
        return IMPROVED
    if high > tolerance:
        return UNDETERMINED  # could be beyond the tolerance, could be inside: not decided
    return NOTED if low > 0 or high < 0 else PASS

def sequential_status(change: Change, decisive: Change, direction: int, tolerance: float,
                      sequential: str | None = None) -> Status:
    """The status of a sequentially tested change: ``change`` carries the 95 % interval,
    ``decisive`` the interval at the test's own level (its share of the false-alarm rate).

    A regression needs the test's own level: the sequential test said "regressed", or the
    decisive interval lies wholly beyond the tolerance — a "clean" decision never overrides
    that. Beyond the tolerance at 95 % only is undetermined (calling it a regression would
    fail more runs whose change is exactly the tolerance than the stated rate). A "clean"
    decision with a 95 % interval that straddles the tolerance is a pass (the test ruled the
    effect out), never "noted": noted says the change is inside the tolerance, and only an
    interval wholly inside it shows that.
    """
    assert decisive.low is not None and decisive.high is not None
    if sequential == "regressed" or decisive.worse(direction)[0] > tolerance:
        return REGRESSION
    found = status(change, direction, tolerance)
    if found == REGRESSION:
        return UNDETERMINED
    if found == UNDETERMINED and sequential == "clean":
        return PASS
    return found


def _point_status(worse: float, tolerance: float, sequential: str | None) -> Status:
    if sequential == "regressed" or (sequential != "clean" and worse > tolerance):
        return REGRESSION
    return IMPROVED if worse < -tolerance else PASS


def inside(change: Change, direction: int, tolerance: float) -> bool:
    """Whether the change is known to lie inside the tolerance on its bad side: the whole
    interval (or the point) at most ``tolerance`` in the bad direction. A sentence may say
    "inside the tolerance" only when this holds: a noted or passed change whose interval
    reaches beyond the tolerance got its status from a sequential test, and says so."""
    return change.worse(direction)[1] <= tolerance


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



def median_status(change: Change, direction: int, tolerance: float) -> Status:
    """The status of a case's medians compared with their interval (both sides' request
    spread and the run-to-run noise): what the contract's "pass" means for a point estimate.

    A regression (or an improvement) needs the whole interval beyond the tolerance; a median
    beyond the tolerance on the bad side whose interval reaches back inside it is undetermined
    (noise could have put it there); one beyond it on the good side is noted (sure of the
    change when the interval excludes none, sure it is no regression, not sure it is beyond
    the tolerance: more repeats could only tell an improvement from a noted move, which
    decides nothing); a median inside the tolerance is a pass — noted when the interval
    excludes no change. Unlike :func:`status`, an interval that merely reaches past the
    tolerance from a median inside it is not undetermined: a case is many times noisier
    than the sweep, whose pooled test (judge/sweep/pooled.py) judges the small changes.
    """
    if change.low is None or change.high is None:
        return status(change, direction, tolerance)
    low, high = change.worse(direction)
    worse = -direction * change.estimate
    if low > tolerance:
        return REGRESSION
    if high < -tolerance:
        return IMPROVED
    if worse > tolerance:
        return UNDETERMINED
    return NOTED if low > 0 or high < 0 else PASS
