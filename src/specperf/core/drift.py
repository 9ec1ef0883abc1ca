"""Drift across nights: a persistent shift below the per-run tolerance, found in the history.

A KV-cache or kernel drift of 3 % never fails a night against a 10 % tolerance, but it
moves every night after it began, and (a step-time drift) every case. So the history is
scanned per factor — step time over every case, avg commit per text class — and per case:

- each cell's nightly median is taken in logs; a night's shift is measured against the
  *reference*: the nights since the last boundary (a new baseline or server fingerprint,
  :func:`specperf.views.trend.boundaries`), up to the candidate start;
- for the night ``t`` and a start ``k`` with ``MIN_REFERENCE`` reference nights before it,
  ``z = D / se`` where ``D`` is the mean over cells of (mean after − mean before), signed so
  that positive is worse, and ``se² = Σ_c σ²(1/n_after + 1/n_before) / C²`` with the
  night-to-night spread σ of every cell of the metric (:func:`night_sigma`);
- the decision looks once a night, at ``k = t − WINDOW + 1``: the last four nights (a shift
  must be flagged by its start night + 3, and one look a night keeps the threshold low);
  the first night with ``z ≥ threshold`` raises a flag naming the factor, the night the
  shift began (the best start among the last ``SCAN_NIGHTS`` with ``MIN_PERSIST`` nights
  after it), the size since then and the night it was seen.

This is the two-sample scan statistic for a step change at an unknown night (the same
split-and-compare idea as E-divisive / Apache Otava, online and with a threshold chosen
for a stated false-alarm rate). Thresholds are calibrated by ``benchmarks/drift_power.py``
on 30-night histories: ≤ 1 % of histories without a shift raise any flag.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

MIN_REFERENCE = 5  # nights before a start: the level and the spread need a few nights
MIN_PERSIST = 2  # nights a shift must last before it is called persistent
# The decision compares the last WINDOW nights with every night before them: the nightly job
# must flag a shift by its start night + 3, and one look per night (not one per candidate
# start) keeps the threshold low — the most a 3 % shift's 4 nights can give (§6's bound).
WINDOW = 4
# The night a flagged shift began: the best candidate start within the last SCAN_NIGHTS
# nights with at least MIN_PERSIST nights after it.
SCAN_NIGHTS = 6
# Scan thresholds (z), calibrated by benchmarks/drift_power.py for ≤ 1 % flagged histories
# without a shift (30 nights, every factor together; the per-case scan on its own).
FACTOR_THRESHOLD = 3.7
CASE_THRESHOLD = 4.4
SIGMA_FLOOR = 0.002  # relative night-to-night spread below which σ is resolution, not data
CLIP = 4.0  # differences beyond this many robust σ count as this many (a wild night)


@dataclass(frozen=True)
class Series:
    """One factor's (or one case's) cells: log nightly medians, NaN where a night lacks one."""

    key: str  # "step", "acceptance:reasoning", "step reasoning-ctx3333", …
    factor: str  # "step" or "acceptance"
    sign: int  # +1 a rise is worse (step time), −1 a fall is worse (commit)
    cells: tuple[str, ...]
    logs: np.ndarray  # cells × nights
    spread_logs: np.ndarray  # every cell of the metric: where the night-to-night σ comes from


@dataclass(frozen=True)
class DriftFlag:
    """A persistent shift: which factor, how big, since which night, seen on which night."""

    key: str
    factor: str
    change: float  # relative change in the metric's own direction
    began: int  # night index of the first shifted night
    seen: int  # night index it was flagged on
    z: float

    def sentence(self, labels: Sequence[str]) -> str:
        """'step time +3.2% since run X (flagged on run Y, z 4.6) — …'."""
        what = "step time" if self.factor == "step" else "avg commit"
        scope = self.key.split(":", 1)[1] + " " if ":" in self.key else ""
        if " " in self.key:  # a single case: "step reasoning-ctx3333"
            scope = self.key.split(" ", 1)[1] + " "
        hint = ("check the kernels, attention backend and KV cache" if self.factor == "step"
                else "check the drafter and the text")
        pct = f"{100 * self.change:+.1f}%".replace("-", "\u2212")
        return (f"{scope}{what} {pct} since run {labels[self.began]} (flagged on run "
                f"{labels[self.seen]}, z {self.z:.1f}) \u2014 a persistent {self.factor} "
                f"shift below the per-run tolerance: {hint}.")


def series(cells: Mapping[str, Sequence[float | None]], *, per_case: bool = False
           ) -> list[Series]:
    """Step time over every cell and avg commit per text class (or each cell alone)."""
    out = []
    for factor, metric, sign in (("step", "step_ms", +1), ("acceptance", "avg_commit", -1)):
        every = [c for c in cells if c.startswith(metric + "|")]
        spread = _log_rows(cells, every)
        groups: dict[str, list[str]] = {}
        for cell in (c for c in cells if c.startswith(metric + "|")):
            name = cell.split("|", 1)[1]
            if per_case:
                key = f"{factor} {name}"
            else:
                key = factor if factor == "step" else f"{factor}:{name.partition('-ctx')[0]}"
            groups.setdefault(key, []).append(cell)
        for key, members in sorted(groups.items()):
            out.append(Series(key, factor, sign, tuple(members), _log_rows(cells, members),
                              spread))
    return out


def _log_rows(cells: Mapping[str, Sequence[float | None]], names: Sequence[str]) -> np.ndarray:
    rows = [[math.log(v) if v and v > 0 else math.nan for v in cells[m]] for m in names]
    return np.array(rows, dtype=float).reshape(len(rows), -1)


def night_sigma(s: Series, start: int, t: int) -> float:
    """Night-to-night σ of one cell's log median, from every cell of the metric.

    From consecutive nights' differences (σ_diff = √2 σ), pooled over every cell: a few
    dozen differences where one cell's five reference nights give four. Their root mean
    square, each clipped at ``CLIP`` robust σ (MAD) from the median: one wild night cannot
    inflate it, and unlike the MAD alone (37 % efficient) it uses what the few nights hold —
    a σ that comes out low is what sets the threshold a stated false-alarm rate needs.
    """
    diffs = np.diff(s.spread_logs[:, start:t + 1], axis=1).ravel()
    diffs = diffs[~np.isnan(diffs)]
    if len(diffs) < 4:
        return math.inf
    centre = float(np.median(diffs))
    robust = 1.4826 * float(np.median(np.abs(diffs - centre)))
    clipped = np.clip(diffs - centre, -CLIP * robust, CLIP * robust)
    return max(float(np.sqrt(np.mean(clipped**2))) / math.sqrt(2), SIGMA_FLOOR)


def _prefix(logs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per cell running count and sum (a leading zero column): any window's mean in O(1)."""
    seen = ~np.isnan(logs)
    x = np.where(seen, logs, 0.0)
    pad = np.zeros((logs.shape[0], 1))
    return np.hstack([pad, np.cumsum(seen, axis=1)]), np.hstack([pad, np.cumsum(x, axis=1)])


def scan_night(s: Series, start: int, t: int, window: int | None = None
               ) -> tuple[float, int, float]:
    """The largest z on night ``t`` over candidate starts; (z, start, D). With ``window``,
    the one start that leaves exactly ``window`` nights (the decision statistic)."""
    if window is not None:
        ks = np.arange(max(start + MIN_REFERENCE, t - window + 1), t - window + 2)
    else:
        ks = np.arange(max(start + MIN_REFERENCE, t - SCAN_NIGHTS + 1), t - MIN_PERSIST + 2)
    if len(ks) == 0:
        return (-math.inf, -1, 0.0)
    n, sx = _prefix(s.logs)
    n_ref = n[:, ks] - n[:, [start]]
    n_post = n[:, [t + 1]] - n[:, ks]
    ok = (n_ref >= 2) & (n_post >= 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        ref_mean = (sx[:, ks] - sx[:, [start]]) / n_ref
        post_mean = (sx[:, [t + 1]] - sx[:, ks]) / n_post
        cells = ok.sum(axis=0)
        sigma = night_sigma(s, start, t)
        diff = np.where(ok, s.sign * (post_mean - ref_mean), 0.0).sum(axis=0) / cells
        var = np.where(ok, 1 / n_post + 1 / n_ref, 0.0).sum(axis=0)
        z = diff / (sigma * np.sqrt(var) / cells)
    z = np.where(cells > 0, z, -np.inf)
    best = int(np.argmax(z))
    return (float(z[best]), int(ks[best]) if np.isfinite(z[best]) else -1, float(diff[best]))


def detect(s: Series, threshold: float, boundaries: Sequence[int] = ()) -> DriftFlag | None:
    """The first night the last ``WINDOW`` nights' z against every night before them
    crosses ``threshold``; then the night the shift began is the best of the candidate
    starts (the scan over the last ``SCAN_NIGHTS``), and its size is measured from there."""
    nights = s.logs.shape[1]
    for t in range(nights):
        start = max([b for b in boundaries if b <= t], default=0)
        z, k, d = scan_night(s, start, t, WINDOW)
        if k >= 0 and z >= threshold:
            _, began, size = scan_night(s, start, t)
            if began >= 0:
                k, d = began, size
            return DriftFlag(s.key, s.factor, math.expm1(s.sign * d), k, t, z)
    return None


def detect_all(cells: Mapping[str, Sequence[float | None]], boundaries: Sequence[int] = ()
               ) -> list[DriftFlag]:
    """Every factor's flag, then every single case's (its own, stricter threshold)."""
    flags = [f for s in series(cells) if (f := detect(s, FACTOR_THRESHOLD, boundaries))]
    flags += [f for s in series(cells, per_case=True)
              if (f := detect(s, CASE_THRESHOLD, boundaries))]
    return flags
