"""Run-to-run noise: what moves a figure between two runs besides a real change.

Repeats inside one run see the per-step and per-request noise; a comparison of two runs
(today against a baseline written on another night) also carries the **run** term — a night,
a neighbour on the box, a driver state — the same for every request of the run
(docs/noise.md). In logs, for a metric of case ``c`` in run ``n``::

    log y[c, n] = level[c] + common[n] + own[c, n] + (the median's request noise)

``common`` moves every case of a run together (σ_common), ``own`` is each case's own part
(σ_own). They are estimated from the run history (:func:`from_history`): the per-case medians
of every full run of the same box, the level reset at each boundary (a new baseline or server
fingerprint) while the spread is pooled across boundaries — the box outlives a baseline. The
request noise of each stored median (its standard error, when the history line holds it) is
subtracted, since every comparison counts it separately.

The estimate is shrunk toward a stated **prior** (``run_noise``, default
:data:`DEFAULT_RUN_NOISE`, with :data:`DEFAULT_COMMON_SHARE` of its σ common), as if the prior
had been seen on :data:`PRIOR_NIGHTS` nights: with no history the prior alone decides, and
after a few weeks the history does. The default is the night noise the drift model
(``core/drift.py``, ``benchmarks/drift_power.py``) is calibrated for: 3 % per case, half of
its σ common to the night — what a shared GPU box shows between nights. A box known to be
quieter states so (``--specperf-run-noise 0.01``); its history then confirms or corrects it.

A same-night comparison (A/B on two endpoints, or the gate's reference measured just before
the deploy) cancels the run term: :meth:`NoiseModel.same_night`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

DEFAULT_RUN_NOISE = 0.03
DEFAULT_COMMON_SHARE = 0.5  # of σ, as core/drift.py and benchmarks/drift_power.py model it
# The prior weighs as much as this many nights of history (its degrees of freedom).
PRIOR_NIGHTS = 2
# Runs of one box that count toward the history: complete full sweeps only.
_COUNTED_KINDS = ("full",)
SOURCES = ("history", "prior", "same-night")


# n · Var(median of n standard normals), n = 1..12 (numpy, 400 000 draws each); beyond, the
# large-n limit π/2, which bounds it from above.
_MEDIAN_VAR_N = (1.0, 1.0, 1.344, 1.198, 1.43, 1.288, 1.472, 1.347, 1.494, 1.379, 1.517, 1.405)


def baseline_share(base_runs: int = 1) -> float:
    """The share of one night's run-term variance a baseline merged from ``base_runs`` runs
    keeps. baselines/merge.py takes the median over the runs (slot by slot), and a median of
    n nights holds more than a mean's 1/n: up to ``_MEDIAN_VAR_N``/n (the request noise inside
    each slot brings it closer to 1/n; the upper end keeps the interval honest)."""
    n = max(int(base_runs), 1)
    return (_MEDIAN_VAR_N[n - 1] if n <= len(_MEDIAN_VAR_N) else math.pi / 2) / n


@dataclass(frozen=True)
class RunNoise:
    """The run-to-run noise of one metric, in log units (≈ a relative σ)."""

    metric: str
    common: float
    own: float
    df: float
    nights: int = 0
    source: str = "prior"

    def case_sd(self) -> float:
        """σ of one case's run term (common and own together)."""
        return math.hypot(self.common, self.own)

    def comparison_var(self, cases: int = 1, base_runs: int = 1) -> float:
        """Variance of (this run − the baseline) from the run terms of a mean over ``cases``
        cases, the baseline merged from ``base_runs`` runs; nothing on the same night."""
        if self.source == "same-night":
            return 0.0
        return (self.common**2 + self.own**2 / max(cases, 1)) * (1.0 + baseline_share(base_runs))

    def parts(self, base_runs: int = 1) -> tuple[float, float]:
        """The run terms' variances (common, own per case) of a comparison with a baseline
        merged from ``base_runs`` runs: a weighted mean of cases adds the common part whole and
        the own part to each case's variance."""
        if self.source == "same-night":
            return 0.0, 0.0
        both = 1.0 + baseline_share(base_runs)
        return self.common**2 * both, self.own**2 * both

    def text(self) -> str:
        """How the comparison knows the run-to-run noise, for the verdict's sentence."""
        if self.source == "same-night":
            return "same-night reference: run-to-run noise cancels"
        pct = f"±{100 * self.case_sd():.1f} %"
        if self.source == "prior":
            return f"run-to-run prior {pct}: no history yet"
        return f"run-to-run {pct} from {self.nights} nights"

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "common": self.common, "own": self.own, "df": self.df,
                "nights": self.nights, "source": self.source}


@dataclass(frozen=True)
class NoiseModel:
    """The run-to-run noise of every metric, for comparisons against a stored baseline."""

    metrics: Mapping[str, RunNoise] = field(default_factory=dict)
    total: float = DEFAULT_RUN_NOISE
    common_share: float = DEFAULT_COMMON_SHARE
    same: bool = False

    def of(self, metric: str) -> RunNoise:
        """The noise of ``metric``: estimated where the history knew it, else the prior."""
        if self.same:
            return RunNoise(metric, 0.0, 0.0, math.inf, 0, "same-night")
        found = self.metrics.get(metric)
        return found if found is not None else _prior(metric, self.total, self.common_share)

    @classmethod
    def prior(cls, total: float = DEFAULT_RUN_NOISE,
              common_share: float = DEFAULT_COMMON_SHARE) -> NoiseModel:
        return cls({}, total, common_share)

    @classmethod
    def same_night(cls) -> NoiseModel:
        return cls({}, 0.0, DEFAULT_COMMON_SHARE, True)

    def to_dict(self) -> dict[str, Any]:
        return {"same_night": self.same, "prior": self.total, "common_share": self.common_share,
                "metrics": {m: n.to_dict() for m, n in sorted(self.metrics.items())}}


def _prior(metric: str, total: float, common_share: float) -> RunNoise:
    common = total * common_share
    own = total * math.sqrt(max(1.0 - common_share**2, 0.0))
    return RunNoise(metric, common, own, float(PRIOR_NIGHTS), 0, "prior")


def check_prior(total: float, common_share: float) -> None:
    """A prior the model can use: σ ≥ 0 and a common share in [0, 1] (ValueError otherwise)."""
    if not (math.isfinite(total) and 0.0 <= total < 1.0):
        raise ValueError(f"run-to-run noise must be a fraction in [0, 1), got {total!r}")
    if not (math.isfinite(common_share) and 0.0 <= common_share <= 1.0):
        raise ValueError(f"the common share must be in [0, 1], got {common_share!r}")


# -- estimation from the history ----------------------------------------------------------------
def counted(entry: Mapping[str, Any], label: str) -> bool:
    """A history line that tells the box's run-to-run noise: a complete full sweep of ``label``."""
    return (str(entry.get("label", "")) == label
            and str(entry.get("kind") or "full") in _COUNTED_KINDS
            and not entry.get("interrupted") and not entry.get("outage")
            and not entry.get("stopped_by") and isinstance(entry.get("cells"), dict))


def _segment_key(entry: Mapping[str, Any]) -> str:
    """Runs with the same baseline and fingerprint share their levels (a boundary resets)."""
    return json.dumps([entry.get("baseline"), entry.get("fingerprint")], sort_keys=True,
                      default=str)


def _cell_logs(entries: Sequence[Mapping[str, Any]], metric: str
               ) -> tuple[list[dict[str, float]], list[dict[str, float]]]:
    """Per run: each cell's log median, and its request variance (0 when not stored)."""
    logs, req = [], []
    for entry in entries:
        row, var = {}, {}
        ses = entry.get("cell_se") or {}
        for cell, metrics in (entry.get("cells") or {}).items():
            value = (metrics or {}).get(metric)
            if isinstance(value, (int, float)) and value > 0 and math.isfinite(value):
                row[cell] = math.log(value)
                se = (ses.get(cell) or {}).get(metric)
                var[cell] = float(se) ** 2 if isinstance(se, (int, float)) else 0.0
        logs.append(row)
        req.append(var)
    return logs, req


@dataclass
class _Sums:
    ss_own: float = 0.0
    df_own: float = 0.0
    ss_mean: float = 0.0  # Σ over runs of (run mean residual)² − its expected own/request part
    df_mean: float = 0.0
    nights: int = 0


def _segment(logs: Sequence[dict[str, float]], req: Sequence[dict[str, float]],
             sums: _Sums) -> None:
    """Add one segment's runs (same levels) to the sums."""
    cells = sorted({c for row in logs for c in row})
    per_cell = {c: [row[c] for row in logs if c in row] for c in cells}
    level = {c: sum(v) / len(v) for c, v in per_cell.items() if len(v) >= 2}
    if not level:
        return
    means: list[tuple[float, int, float]] = []  # (mean residual, cells, mean request var)
    resid_rows: list[dict[str, float]] = []
    for row, var in zip(logs, req, strict=True):
        resid = {c: row[c] - level[c] for c in row if c in level}
        if not resid:
            continue
        mean = sum(resid.values()) / len(resid)
        means.append((mean, len(resid), sum(var.get(c, 0.0) for c in resid) / len(resid)))
        resid_rows.append({c: r - mean for c, r in resid.items()})
    runs = len(means)
    if runs < 2:
        return
    n_obs = sum(len(r) for r in resid_rows)
    # Levels (one per cell) and run means (one per run, summing to ~0 in a segment) use df.
    df_own = n_obs - len(level) - (runs - 1)
    if df_own > 0:
        req_part = sum(var.get(c, 0.0) for var, r in zip(req, resid_rows, strict=False)
                       for c in r)
        sums.ss_own += max(0.0, sum(x * x for r in resid_rows for x in r.values())
                           - req_part * (df_own / max(n_obs, 1)))
        sums.df_own += df_own
    for mean, n_cells, req_var in means:
        sums.ss_mean += mean * mean - req_var / n_cells * (runs - 1) / runs
    sums.df_mean += runs - 1
    sums.nights += runs


def estimate(entries: Sequence[Mapping[str, Any]], metric: str, *,
             total: float = DEFAULT_RUN_NOISE,
             common_share: float = DEFAULT_COMMON_SHARE) -> RunNoise:
    """One metric's run-to-run noise from counted history lines (oldest first), shrunk toward
    the prior; the prior itself when the history holds fewer than two runs of one segment."""
    prior = _prior(metric, total, common_share)
    segments: dict[str, list[Mapping[str, Any]]] = {}
    for entry in entries:
        segments.setdefault(_segment_key(entry), []).append(entry)
    sums = _Sums()
    for group in segments.values():
        logs, req = _cell_logs(group, metric)
        _segment(logs, req, sums)
    if sums.df_mean < 1:
        return prior
    own_var = sums.ss_own / sums.df_own if sums.df_own > 0 else prior.own**2
    cells = max(1.0, sums.df_own / max(sums.df_mean, 1.0) + 1.0)
    common_var = max(0.0, sums.ss_mean / sums.df_mean - own_var / cells)
    own_post = (PRIOR_NIGHTS * prior.own**2 + sums.df_own * own_var) / (PRIOR_NIGHTS + sums.df_own)
    common_post = ((PRIOR_NIGHTS * prior.common**2 + sums.df_mean * common_var)
                   / (PRIOR_NIGHTS + sums.df_mean))
    return RunNoise(metric, math.sqrt(common_post), math.sqrt(own_post),
                    PRIOR_NIGHTS + sums.df_mean, sums.nights, "history")


def from_history(entries: Sequence[Mapping[str, Any]], label: str, *,
                 metrics: Sequence[str] = ("tok_s", "step_ms", "avg_commit", "ttft_ms",
                                           "decode_tok_s"),
                 total: float = DEFAULT_RUN_NOISE,
                 common_share: float = DEFAULT_COMMON_SHARE) -> NoiseModel:
    """The noise model of box ``label`` from its history lines (any order)."""
    runs = sorted((e for e in entries if counted(e, label)),
                  key=lambda e: (str(e.get("created", "")), str(e.get("run_id", ""))))
    found = {m: estimate(runs, m, total=total, common_share=common_share) for m in metrics}
    return NoiseModel({m: n for m, n in found.items() if n.source == "history"}, total,
                      common_share)
