"""Page's CUSUM on the nightly factor statistic: the detector benchmarks/drift_power.py
compares with drift.py's scan (docs/benchmarks.md §6). Not shipped: at a false-alarm rate
that does not depend on the box's noise it caught no more shifts than the scan.

Night ``t``'s statistic is its cells' mean log against the mean of every night since the
last boundary before it, standardised by σ/√cells · √(1 + 1/n_ref) (a self-starting
recursive residual: without a shift, independent N(0, 1) night to night when σ is known;
σ per cell, :func:`cell_sigma` — drift.py's σ before it modelled noise common to a night's
cells — from the nights before ``t``). ``S_t = max(0, S_{t−1} + z_t − k)`` with ``k``
half of a 3 % shift in the night's standard errors (the quickest detector of a shift of
that size); a flag when ``S_t ≥ h`` after at least drift.MIN_PERSIST nights of
the excursion. ``h`` either from Siegmund's run-length approximation at each night's k
(adapts to the noise) or fixed per factor (calibrated at one noise level).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from specperf.core import drift
from specperf.core.stats import MAD_TO_SIGMA

SHIFT = math.log(1.03)


def cell_sigma(s: drift.Series, start: int, t: int) -> float:
    """Night-to-night σ of one cell's log median, pooled over every cell of the metric: the
    root mean square of consecutive nights' differences / √2, each clipped at drift.CLIP
    robust σ. Blind to noise common to a night's cells (what drift.py now models)."""
    diffs = np.diff(s.spread_logs[:, start:t + 1], axis=1).ravel()
    diffs = diffs[~np.isnan(diffs)]
    if len(diffs) < 4:
        return math.inf
    centre = float(np.median(diffs))
    robust = MAD_TO_SIGMA * float(np.median(np.abs(diffs - centre)))
    clipped = np.clip(diffs - centre, -drift.CLIP * robust, drift.CLIP * robust)
    return max(float(np.sqrt(np.mean(clipped**2))) / math.sqrt(2), drift.SIGMA_FLOOR)


def decision_interval(k: float, arl: float) -> float:
    """h with Siegmund's ARL₀ ≈ (e^{2kb} − 2kb − 1)/(2k²), b = h + 1.166, equal to ``arl``."""
    def run_length(h: float) -> float:
        x = 2 * k * (h + 1.166)
        return (math.exp(min(x, 700.0)) - x - 1) / (2 * k * k)
    low, high = 0.0, 50.0
    for _ in range(60):  # bisection: the run length grows with h
        mid = (low + high) / 2
        low, high = (mid, high) if run_length(mid) < arl else (low, mid)
    return high


@dataclass(frozen=True)
class CusumNight:
    """One night of a CUSUM: its value, its k, and the excursion's first night (−1 at 0)."""

    t: int
    value: float
    k: float
    since: int


def night_stat(s: drift.Series, start: int, t: int) -> tuple[float, float]:
    """Night ``t``'s recursive residual and the CUSUM's k, in the night's standard errors."""
    ref = s.logs[:, start:t]
    seen = ~np.isnan(ref)
    n_ref = seen.sum(axis=1)
    ok = (n_ref >= 2) & ~np.isnan(s.logs[:, t])
    cells = int(ok.sum())
    sigma = cell_sigma(s, start, t - 1)  # the nights before: independent of night t
    if cells == 0 or not math.isfinite(sigma):
        return (math.nan, math.nan)
    ref_mean = np.where(seen, ref, 0.0).sum(axis=1)[ok] / n_ref[ok]
    d = float(np.mean(s.sign * (s.logs[ok, t] - ref_mean)))
    sd = sigma / math.sqrt(cells) * math.sqrt(1 + float(np.mean(1 / n_ref[ok])))
    return (d / sd, SHIFT / 2 / sd)


def cusum(s: drift.Series) -> list[CusumNight]:
    """Page's one-sided CUSUM of the nightly residuals (one history: no boundary)."""
    out: list[CusumNight] = []
    total, since = 0.0, -1
    for t in range(drift.MIN_REFERENCE, s.logs.shape[1]):
        z, k = night_stat(s, 0, t)
        if math.isnan(z):
            continue
        total = max(0.0, total + z - k)
        since = -1 if total <= 0 else (since if since >= 0 else t)
        out.append(CusumNight(t, total, k, since))
    return out


def first_flag(paths: dict[str, list[CusumNight]], h: dict[str, float] | None = None,
               arl: float | None = None) -> int | None:
    """The first night any series flags: at its fixed ``h`` (by factor: "step",
    "acceptance"), or at Siegmund's h for run length ``arl``."""
    hits = []
    for key, path in paths.items():
        for n in path:
            if n.since < 0 or n.t - n.since + 1 < drift.MIN_PERSIST:
                continue
            limit = h[key.split(":")[0]] if h is not None else \
                decision_interval(n.k, arl or 0.0)
            if n.value >= limit:
                hits.append(n.t)
                break
    return min(hits) if hits else None
