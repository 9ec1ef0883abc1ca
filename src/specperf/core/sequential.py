"""Sequential stopping: take requests only while the evidence has not decided.

The test is Wald's sequential probability ratio test (SPRT) on a pooled log-ratio ``d``
(this run against the baseline, signed so that positive is worse) whose standard error
``se`` shrinks as requests are added. Under the Gaussian approximation the log-likelihood
ratio of H1 (the factor moved by ``effect``) against H0 (it did not move) is::

    llr = (effect · d − effect² / 2) / se²

and the test stops with "regressed" once ``llr ≥ log((1 − β) / α)``, with "clean" once
``llr ≤ log(β / (1 − α))``, and asks for more in between — so requests are spent only where
the decision is close. Wald's bounds keep the error rates at about α (a false alarm) and β
(a miss of ``effect``). A test that reaches its request budget undecided falls back to the
fixed-sample rule: regressed when ``d`` is significant at α (Student t on the pooled
spread's degrees of freedom) *and* nearer ``effect`` than 0 (``llr > 0``).

:meth:`Sprt.power` states what the finished test could see: the probability that a
regression of exactly ``effect`` would have been called at the precision reached.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

from .stats import t_quantile

_NORMAL = NormalDist()


@dataclass(frozen=True)
class Sprt:
    """One one-sided sequential test: H0 no change against H1 a change of ``effect``."""

    alpha: float
    beta: float
    effect: float

    @property
    def upper(self) -> float:
        return math.log((1 - self.beta) / self.alpha)

    @property
    def lower(self) -> float:
        return math.log(self.beta / (1 - self.alpha))

    def llr(self, d: float, se: float) -> float:
        """Log-likelihood ratio of H1 against H0 for an estimate ``d`` with error ``se``."""
        return (self.effect * d - self.effect**2 / 2) / se**2

    def decide(self, d: float, se: float) -> str:
        """'regressed', 'clean' or 'more' (the evidence has not decided yet)."""
        llr = self.llr(d, se)
        if llr >= self.upper:
            return "regressed"
        if llr <= self.lower:
            return "clean"
        return "more"

    def final(self, d: float, se: float, df: float) -> bool:
        """The fixed-sample rule at the budget: significant at α and nearer H1 than H0."""
        return d / se >= t_quantile(1 - self.alpha, df) and self.llr(d, se) > 0

    def power(self, se: float, df: float) -> float:
        """P(a regression of exactly ``effect`` is called by the fixed-sample rule) at
        standard error ``se``."""
        critical = max(t_quantile(1 - self.alpha, df) * se, self.effect / 2)
        return _NORMAL.cdf((self.effect - critical) / se)


def wald_bounds_text(test: Sprt) -> str:
    """The stated error rates, for reports: 'α 0.33 %, β 5 %, effect 5 %'."""
    return (f"\u03b1 {100 * test.alpha:.2g}%, \u03b2 {100 * test.beta:.2g}%, "
            f"effect {100 * test.effect:.2g}%")
