"""The sequential test of one factor of the sweep, and its outcome by the verdict contract.

The tests of one sweep are step time (every case) and acceptance (each text class); the
sweep's false-alarm rate ``alpha`` is split evenly over them (Bonferroni), and each is a
:class:`specperf.core.sequential.Sprt` of H0 "a change of at most ``tolerance``" against H1
"a change of ``effect``" (the settings ``sweep_tolerance``, default 2 %, and ``sweep_effect``,
default 5 %): the SPRT runs on ``d − log(1 + tolerance)``, so ``alpha`` is the false-alarm
rate at a change of exactly the tolerance, and less below it. The status of each factor is the
verdict contract's (:func:`specperf.core.contract.status`): a regression only beyond the
tolerance with confidence; a change we are sure of (its 95 % CI excludes zero) but inside the
tolerance is **noted**, never a failure; a test that reaches its budget with an interval that
straddles the tolerance is **undetermined**.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ...core import contract, interval
from ...core.contract import REGRESSION
from ...core.sequential import Sprt
from .estimate import Estimate
from .factor import Factor

# False alarms per sweep at a change of exactly SWEEP_TOLERANCE, all tests: a 2 % change
# moves two of them (tok/s and its factor), so runs with it fail at most about 1 %.
SWEEP_ALPHA = 0.02
SWEEP_BETA = 0.05    # misses of a regression of SWEEP_EFFECT
SWEEP_TOLERANCE = 0.02  # a change the sweep lets pass (H0): settings.sweep_tolerance
SWEEP_EFFECT = 0.05  # the regression every sweep must catch (H1): settings.sweep_effect


def _worse_log(fraction: float, sign: int) -> float:
    """A relative change of ``fraction`` in the bad direction as ``d`` (a log-ratio, worse
    positive): a 3 % step-time rise is log 1.03, a 3 % commit fall −log 0.97."""
    return math.log1p(fraction) if sign > 0 else -math.log1p(-fraction)


@dataclass(frozen=True)
class FactorTest:
    """One factor's SPRT of H0 "change ≤ tolerance" against H1 "change ≥ effect": Wald's
    test of a shift, run on ``d − null`` (``null``: the tolerance as a log-ratio)."""

    sprt: Sprt
    null: float

    def decide(self, est: Estimate) -> str:
        return self.sprt.decide(est.d - self.null, est.se * self.widen(est.df))

    def widen(self, df: float) -> float:
        """Wald's bounds assume a known ``se``; a spread estimated from few requests runs
        low as often as high, which lets the test call a change at the tolerance a
        regression more often than ``alpha``. The standard error is widened by the
        t-quantile over the normal one at the test's own level (1.0 at large df)."""
        level = 1 - self.sprt.alpha
        return max(1.0, interval.one_sided(level, df) / interval.one_sided(level))

    def final(self, est: Estimate) -> bool:
        return self.sprt.final(est.d - self.null, est.se, est.df)

    def resolution(self, est: Estimate) -> float:
        """The smallest change in the bad direction (a log-ratio, worse positive) this test
        calls a regression with probability 1 − β at the precision reached: its decisive
        bound (the test's own level) beyond the tolerance, ``β`` of the time short of it."""
        return (self.null + (interval.one_sided(1.0 - self.sprt.alpha, est.df)
                             + interval.one_sided(1.0 - self.sprt.beta)) * est.se)

    def power(self, est: Estimate, ended: str = "budget") -> float:
        """The power of the rule that ended the test. Where the SPRT decided: its design,
        1 − β (under a regression of the effect it would have gone on sampling until it
        crossed the upper bound), capped by what the fixed-sample rule reaches with the
        run-to-run term alone, which no number of requests shrinks. At the budget: the
        fixed-sample rule at this standard error."""
        if ended in ("regressed", "clean"):
            floor = math.sqrt(est.run_var)
            cap = self.sprt.power(floor, est.df) if floor > 0 else 1.0
            return min(1.0 - self.sprt.beta, cap)
        return self.sprt.power(est.se, est.df)


def tests_for(found: Sequence[Factor], alpha: float = SWEEP_ALPHA, beta: float = SWEEP_BETA,
              effect: float = SWEEP_EFFECT, tolerance: float = SWEEP_TOLERANCE,
              family: int = 0) -> dict[str, FactorTest]:
    """Each factor's SPRT: the sweep's alpha split evenly over its tests. ``family``: how
    many tests the sweep holds when some were settled exactly before it ran (they are in
    the split, so a settled factor never enlarges the others' share)."""
    share = alpha / max(1, len(found), family)
    out = {}
    for f in found:
        null = _worse_log(tolerance, f.sign)
        out[f.key] = FactorTest(Sprt(share, beta, _worse_log(effect, f.sign) - null), null)
    return out


@dataclass(frozen=True)
class FactorResult:
    """One factor's outcome: its estimate, how the SPRT ended, its contract status and the
    power it reached."""

    estimate: Estimate
    ended: str  # "regressed", "clean" (the SPRT decided) or "budget" (fixed-sample rule)
    status: contract.Status  # the contract's: pass, noted, fail, improved, undetermined
    power: float
    # The smallest bad change it catches with probability 1 − β (a relative change in the
    # metric's own direction, e.g. +0.05 for step time), and the change it rules out when it
    # passed at that resolution rather than at the tolerance (None: at the tolerance).
    resolution: float = math.nan
    passed_at: float | None = None
    # The level of the interval that decided the status, the one every sentence prints: the
    # test's own (e.g. 0.99) for a regression and for a change beyond the tolerance at 95 %
    # only; 0.95 otherwise.
    level: float = 0.95

    @property
    def regressed(self) -> bool:
        return self.status == REGRESSION


def factor_result(test: FactorTest, est: Estimate, tolerance: float) -> FactorResult:
    """The contract's status of one factor (:func:`specperf.core.contract.sequential_status`):
    the SPRT's decision, or at the budget the fixed-sample rule, at the test's own level
    for a regression and at 95 % for the rest.

    **At the resolution it has**: where the run-to-run noise keeps the interval wider than the
    tolerance, an interval that straddles the tolerance is judged against what this run can
    resolve: its 95 % interval wholly short of the larger of the effect the test looks for
    and its resolution (:meth:`FactorTest.resolution`) is a pass that says so — no change
    that large, though one inside it cannot be told from the tolerance — while a decisive
    bound beyond the tolerance still fails. So a no-change night passes on the first night,
    and a large change fails on it."""
    ended = test.decide(est)
    decision = "regressed" if ended == "more" and test.final(est) else ended
    level = 1.0 - 2.0 * test.sprt.alpha  # two-sided level whose one side is the test's alpha
    low, high = est.ci()
    dlow, dhigh = est.ci(level)
    found = contract.sequential_status(contract.Change(est.change, low, high),
                                       contract.Change(est.change, dlow, dhigh),
                                       -est.factor.sign, tolerance, decision)
    how = "budget" if ended == "more" else ended
    beyond_95 = contract.status(contract.Change(est.change, low, high), -est.factor.sign,
                                tolerance) == contract.REGRESSION
    shown = level if found == contract.REGRESSION or (
        found == contract.UNDETERMINED and beyond_95) else 0.95
    reach = test.resolution(est)
    resolution = math.expm1(est.factor.sign * reach)
    passed_at = None
    if found == contract.UNDETERMINED and not beyond_95:
        bound = max(reach, test.null + test.sprt.effect)  # worse-positive log-ratios
        if est.d + interval.half_width(est.se, est.df) <= bound:
            found, passed_at = contract.PASS, math.expm1(est.factor.sign * bound)
    return FactorResult(est, how, found, test.power(est, how), resolution, passed_at, shown)
