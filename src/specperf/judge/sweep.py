"""The sweep-level test: is step time up, or acceptance down, across all cases at once?

A per-case verdict judges each case alone against a 10 % tolerance; a 5 % regression hides
inside it. But the two factors of tok/s = avg commit / step time move many cases together:
a kernel or KV-cache regression raises the step time of *every* case (the context fit),
and a drafter regression lowers the commit of every case of a text class. So each factor
is tested once, on all its cases pooled:

- per case ``d_i = mean log(value now) − log(centre before)``, signed so that positive is
  worse (step time up, commit down); the centre before is the mean log of the stored
  baseline's requests (files written before baselines kept them: its median), or in A/B
  mode the mean log of production's requests of the same run. Means of logs, not
  medians, where the requests are at hand: for normal noise a median needs π/2 ≈ 1.57× the
  requests for the same precision, and here precision is GPU time. (A single wild request
  raises the pooled spread with it, so it widens the interval rather than faking a shift;
  the per-case verdicts keep their medians.)
- the per-request spread ``σ`` of the metric's logarithm, pooled over the run's requests of
  every case (``df = Σ (n_i − 1)``); a stored baseline's side has its own, pooled over its
  requests (Welch's df for the two), or, with medians only, the larger of the run's and its
  MADs (a MAD of 3–5 requests runs low); in A/B mode production's requests join the pool;
- ``se_i² = σ²/n_now + k · σ_before²/n_before`` with k = 1 for a mean of requests and
  ``MEDIAN_SE_FACTOR²`` (π/2) for a stored median (the standard error of a median, see
  :mod:`specperf.core.stats`), and the inverse-variance mean
  ``D = Σ d_i/se_i² / Σ 1/se_i²`` with ``se = (Σ 1/se_i²)^−½``.

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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np

from ..core import contract
from ..core.contract import IMPROVED, NOTED, PASS, REGRESSION
from ..core.limits import MINUS, format_percent
from ..core.noise import NoiseModel
from ..core.sequential import Sprt
from ..core.stats import MAD_TO_SIGMA, MEDIAN_SE_FACTOR, Summary, t_quantile
from ..plan.workload import Case
from .verdict import ACCEPTANCE_HINT, REFRESH_HINT, STEP_HINT, Verdict

_NORMAL = NormalDist()
# False alarms per sweep at a change of exactly SWEEP_TOLERANCE, all tests: a 2 % change
# moves two of them (tok/s and its factor), so runs with it fail at most about 1 %.
SWEEP_ALPHA = 0.02
SWEEP_BETA = 0.05    # misses of a regression of SWEEP_EFFECT
SWEEP_TOLERANCE = 0.02  # a change the sweep lets pass (H0): settings.sweep_tolerance
SWEEP_EFFECT = 0.05  # the regression every sweep must catch (H1): settings.sweep_effect
# Below this a relative spread is quantisation (commits are (N−1)/S for integer S) or clock
# resolution, not evidence of a perfectly quiet box: it keeps one quiet case from weighing
# infinitely.
SIGMA_FLOOR = 0.002


@dataclass
class CaseData:
    """One case's requests now, its baseline, and what one more request costs."""

    case: Case
    run: dict[str, list[float]]
    base: dict[str, Summary]
    base_values: dict[str, list[float]] | None = None  # A/B: production's requests
    cost_s: float = 0.0  # server seconds of one more request (both arms in A/B)
    base_requests: dict[str, list[float]] | None = None  # a stored baseline's requests
    extra: int = 0  # requests added by the sweep test


@dataclass(frozen=True)
class Factor:
    """One test of the sweep: a metric over a set of cases, with its bad direction."""

    name: str  # "tok/s", "step" or "acceptance"
    metric: str
    sign: int  # +1: a rise is worse (step time); −1: a fall is worse (commit)
    scope: str  # "" for every case, else the text class
    case_ids: tuple[str, ...]

    @property
    def key(self) -> str:
        return self.name if not self.scope else f"{self.name}:{self.scope}"


@dataclass(frozen=True)
class Estimate:
    """The pooled log-ratio of one factor (positive: worse) and its uncertainty."""

    factor: Factor
    d: float
    se: float
    df: float
    per_case: dict[str, float] = field(default_factory=dict)
    # The run-to-run part of se² (0 on the same night) and how it is known (core/noise.py).
    run_var: float = 0.0
    noise: str = ""

    @property
    def request_var(self) -> float:
        """The part of se² that more requests shrink (the rest is the run term)."""
        return max(self.se**2 - self.run_var, 0.0)

    def ci(self, level: float = 0.95) -> tuple[float, float]:
        """The relative change's confidence interval, in the metric's own direction."""
        half = t_quantile(0.5 + level / 2, self.df) * self.se
        low, high = self.factor.sign * (self.d - half), self.factor.sign * (self.d + half)
        return math.expm1(min(low, high)), math.expm1(max(low, high))

    @property
    def change(self) -> float:
        """The relative change in the metric's own direction (e.g. −0.05: commit fell 5 %)."""
        return math.expm1(self.factor.sign * self.d)


def factors(cases: Sequence[CaseData]) -> list[Factor]:
    """Step time over every case with a step time; acceptance per text class."""
    out = []
    rated = tuple(c.case.id for c in cases if _has(c, "tok_s"))
    if rated:  # the product users feel: a drop split over both factors is still a drop
        out.append(Factor("tok/s", "tok_s", -1, "", rated))
    stepped = tuple(c.case.id for c in cases if _has(c, "step_ms"))
    if stepped:
        out.append(Factor("step", "step_ms", +1, "", stepped))
    for text_class in sorted({c.case.text_class for c in cases}):
        ids = tuple(c.case.id for c in cases
                    if c.case.text_class == text_class and _has(c, "avg_commit"))
        if ids:
            out.append(Factor("acceptance", "avg_commit", -1, text_class, ids))
    return out


def _has(data: CaseData, metric: str) -> bool:
    summary = data.base.get(metric)
    return len(data.run.get(metric, [])) >= 1 and summary is not None and summary.median > 0 \
        and all(v > 0 for v in data.run[metric])


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


def _logs(values: Sequence[float]) -> np.ndarray:
    logs: np.ndarray = np.log(np.asarray(values, dtype=float))
    return logs


def _pooled_sd(groups: Sequence[np.ndarray]) -> tuple[float, float]:
    """Pooled standard deviation of the groups about their own means, and its df."""
    ss = sum(float(np.sum((g - g.mean()) ** 2)) for g in groups if len(g) > 1)
    df = sum(len(g) - 1 for g in groups if len(g) > 1)
    return (math.sqrt(ss / df) if df else 0.0), float(df)


def estimate(factor: Factor, cases: Mapping[str, CaseData], noise: NoiseModel | None = None,
             base_runs: int = 1) -> Estimate:
    """Pool one factor's cases into D ± se (see the module docstring); ``noise``: the
    run-to-run noise of a comparison with a stored baseline merged from ``base_runs`` runs
    (None: the prior; A/B's production requests are the same night, so none)."""
    chosen = [cases[cid] for cid in factor.case_ids]
    m = factor.metric
    run_logs = [_logs(c.run[m]) for c in chosen]
    sigma, df = _pooled_sd(run_logs)
    before = _before_side(m, chosen)
    paired = all(c.base_values is not None for c in chosen)
    df_b = 0.0
    if isinstance(before, list):
        sigma_b, df_b = _pooled_sd(before)
        if paired:  # A/B: one spread, both arms
            sigma = sigma_b = math.sqrt((sigma**2 * df + sigma_b**2 * df_b) / max(df + df_b, 1))
        base_n = [len(g) for g in before]
        centre = [float(np.mean(g)) for g in before]
        k = 1.0
    else:
        mads = [MAD_TO_SIGMA * c.base[m].mad / c.base[m].median for c in chosen]
        sigma_b = max(sigma, math.sqrt(float(np.mean(np.square(mads)))))
        base_n = [c.base[m].n for c in chosen]
        centre = [math.log(c.base[m].median) for c in chosen]
        k = MEDIAN_SE_FACTOR**2
    sigma, sigma_b = max(sigma, SIGMA_FLOOR), max(sigma_b, SIGMA_FLOOR)
    run_noise = (NoiseModel.same_night() if paired else noise or NoiseModel.prior()).of(m)
    common, own = run_noise.parts(base_runs)
    d = np.array([factor.sign * (float(np.mean(g)) - b)
                  for g, b in zip(run_logs, centre, strict=True)])
    now = np.array([sigma**2 / len(g) for g in run_logs])
    then = np.array([k * sigma_b**2 / n for n in base_n])
    # Each case's own run term weighs like its requests (generalised least squares); the part
    # common to every case does not average out, so it adds to the pooled variance whole.
    weights = 1.0 / (now + then + own)
    pooled = float(np.sum(weights * d) / np.sum(weights))
    request_var = float(np.sum(weights**2 * (now + then)) / np.sum(weights) ** 2)
    run_var = float(np.sum(weights**2) * own / np.sum(weights) ** 2) + common
    if df_b and not paired:
        # Two spreads estimated apart (a stored baseline's requests, this run's): Welch.
        a, b = float(np.sum(weights**2 * now)), float(np.sum(weights**2 * then))
        df = (a + b) ** 2 / (a**2 / max(df, 1.0) + b**2 / df_b)
    else:
        df += df_b
    df = _satterthwaite((request_var, max(df, 1.0)), (run_var, run_noise.df))
    return Estimate(factor, pooled, math.sqrt(request_var + run_var), df,
                    {c.case.id: float(x) for c, x in zip(chosen, d, strict=True)},
                    run_var, run_noise.text())


def _satterthwaite(*parts: tuple[float, float]) -> float:
    """Degrees of freedom of a sum of variance estimates (value, df): Welch–Satterthwaite."""
    total = sum(v for v, _ in parts)
    denom = sum(v * v / df for v, df in parts if v > 0 and math.isfinite(df))
    return max(total * total / denom, 1.0) if denom > 0 else math.inf


def _before_side(metric: str, chosen: Sequence[CaseData]) -> list[np.ndarray] | None:
    """The reference's requests as logs: production's (A/B) or a stored baseline's
    per-request values; None when only the stored medians are at hand (older files)."""
    if all(c.base_values is not None for c in chosen):
        return [_logs((c.base_values or {})[metric]) for c in chosen]
    if all(len(_stored(c, metric)) >= 2 for c in chosen):
        return [_logs(_stored(c, metric)) for c in chosen]
    return None


def _stored(data: CaseData, metric: str) -> list[float]:
    """A stored baseline's requests of ``metric``; none if any is not positive (no log)."""
    vals = (data.base_requests or {}).get(metric, [])
    return vals if all(v > 0 for v in vals) else []


def information_gain(factor: Factor, data: CaseData) -> float:
    """How much one more request of ``data`` adds to the factor's weight, per second.

    A case weighs 1/se_i² ∝ 1/(1/n_now + k/n_before) (one common σ assumed on both sides);
    one more request raises n_now by one, and n_before too in A/B mode, where a request is a
    pair. Divided by the request's cost, so the sweep buys precision where it is cheapest:
    a step-time change moves a 4-second case as much as a 28-second one.
    """
    m = factor.metric
    n = len(data.run[m])
    paired = data.base_values is not None
    stored = len(_stored(data, m)) >= 2
    nb = len((data.base_values or {})[m]) if paired else (
        len(_stored(data, m)) if stored else data.base[m].n)
    k = 1.0 if paired or stored else MEDIAN_SE_FACTOR**2
    now = 1.0 / (1.0 / n + k / nb)
    after = 1.0 / (1.0 / (n + 1) + k / (nb + int(paired)))
    return (after - now) / max(data.cost_s, 1e-9)


# -- judging, with sequential top-ups --------------------------------------------------------
More = Callable[[CaseData], None]


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


@dataclass(frozen=True)
class SweepResult:
    """The sweep's tests, the requests they added, and the verdict sentence."""

    label: str
    results: tuple[FactorResult, ...]
    extra: int
    extra_s: float
    alpha: float
    effect: float
    tolerance: float = SWEEP_TOLERANCE

    @property
    def regressed(self) -> bool:
        return any(r.regressed for r in self.results)

    @property
    def status(self) -> str:
        """The sweep's status: its factors' combined by the contract's one priority order."""
        return contract.combine(r.status for r in self.results) if self.results else PASS

    def verdict(self) -> Verdict:
        """The sweep's own verdict, its status the contract's, naming each factor that is not a
        plain pass."""
        details = {r.estimate.factor.key: _detail(r) for r in self.results}
        power = self._power_clause()
        status = self.status
        if status == PASS:
            moves = ", ".join(_move_text(r) for r in self.results)
            return Verdict(self.label, PASS, f"no regression across the {self.label}: "
                           f"{moves}. {power}", None, details)
        shown = [r for r in self.results if r.status == status]
        message = " ".join(_status_sentence(r, self.label, self.tolerance, self.results)
                           for r in shown)
        rest = [r for r in self.results if r.status != status]
        others = f" Otherwise: {', '.join(_move_text(r) for r in rest)}." \
            if rest and status != REGRESSION else ""
        return Verdict(self.label, status, f"{message}{others} {power}", None, details)

    def _power_clause(self) -> str:
        size = f"{100 * self.effect:g}%"
        rate = [r.power for r in self.results if r.estimate.factor.name == "tok/s"]
        step = [r.power for r in self.results if r.estimate.factor.name == "step"]
        acc = [f"{r.power:.2f} on {r.estimate.factor.scope}" for r in self.results
               if r.estimate.factor.name == "acceptance"]
        parts = [f"a {size} tok/s fall with {rate[0]:.2f}"] if rate else []
        if step:
            parts.append(f"a {size} step-time rise with {step[0]:.2f}")
        if acc:
            parts.append(f"a {size} acceptance fall with {' and '.join(acc)}")
        parts[0] = parts[0].replace(" with ", " with probability ", 1)
        noise = next((r.estimate.noise for r in self.results if r.estimate.noise), "")
        return (f"Would have caught {', '.join(parts)} ({self.extra} extra requests, "
                f"{self.extra_s:.0f} s; false alarms \u2264 {100 * self.alpha:g}% per sweep at "
                f"a change of the {_pct(self.tolerance)} sweep tolerance; {noise}).")


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
    tests = tests_for(found, alpha, beta, effect, tolerance)
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
    results = tuple(_result(tests[e.factor.key], e, tolerance) for e in estimates)
    return SweepResult(label, results, extra, extra_s, alpha, effect, tolerance)


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


def _result(test: FactorTest, est: Estimate, tolerance: float) -> FactorResult:
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


# -- sentences ---------------------------------------------------------------------------------
def _ci_text(est: Estimate) -> str:
    low, high = est.ci()
    return f"95% CI {format_percent(low)} to {format_percent(high)}"


def _what(factor: Factor) -> str:
    return {"tok/s": "tok/s", "step": "step time"}.get(factor.name, f"avg commit {factor.scope}")


def _move_text(result: FactorResult) -> str:
    est = result.estimate
    return f"{_what(est.factor)} {format_percent(est.change)} ({_ci_text(est)})"


def _where(est: Estimate) -> str:
    """Every case moved the bad way, or which did: a change at some contexts only is a
    different regression (the slope: attention, KV cache) than one at every context."""
    worse = [cid for cid, d in est.per_case.items() if d > 0]
    if len(worse) == len(est.per_case):
        return "every context" if est.factor.name == "step" else "every case"
    if not worse:
        return "no case moved the bad way"
    return f"{len(worse)} of {len(est.per_case)} cases: {', '.join(worse)}"


def _pct(fraction: float) -> str:
    return f"{round(100 * fraction, 1):g}%"


def _status_sentence(result: FactorResult, label: str, tolerance: float,
                     others: Sequence[FactorResult] = ()) -> str:
    """One factor's sentence: what moved, where, and what the contract made of it."""
    est = result.estimate
    name = est.factor.name
    worse = est.factor.sign * est.change > 0
    rises_worse = est.factor.sign > 0
    verb = "rose" if worse == rises_worse else "fell"
    what = {"tok/s": "tok/s", "step": "step time"}.get(name, "avg commit")
    scope = f" on {est.factor.scope} text" if name == "acceptance" else ""
    head = (f"{what} {verb} {100 * abs(est.change):.1f}%{scope} across the {label} "
            f"({_ci_text(est)}, {_where(est)})")
    tol = _pct(tolerance)
    if result.status == REGRESSION:
        if name == "tok/s":
            return f"{head}: {_split(est, others)}."
        return f"{head} \u2014 {STEP_HINT if name == 'step' else ACCEPTANCE_HINT}."
    if result.status == NOTED:
        low, high = est.ci()
        if contract.inside(contract.Change(est.change, low, high), -est.factor.sign, tolerance):
            return (f"{head} \u2014 a change inside the {tol} sweep tolerance: noted, not a "
                    f"regression.")
        return (f"{head} \u2014 the sequential test ruled out the effect it looks for, "
                f"though the 95% interval reaches past the {tol} sweep tolerance: noted, not "
                f"a regression.")
    if result.status == IMPROVED:
        return f"{head} \u2014 better than the baseline beyond the {tol} sweep tolerance: " \
            f"{REFRESH_HINT}."
    return f"{head} \u2014 {_undecided(est, tol)}"


def _undecided(est: Estimate, tol: str) -> str:
    """What would decide an interval that straddles the tolerance: more requests only when
    they are what keeps it wide; otherwise the run-to-run noise is, and another night is."""
    if est.run_var > est.request_var:
        return (f"the interval straddles the {tol} sweep tolerance and is wide from the "
                f"run-to-run noise ({est.noise}), which more requests do not shrink: judge a "
                f"deploy against a same-night reference (specperf gate --save-reference DIR "
                f"before it, --reference DIR after it), write the baseline from several nights "
                f"(--specperf-update-baselines --specperf-baseline-runs 5), or set "
                f"--specperf-sweep-tolerance to the change that matters.")
    return (f"the interval straddles the {tol} sweep tolerance after the request budget, so "
            f"it is neither a pass nor a fail: measure again with more repeats (pytest "
            f"perf_tests -m context_scaling --specperf-repeats 6), or set "
            f"--specperf-sweep-tolerance to the change that matters.")


def _split(rate: Estimate, others: Sequence[FactorResult]) -> str:
    """A tok/s drop split into its factors (tok/s = avg commit / step time): each factor's
    share of the log drop, and the rest (prefill, transport) so that the shares add up."""
    total = rate.d  # positive: tok/s fell
    step = next((r.estimate for r in others if r.estimate.factor.name == "step"), None)
    accs = [r.estimate for r in others if r.estimate.factor.name == "acceptance"]
    if step is None or not accs or total <= 0:
        return ("acceptance or step time was not measured, so the drop cannot be attributed: "
                "check the acceptance source")
    cases = sum(len(a.factor.case_ids) for a in accs)
    acc_d = sum(a.d * len(a.factor.case_ids) for a in accs) / cases
    commit = math.expm1(-acc_d)
    shares = {"step time": step.d / total, "acceptance": acc_d / total}
    shares["the rest (prefill, transport)"] = 1.0 - sum(shares.values())
    named = ", ".join(f"{n} {round(100 * v):d}%".replace("-", MINUS) for n, v in shares.items()
                      if abs(v) >= 0.05 or n != "the rest (prefill, transport)")
    main = max(("step time", "acceptance"), key=lambda n: shares[n])
    hint = STEP_HINT if main == "step time" else ACCEPTANCE_HINT
    if min(shares["step time"], shares["acceptance"]) >= 0.25:
        hint = ("acceptance and step-time regression: check the drafter and the text, then the "
                "kernels, attention backend and KV cache")
    return (f"step time {format_percent(step.change)} and avg commit {format_percent(commit)} "
            f"(shares of the drop: {named}) \u2014 {hint}")


def _detail(result: FactorResult) -> dict[str, float]:
    est = result.estimate
    low, high = est.ci()
    return {"change": est.change, "low": low, "high": high, "se": est.se, "df": est.df,
            "power": result.power, "regressed": float(result.regressed),
            "noted": float(result.status == NOTED)}
