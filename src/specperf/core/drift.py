"""Drift across nights: a persistent shift below the per-run tolerance, found in the history.

A KV-cache or kernel drift of 3 % never fails a night against a 10 % tolerance, but it
moves every night after it began, and (a step-time drift) every case. So the history is
scanned per factor — step time over every case, avg commit per text class — and per case:

- each cell's nightly median is taken in logs; a night's shift is measured against the
  *reference*: the nights since the last boundary (a new baseline or server fingerprint,
  :func:`specperf.record.trend.boundaries`), up to the candidate start;
- the night noise has a part common to every cell of a night (the box: clocks, driver,
  thermal move every case together) and each cell's own part: ``log y[c, n] = level[c] +
  common[n] + own[c, n]``. Averaging cells shrinks only the own part, so a factor's
  standard error comes from the spread of the *night means* over every cell of the metric
  (:func:`mean_variance`), the own part from every cell's residual (:func:`own_variance`);
  both from the long history: the nights since the last boundary and those before it, back
  to ``SIGMA_NIGHTS`` nights (the box's noise outlives a baseline), each segment about its
  own level, while the level a shift is measured against is still reset at each boundary;
- for the night ``t`` and a start ``k`` with ``MIN_REFERENCE`` reference nights before it,
  a factor's ``D`` is the mean over cells of (mean after − mean before), signed so that
  positive is worse, and ``se² = (σ²_common + σ²_own/C)·mean_c(1/n_after + 1/n_before)``;
  its z is the normal quantile of the t-test's p-value (the night means' spread has only
  as many degrees of freedom as there are nights, less one per segment);
- a single case is judged on its *residual*: the case minus the other cells' mean that
  night, which has no common part, against σ²_own — a case that drifts alone is found,
  and a night that moved the whole box is not blamed on one case;
- the decision looks once a night, at ``k = t − WINDOW + 1``: the last four nights (a shift
  must be flagged by its start night + 3, and one look a night keeps the threshold low);
  the first night with ``z ≥ threshold`` raises a flag naming the factor, the night the
  shift began (the best start among the last ``SCAN_NIGHTS`` with ``MIN_PERSIST`` nights
  after it), the size since then and the night it was seen.

This is the two-sample scan statistic for a step change at an unknown night (the same
split-and-compare idea as E-divisive / Apache Otava, online and with a threshold chosen
for a stated false-alarm rate). Thresholds are calibrated by ``benchmarks/drift_power.py``
on 30 watched nights behind 60 nights of history and a boundary: ≤ 1 % of histories without
a shift raise any flag (factor or case), whether the night noise is independent per cell,
partly or wholly common.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .stats import MAD_TO_SIGMA

MIN_REFERENCE = 5  # nights before a start: the level and the spread need a few nights
MIN_PERSIST = 2  # nights a shift must last before it is called persistent
# The decision compares the last WINDOW nights with every night before them: the nightly job
# must flag a shift by its start night + 3, and one look per night (not one per candidate
# start) keeps the threshold low — the most a 3 % shift's 4 nights can give (§6's bound).
WINDOW = 4
# The night a flagged shift began: the best candidate start within the last SCAN_NIGHTS
# nights with at least MIN_PERSIST nights after it.
SCAN_NIGHTS = 6
# Scan thresholds (z), calibrated by benchmarks/drift_power.py (tuning seeds 1 and 3) for
# ≤ 1 % of histories without a shift with any flag, factor or case (30 nights watched behind
# 60 nights of history and a boundary), at 0, 0.5 and 1 of the night noise's σ common to
# every cell. 3.6 flagged 1.1 % there (1000 tuning histories a share, independent and half
# common), 3.7 0.8 %.
FACTOR_THRESHOLD = 3.7
CASE_THRESHOLD = 4.4
SIGMA_FLOOR = 0.002  # relative night-to-night spread below which σ is resolution, not data
CLIP = 4.0  # deviations beyond this many robust σ count as this many (a wild night)
# The night noise (common and own σ) is measured on the nights since the last boundary and,
# across boundaries, on those before it, back to SIGMA_NIGHTS nights before the one judged:
# the box outlives a baseline or a fingerprint, and a t-test on the night means of one
# segment (a handful of nights after a deploy) has too few degrees of freedom to clear a
# 3 % shift's four nights (docs/benchmarks.md §6).
SIGMA_NIGHTS = 90


@dataclass(frozen=True)
class DriftScan:
    """The scan's settings as ``specperf trend`` runs it, read by whoever simulates it."""

    factor_threshold: float  # z a factor's window must reach to raise a flag
    case_threshold: float  # z a single case's residual must reach
    window: int  # nights the decision compares with every night before them
    min_reference: int  # nights since the last boundary before a start can be judged


DRIFT_SCAN = DriftScan(FACTOR_THRESHOLD, CASE_THRESHOLD, WINDOW, MIN_REFERENCE)


@dataclass(frozen=True)
class Series:
    """One factor's (or one case's) cells: log nightly medians, NaN where a night lacks one."""

    key: str  # "step", "acceptance:reasoning", "step reasoning-ctx3333", …
    factor: str  # "step" or "acceptance"
    sign: int  # +1 a rise is worse (step time), −1 a fall is worse (commit)
    cells: tuple[str, ...]
    logs: np.ndarray  # cells × nights (a residual: the case minus the other cells' mean)
    spread_logs: np.ndarray  # every cell of the metric: where the night noise is estimated
    residual: bool = False  # a single case against the other cells of its night


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
    """Step time over every cell and avg commit per text class; or each cell alone, as its
    residual against the other cells of its metric that night (the night's common move
    removed, so what is left drifts only if the case does)."""
    out = []
    for factor, metric, sign in (("step", "step_ms", +1), ("acceptance", "avg_commit", -1)):
        every = [c for c in cells if c.startswith(metric + "|")]
        spread = _log_rows(cells, every)
        groups: dict[str, list[str]] = {}
        for cell in every:
            name = cell.split("|", 1)[1]
            if per_case:
                key = f"{factor} {name}"
            else:
                key = factor if factor == "step" else f"{factor}:{name.partition('-ctx')[0]}"
            groups.setdefault(key, []).append(cell)
        residual = per_case and len(every) > 1  # a lone cell has no night to compare with
        for key, members in sorted(groups.items()):
            logs = _log_rows(cells, members)
            if residual:
                logs = logs - _night_mean(np.delete(spread, every.index(members[0]), axis=0))
            out.append(Series(key, factor, sign, tuple(members), logs, spread, residual))
    return out


def _log_rows(cells: Mapping[str, Sequence[float | None]], names: Sequence[str]) -> np.ndarray:
    rows = [[math.log(v) if v and v > 0 else math.nan for v in cells[m]] for m in names]
    return np.array(rows, dtype=float).reshape(len(rows), -1)


def _night_mean(rows: np.ndarray) -> np.ndarray:
    """Each night's mean over the rows that have it (NaN where none has)."""
    seen = ~np.isnan(rows)
    count = seen.sum(axis=0)
    total = np.where(seen, rows, 0.0).sum(axis=0)
    out: np.ndarray = np.divide(total, count, out=np.full(total.shape, math.nan),
                                where=count > 0)
    return out


def _clip(dev: np.ndarray) -> np.ndarray:
    """Deviations beyond ``CLIP`` robust σ (MAD) counted as ``CLIP`` robust σ: a wild night
    still counts, but cannot inflate the σ (unlike the MAD alone, 37 % efficient, the
    mean square uses what the few nights hold — a σ that comes out low is what sets the
    threshold a stated false-alarm rate needs)."""
    robust = MAD_TO_SIGMA * float(np.median(np.abs(dev)))
    out: np.ndarray = np.clip(dev, -CLIP * robust, CLIP * robust)
    return out


# own_variance of one metric's cells, per (nights, cuts): every per-case series of the metric
# shares the same cells (``spread_logs``), so the scan of each night computes it once, not once
# per case. Keyed by the array's id, the array kept with the value so the id stays its own.
_OWN: dict[tuple[int, int, int, tuple[int, ...]], tuple[np.ndarray, float]] = {}


def own_variance(s: Series, start: int, t: int, cuts: Sequence[int] = ()) -> float:
    """:func:`_own_variance`, computed once per metric's cells, nights and cuts."""
    key = (id(s.spread_logs), start, t, tuple(sorted(c for c in cuts if start < c <= t)))
    hit = _OWN.get(key)
    if hit is not None and hit[0] is s.spread_logs:
        return hit[1]
    if len(_OWN) > 4096:
        _OWN.clear()
    value = _own_variance(s, start, t, cuts)
    _OWN[key] = (s.spread_logs, value)
    return value


def _own_variance(s: Series, start: int, t: int, cuts: Sequence[int] = ()) -> float:
    """σ² of one cell's own night noise, nights ``start``..``t``, from every cell's residual
    (the cell minus the night's mean over cells: the common part cancels).

    From consecutive nights' differences, pooled over cells: a few dozen differences where
    one cell's nights give a handful, and a shift of the whole factor is not in them. A
    residual has (1 − 1/M) of a cell's own variance (M cells) and its difference twice that.
    No difference spans a night in ``cuts`` (a boundary: a new baseline or fingerprint may
    move each cell's level its own way), so the nights before a boundary count too.
    """
    logs = s.spread_logs[:, start:t + 1]
    cells = len(logs)
    if cells == 1:  # one cell: its own part cannot be told from the common one
        return SIGMA_FLOOR**2
    resid = logs - _night_mean(logs)
    edges = _edges(start, t, cuts)
    diffs = np.concatenate([np.diff(resid[:, a - start:b - start], axis=1).ravel()
                            for a, b in zip(edges[:-1], edges[1:], strict=True)])
    diffs = diffs[~np.isnan(diffs)]
    if len(diffs) < 4:
        return math.inf
    mean_square = float(np.mean(_clip(diffs - np.median(diffs)) ** 2))
    return max(mean_square / 2 * cells / (cells - 1), SIGMA_FLOOR**2)


def _edges(start: int, t: int, cuts: Sequence[int]) -> list[int]:
    """The first night of each segment of ``start``..``t`` (cut at ``cuts``), and t + 1."""
    return sorted({start, t + 1, *(c for c in cuts if start < c <= t)})


def mean_variance(s: Series, start: int, k: int, t: int, cuts: Sequence[int] = ()
                  ) -> tuple[float, int]:
    """σ² of one night's mean over every cell of the metric (common part + own part / M),
    and its degrees of freedom: the night means' spread, nights ``start``..``t``, each about
    its own segment's mean — segments cut at ``k`` and at every night of ``cuts`` (the pooled
    variance of a t-test with one level per segment).

    Only the night means can measure the common part — the cells' own differences never
    see a night that moves every case together, yet to a factor's mean it is a one-night
    drift — so it has as many degrees of freedom as nights, less one per segment. The
    nights before the last boundary count (the box's noise outlives a baseline; their level
    is their own segment's): with them the t-test nears the z-test of a known σ. Split at
    ``k``, so a shift that began at ``k`` is not taken for noise (one that began inside the
    window counts until the window starts at it: a clear shift is flagged by its start
    night + 3, not always sooner). Each night clipped (:func:`_clip`) about its segment's
    median: one wild night cannot blind the factor for the rest of the history.
    """
    mean = _night_mean(s.spread_logs[:, start:t + 1])
    edges = [e - start for e in _edges(start, t, [*cuts, k])]
    parts = [mean[a:b] for a, b in zip(edges[:-1], edges[1:], strict=True)]
    parts = [x[~np.isnan(x)] for x in parts]
    parts = [x for x in parts if len(x)]
    df = sum(len(x) for x in parts) - len(parts)
    if df < 1:
        return (math.inf, 1)
    centred = [x - np.median(x) for x in parts]  # a wild night moves no median
    kept = np.split(_clip(np.concatenate(centred)), np.cumsum([len(x) for x in parts])[:-1])
    dev = np.concatenate([x - x.mean() for x in kept])
    return (max(float(np.sum(dev**2)) / df, SIGMA_FLOOR**2 / len(s.spread_logs)), df)


def _prefix(logs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per cell running count and sum (a leading zero column): any window's mean in O(1)."""
    seen = ~np.isnan(logs)
    x = np.where(seen, logs, 0.0)
    pad = np.zeros((logs.shape[0], 1))
    return np.hstack([pad, np.cumsum(seen, axis=1)]), np.hstack([pad, np.cumsum(x, axis=1)])


def scan_night(s: Series, start: int, t: int, window: int | None = None,
               boundaries: Sequence[int] = ()) -> tuple[float, int, float]:
    """The largest z on night ``t`` over candidate starts; (z, start, D). With ``window``,
    the one start that leaves exactly ``window`` nights (the decision statistic).

    The level is the nights since ``start`` (the last boundary); the noise also comes from
    the nights before it, back to ``SIGMA_NIGHTS`` nights before ``t``, across
    ``boundaries`` (each segment about its own level)."""
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
        diff = np.where(ok, s.sign * (post_mean - ref_mean), 0.0).sum(axis=0) / cells
        v = np.where(ok, 1 / n_post + 1 / n_ref, 0.0).sum(axis=0) / cells
        lo = min(start, max(0, t - SIGMA_NIGHTS + 1))
        cuts = [*boundaries, start]
        night = (0.0, 1) if s.residual else mean_variance(s, lo, int(ks[0]), t, cuts)
        noise = (own_variance(s, lo, t, cuts), *night)
        z = np.array([_z(s, d, vk, int(c), noise) for d, vk, c in zip(diff, v, cells,
                                                                       strict=True)])
    z = np.where(cells > 0, z, -np.inf)
    best = int(np.argmax(z))
    return (float(z[best]), int(ks[best]) if np.isfinite(z[best]) else -1, float(diff[best]))


def _z(s: Series, diff: float, v: float, cells: int, noise: tuple[float, float, int]
       ) -> float:
    """One candidate start's z: ``diff`` over its se, with ``v`` = mean_c(1/n_after +
    1/n_before) over the ``cells`` that have both, and ``noise`` the own σ², the night
    mean's σ² and its degrees of freedom (:func:`own_variance`; :func:`mean_variance`
    split at the earliest candidate, unused for a residual: one σ for every candidate, so
    the best start is the best split, not the luckiest σ).

    A residual (one case minus the other M − 1 cells' mean) carries only own noise, σ²_own
    (1 + 1/(M − 1)), whose dozens of differences make its z normal. A factor carries the
    night mean's variance, from M cells corrected to its C (+ σ²_own (1/C − 1/M)), known
    only to the night means' few degrees of freedom: its z is the normal quantile of the
    t-test's p-value, so the false-alarm rate is the same at any share of common noise.
    (No floor at σ²_own/M, though the common part is never negative: with the t it only
    lowers z, and a floor in place of the t is what common noise beats whenever the few
    nights' σ² comes out low.)
    """
    own, night, df = noise
    m = len(s.spread_logs)
    if not (cells and math.isfinite(diff) and math.isfinite(own) and math.isfinite(night)):
        return -math.inf
    if s.residual:
        return diff / math.sqrt(v * own * m / (m - 1))
    t_stat = diff / math.sqrt(v * (night + own * (1 / cells - 1 / m)))
    # scipy.special's kernels (what scipy.stats' t.sf and norm.isf call, without their
    # per-call overhead: the scan calls this for every night of every series); imported
    # here, not at the top: see stats.t_quantile.
    from scipy.special import ndtri, stdtr

    return float(-ndtri(max(float(stdtr(df, -t_stat)), 1e-300)))


def detect(s: Series, threshold: float, boundaries: Sequence[int] = ()) -> DriftFlag | None:
    """The first night the last ``WINDOW`` nights' z against every night before them
    crosses ``threshold``; then the night the shift began is the best of the candidate
    starts (the scan over the last ``SCAN_NIGHTS``), and its size is measured from there."""
    nights = s.logs.shape[1]
    for t in range(nights):
        start = max([b for b in boundaries if b <= t], default=0)
        z, k, d = scan_night(s, start, t, WINDOW, boundaries)
        if k >= 0 and z >= threshold:
            _, began, size = scan_night(s, start, t, None, boundaries)
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


@dataclass(frozen=True)
class Nights:
    """A history's runs grouped into nights as the noise model groups them
    (:func:`specperf.core.noise.nights_of`): per cell a night's geometric mean
    (``metric|cell``), the boundaries at the nights they fall in, and each night named by its
    first run."""

    cells: dict[str, list[float | None]]
    boundaries: list[int]
    labels: list[str]


@dataclass(frozen=True)
class ScanLine:
    """What the scan found for one deployment: a flag, or why its last night passed or could
    not be judged. ``log`` is the nightly job's line for a flag ('' otherwise)."""

    status: str  # "flag", "undetermined" or "pass"
    text: str
    log: str = ""


def scan(found: Nights, who: str = "", scan: DriftScan = DRIFT_SCAN) -> list[ScanLine]:
    """The scan of one deployment's nights (``who``: its name when the history holds
    several): a line per flag; else whether its last night could be judged at all —
    undetermined until it has ``min_reference`` nights since its last boundary and
    ``window`` after them, else a pass."""
    flags = detect_all(found.cells, found.boundaries)
    named = f" ({who})" if who else ""
    if flags:
        return [ScanLine("flag", f"drift{named}: {f.sentence(found.labels)}",
                         f"drift: {who + ': ' if who else ''}{f.sentence(found.labels)}")
                for f in flags]
    since = len(found.labels) - max(found.boundaries, default=0)
    needed = scan.min_reference + scan.window
    if since < needed:
        return [ScanLine("undetermined", (
            f"Drift undetermined{named}: the scan compares the last {scan.window} nights "
            f"with at least {scan.min_reference} before them, since the last boundary. It "
            f"has {since} of the {needed} nights it needs: {needed - since} more."))]
    return [ScanLine("pass", (
        f"No persistent shift{named}: no factor or case moved over the last {scan.window} "
        f"nights against the {since - scan.window} before them (drift.py)."))]
