"""One way to build a comparison's interval, for every judge.

A comparison of a figure now against before — a case's medians, a fit's slope, a sweep
factor, a draft position, a path, the reconcile row, explain's prediction, a concurrency
level — has the same parts (docs/noise.md):

- each side's **request spread**: a median of n requests has standard error
  ``MEDIAN_SE_FACTOR · σ / √n`` (:func:`median_var`, σ from the MAD); a mean of n has σ/√n;
- the **run term** (:mod:`specperf.core.noise`): against a baseline of another night both
  nights' run terms (:meth:`RunNoise.comparison_var`), nothing on the same night;
- the **degrees of freedom** of their sum, by Welch–Satterthwaite (:func:`satterthwaite`):
  a spread from n requests brings n − 1; the run term brings the history's share of its
  estimate, and a prior none of its own (infinite: the normal quantile);

and one quantile rule (:func:`quantile` for a two-sided level, :func:`one_sided` for a
test's own level). Independent parts combine here and nowhere else: :func:`se_of` from their
variances, :func:`combine` from their standard errors (or half-widths), :func:`pooled_sd`
for one spread estimated from several groups, :func:`case_run_sd` for a case's run term over
both nights. :func:`relative` turns a log change and its standard error into the
relative change's bounds; :func:`half_width` is the ± of a linear figure. Judges call these
and build no interval of their own (tests/test_one_interval.py holds them to it).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from . import stats
from .noise import NoiseModel, RunNoise, baseline_share
from .stats import MAD_TO_SIGMA, MEDIAN_SE_FACTOR, Summary, t_quantile

# A median's variance over the mean's for normal data (π/2): k·σ²/n.
MEDIAN_VAR = MEDIAN_SE_FACTOR**2
# Below this a request spread is clock resolution or commit quantisation, not a quiet box.
REQUEST_SD_FLOOR = 0.005


def quantile(level: float = 0.95, df: float = math.inf) -> float:
    """The two-sided ``level`` quantile of Student's t (the normal one at infinite ``df``)."""
    return t_quantile(0.5 + level / 2.0, df)


def one_sided(level: float, df: float = math.inf) -> float:
    """The one-sided ``level`` quantile (a test's own level, e.g. 1 − α)."""
    return t_quantile(level, df)


def half_width(se: float, df: float = math.inf, level: float = 0.95) -> float:
    """The ± of a ``level`` interval around an estimate with standard error ``se``."""
    return quantile(level, df) * se


def relative(log_change: float, se: float, df: float = math.inf,
             level: float = 0.95) -> tuple[float, float]:
    """The relative change's ``level`` bounds from a log change and its standard error."""
    half = half_width(se, df, level)
    return math.expm1(log_change - half), math.expm1(log_change + half)


def se_of(*variances: float) -> float:
    """The standard error of a sum or difference of independent estimates, from their
    variances: √Σ var."""
    return math.sqrt(sum(variances))


def combine(*ses: float) -> float:
    """The standard error (or half-width) of a sum or difference of independent estimates,
    from theirs: √Σ se² (``math.hypot``)."""
    return math.hypot(*ses)


def pooled_sd(*parts: tuple[float, float]) -> float:
    """One spread estimated from several groups, each ``(sd, df)``: √(Σ sd²·df / Σ df), the
    df at least 1."""
    return math.sqrt(sum(sd**2 * df for sd, df in parts) / max(sum(df for _, df in parts), 1))


def case_run_sd(run: RunNoise, base_runs: int = 1) -> float:
    """σ of one case's run term in a comparison: this night's and the baseline's (merged from
    ``base_runs`` runs, :func:`specperf.core.noise.baseline_share`)."""
    return run.case_sd() * math.sqrt(1.0 + baseline_share(base_runs))


def median_se(summary: Summary, floor: float = 0.0) -> float:
    """A median's relative standard error from its MAD (:func:`core.stats.median_se` of its
    relative σ, at least ``floor``)."""
    if summary.n < 1 or (summary.median == 0 and floor <= 0):
        return math.inf
    sd = max(MAD_TO_SIGMA * summary.rel_mad, floor)
    return stats.median_se(sd, int(summary.n))


def median_var(summary: Summary) -> tuple[float, float]:
    """A median's relative variance (its spread floored at :data:`REQUEST_SD_FLOOR`) and its
    df (n − 1)."""
    n = max(int(summary.n), 1)
    if summary.median <= 0:
        return MEDIAN_SE_FACTOR**2 * REQUEST_SD_FLOOR**2 / n, float(max(n - 1, 1))
    return median_se(summary, REQUEST_SD_FLOOR) ** 2, float(max(n - 1, 1))


def satterthwaite(parts: Iterable[tuple[float, float]]) -> float:
    """Degrees of freedom of a sum of variance estimates ``(value, df)`` (Welch–Satterthwaite);
    a part with infinite df (known) adds no sampling error; none at all: infinite."""
    found = [(v, d) for v, d in parts if v > 0]
    total = sum(v for v, _ in found)
    denom = sum(v * v / d for v, d in found if math.isfinite(d))
    return max(total * total / denom, 1.0) if denom > 0 else math.inf


def fixed_se(then: Summary, run: RunNoise | None, base_runs: int = 1) -> float:
    """The part of a case comparison's standard error that more repeats now cannot shrink:
    the baseline median's request spread and, with ``run``, the run term of both nights."""
    run_var = run.comparison_var(1, base_runs) if run is not None else 0.0
    return se_of(median_var(then)[0], run_var)


def fixed_ses(then: Mapping[str, Summary], noise: NoiseModel,
              base_runs: int = 1) -> dict[str, float]:
    """:func:`fixed_se` of every metric of a baseline case under ``noise``."""
    return {metric: fixed_se(summary, noise.of(metric), base_runs)
            for metric, summary in then.items()}


def comparison(now: Summary, then: Summary, run: RunNoise | None,
               base_runs: int = 1) -> tuple[float, float]:
    """A case's log change, now's median against then's: its standard error (both medians'
    request spread and, with ``run``, the run term of both nights) and its df; (0, inf)
    without a noise model (a point estimate)."""
    if run is None:
        return 0.0, math.inf
    parts = [median_var(now), median_var(then), (run.comparison_var(1, base_runs), run.df)]
    return se_of(*(v for v, _ in parts)), satterthwaite(parts)
