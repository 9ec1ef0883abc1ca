"""The sweep-level test: is step time up, or acceptance down, across all cases at once?

A per-case verdict judges each case alone against a 10 % tolerance; a 5 % regression hides
inside it. But the two factors of tok/s = avg commit / step time move many cases together:
a kernel or KV-cache regression raises the step time of *every* case (the context fit),
and a drafter regression lowers the commit of every case of a text class. So each factor
is tested once, on all its cases pooled.

:mod:`specperf.judge.sweep.factor` lists the tests and their cases,
:mod:`specperf.judge.sweep.estimate` pools each, :mod:`specperf.judge.sweep.factortest`
decides each by its sequential test and the verdict contract, and
:mod:`specperf.judge.sweep.verdict` says what came of them. This module is the rule that
runs them: while a test is undecided and more requests can still decide it, the sweep buys
one more request of the case that adds the most evidence per second.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from ...core.noise import NoiseModel
from .estimate import Estimate, estimate, information_gain
from .factor import CaseData, factors
from .factortest import (
    SWEEP_ALPHA,
    SWEEP_BETA,
    SWEEP_EFFECT,
    SWEEP_TOLERANCE,
    FactorTest,
    factor_result,
    tests_for,
)
from .verdict import SweepResult

__all__ = ["More", "judge_sweep"]

# Takes one more request of a case (both arms in A/B) into its CaseData.
More = Callable[[CaseData], None]


def judge_sweep(cases: Sequence[CaseData], label: str, more: More | None = None,
                budget: int = 0, *, alpha: float = SWEEP_ALPHA, beta: float = SWEEP_BETA,
                effect: float = SWEEP_EFFECT, tolerance: float = SWEEP_TOLERANCE,
                noise: NoiseModel | None = None, base_runs: int = 1) -> SweepResult:
    """Test every factor; while a test is undecided, more requests can still decide it and
    ``budget`` requests remain, ``more`` takes one request of the case that adds the most
    evidence per second to the open tests. ``noise``: the run-to-run noise of a comparison
    with a stored baseline merged from ``base_runs`` runs (None: the prior)."""
    by_id = {c.case.id: c for c in cases}
    found = factors(cases)
    # A text class whose acceptance exact acceptance settled is still one of the sweep's
    # tests: it took none of alpha only because it was decided without doubt. Splitting
    # alpha over the remaining tests alone would double each share on a deterministic
    # server, and a 2 % step change (tok/s and step time at their limit) would fail about
    # 2 % of runs instead of 1 % (benchmarks/record_power.py, docs/benchmarks.md §13).
    tested = {f.scope for f in found if f.name == "acceptance"}
    settled_classes = {c.case.text_class for c in cases if c.acceptance_settled} - tested
    tests = tests_for(found, alpha, beta, effect, tolerance,
                      family=len(found) + len(settled_classes))
    extra, extra_s = 0, 0.0
    while True:
        estimates = [estimate(f, by_id, noise, base_runs) for f in found]
        open_ = [e for e in estimates if tests[e.factor.key].decide(e) == "more"
                 and _requests_help(tests[e.factor.key], e)]
        if not open_ or more is None or extra >= budget:
            break
        target = max(by_id.values(), key=lambda c: sum(
            information_gain(e.factor, c) for e in open_ if c.case.id in e.factor.case_ids))
        more(target)
        target.extra += 1
        extra, extra_s = extra + 1, extra_s + target.cost_s
    results = tuple(factor_result(tests[e.factor.key], e, tolerance) for e in estimates)
    settled = sum(1 for c in cases if c.acceptance_settled)
    return SweepResult(label, results, extra, extra_s, alpha, effect, tolerance, beta, settled)


# Requests stop helping when what they shrink is this small a share of the variance.
_REQUEST_SHARE_FLOOR = 0.1


def _requests_help(test: FactorTest, est: Estimate) -> bool:
    """Whether more requests can still decide ``est``: not when the run-to-run term alone
    leaves the test undecided at the current estimate, nor when requests are already a small
    share of the variance. GPU seconds go where the statistics need them."""
    if est.run_var <= 0:
        return True
    if est.request_var < _REQUEST_SHARE_FLOOR * est.se**2:
        return False
    floor = Estimate(est.factor, est.d, math.sqrt(est.run_var), est.df, est.per_case,
                     est.run_var, est.noise)
    return test.decide(floor) != "more"
