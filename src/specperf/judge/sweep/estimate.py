"""One factor of the sweep pooled over its cases: the log-ratio ``D`` and its uncertainty.

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
  ``interval.MEDIAN_VAR`` (π/2) for a stored median (the standard error of a median, see
  :mod:`specperf.core.stats`), and the inverse-variance mean
  ``D = Σ d_i/se_i² / Σ 1/se_i²`` with ``se = (Σ 1/se_i²)^−½``.

With a noise model (:mod:`specperf.core.noise`), the run-to-run term adds to each case's
variance: its own part weighs like the case's requests, the part common to every case adds to
the pooled variance whole.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ...core import interval
from ...core.noise import NoiseModel
from ...core.stats import MAD_TO_SIGMA
from .factor import CaseData, Factor

# Below this a relative spread is quantisation (commits are (N−1)/S for integer S) or clock
# resolution, not evidence of a perfectly quiet box: it keeps one quiet case from weighing
# infinitely.
SIGMA_FLOOR = 0.002


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
        half = interval.half_width(self.se, self.df, level)
        low, high = self.factor.sign * (self.d - half), self.factor.sign * (self.d + half)
        return math.expm1(min(low, high)), math.expm1(max(low, high))

    @property
    def change(self) -> float:
        """The relative change in the metric's own direction (e.g. −0.05: commit fell 5 %)."""
        return math.expm1(self.factor.sign * self.d)


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
            sigma = sigma_b = interval.pooled_sd((sigma, df), (sigma_b, df_b))
        base_n = [len(g) for g in before]
        centre = [float(np.mean(g)) for g in before]
        k = 1.0
    else:
        mads = [MAD_TO_SIGMA * c.base[m].mad / c.base[m].median for c in chosen]
        sigma_b = max(sigma, math.sqrt(float(np.mean(np.square(mads)))))
        base_n = [c.base[m].n for c in chosen]
        centre = [math.log(c.base[m].median) for c in chosen]
        k = interval.MEDIAN_VAR
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
    df = interval.satterthwaite([(request_var, max(df, 1.0)), (run_var, run_noise.df)])
    return Estimate(factor, pooled, interval.se_of(request_var, run_var), df,
                    {c.case.id: float(x) for c, x in zip(chosen, d, strict=True)},
                    run_var, run_noise.text())


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
    k = 1.0 if paired or stored else interval.MEDIAN_VAR
    now = 1.0 / (1.0 / n + k / nb)
    after = 1.0 / (1.0 / (n + 1) + k / (nb + int(paired)))
    return (after - now) / max(data.cost_s, 1e-9)
