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
from statistics import NormalDist

from ..core import contract
from ..core.contract import REGRESSION
from ..core.sequential import Sprt
from ..core.stats import t_quantile
from .estimate import Estimate
from .factor import Factor

_NORMAL = NormalDist()
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
        return max(1.0, t_quantile(level, df) / _NORMAL.inv_cdf(level))

    def final(self, est: Estimate) -> bool:
        return self.sprt.final(est.d - self.null, est.se, est.df)

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
              effect: float = SWEEP_EFFECT,
              tolerance: float = SWEEP_TOLERANCE) -> dict[str, FactorTest]:
    """Each factor's SPRT: the sweep's alpha split evenly over its tests."""
    share = alpha / max(1, len(found))
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
    status: str  # the contract's: pass, noted, fail (regression), improved, undetermined
    power: float

    @property
    def regressed(self) -> bool:
        return self.status == REGRESSION


def factor_result(test: FactorTest, est: Estimate, tolerance: float) -> FactorResult:
    """The contract's status of one factor (:func:`specperf.core.contract.sequential_status`):
    the SPRT's decision, or at the budget the fixed-sample rule, at the test's own level
    for a regression and at 95 % for the rest."""
    ended = test.decide(est)
    decision = "regressed" if ended == "more" and test.final(est) else ended
    level = 1.0 - 2.0 * test.sprt.alpha  # two-sided level whose one side is the test's alpha
    low, high = est.ci()
    dlow, dhigh = est.ci(level)
    found = contract.sequential_status(contract.Change(est.change, low, high),
                                       contract.Change(est.change, dlow, dhigh),
                                       -est.factor.sign, tolerance, decision)
    how = "budget" if ended == "more" else ended
    return FactorResult(est, how, found, test.power(est, how))
