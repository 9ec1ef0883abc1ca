"""Run-to-run noise: what moves a figure between two runs besides a real change.

Repeats inside one run see the per-step and per-request noise; a comparison of two runs
(today against a baseline written on another night) also carries the **run** term — a night,
a neighbour on the box, a driver state — the same for every request of the run
(docs/noise.md). In logs, for a metric of case ``c`` in run ``n``::

    log y[c, n] = level[c] + common[n] + own[c, n] + (the median's request noise)

``common`` moves every case of a run together (σ_common), ``own`` is each case's own part
(σ_own). They are estimated from the run history (:func:`from_history`), with three rules
(docs/noise.md):

- **a night is a night**: runs less than ``night_window_h`` hours (default 12) after a
  night's first run share its night term, so back-to-back runs, CI retries and a day's tries
  count once (their mean is the night's figure) and the sentence counts nights, not runs;
- **a level shift is not spread**: within a segment (the same baseline and fingerprint) the
  spread comes from successive differences of nights, which cancel the levels without
  estimating them, and a run judged a regression is left out of the history that judges the
  next one, so a persistent regression fails every night until a new baseline or a fix;
- **a stated noise is knowledge**: the estimate is shrunk toward a **prior** (``run_noise``,
  default :data:`DEFAULT_RUN_NOISE`, :data:`DEFAULT_COMMON_SHARE` of its σ common) that
  weighs as :data:`PRIOR_WEIGHT` nights (:data:`STATED_PRIOR_WEIGHT` when the user stated
  it). The prior is not a sample and adds no degrees of freedom of its own: on the first
  night an interval uses the normal quantile, and the history's share of the estimate brings
  its own df (Satterthwaite). The request noise of each stored median (its standard error,
  when the history line holds it) is subtracted, since every comparison counts it
  separately.

The default is the night noise the drift model (``core/drift.py``,
``benchmarks/drift_power.py``) is calibrated for: 3 % per case, half of its σ common to the
night — the upper end of what a shared GPU box shows between nights, so on a quieter box the
first nights' intervals are wider than they need be, never narrower. A box known to be
quieter states so (``--specperf-run-noise 0.01``); its history then confirms or corrects it.

A same-night comparison (A/B on two endpoints, or the gate's reference measured just before
the deploy) cancels the run term: :meth:`NoiseModel.same_night`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

DEFAULT_RUN_NOISE = 0.03
DEFAULT_COMMON_SHARE = 0.5  # of σ, as core/drift.py and benchmarks/drift_power.py model it
# How many nights of history the prior weighs against (docs/noise.md "The prior"): the
# default is a guess about a box nobody has measured, soon outweighed; a stated noise is
# knowledge about this box, outweighed only by weeks of history that disagree. Either way the
# prior is not a sample: it adds no degrees of freedom of its own (an interval built on the
# prior alone uses the normal quantile), only the history's share of the estimate does.
PRIOR_WEIGHT = 3.0
STATED_PRIOR_WEIGHT = 20.0
# Runs of one box less than this many hours after the first run of a night share its night
# term (a nightly cadence: back-to-back runs, CI retries and a day's tries are one night).
DEFAULT_NIGHT_WINDOW_H = 12.0
# Runs of one box that count toward the history: complete full sweeps only.
_COUNTED_KINDS = ("full",)
SOURCES = ("history", "prior", "same-night")


# n · Var(median of n standard normals), n = 1..12 (numpy, 400 000 draws each); beyond, the
# large-n limit π/2, which bounds it from above.
_MEDIAN_VAR_N = (1.0, 1.0, 1.344, 1.198, 1.43, 1.288, 1.472, 1.347, 1.494, 1.379, 1.517, 1.405)


def format_spread(fraction: float) -> str:
    """A standard deviation as a percentage with one decimal, e.g. ±3.0%."""
    return f"\u00b1{100.0 * fraction:.1f}%"


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
    stated: bool = False  # the prior was stated (--specperf-run-noise), not the default

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
        pct = format_spread(self.case_sd())
        if self.source == "prior":
            head = f"run-to-run {pct} as stated" if self.stated else f"run-to-run {pct} assumed"
            if not self.nights:
                return f"{head}: no history yet"
            night = "night" if self.nights == 1 else "nights"
            return f"{head}: {self.nights} {night} of history, no spread between nights yet"
        night = "night" if self.nights == 1 else "nights"
        return f"run-to-run {pct} from {self.nights} {night}"

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "common": self.common, "own": self.own,
                "df": self.df if math.isfinite(self.df) else None, "nights": self.nights,
                "source": self.source, "stated": self.stated}


@dataclass(frozen=True)
class NoiseModel:
    """The run-to-run noise of every metric, for comparisons against a stored baseline."""

    metrics: Mapping[str, RunNoise] = field(default_factory=dict)
    total: float = DEFAULT_RUN_NOISE
    common_share: float = DEFAULT_COMMON_SHARE
    same: bool = False
    stated: bool = False
    # Nights the box's history holds (its counted runs): a prior stands in for a metric the
    # history gives no spread for, and its sentence says how much history there was.
    nights: int = 0

    def of(self, metric: str) -> RunNoise:
        """The noise of ``metric``: estimated where the history knew it, else the prior."""
        if self.same:
            return RunNoise(metric, 0.0, 0.0, math.inf, 0, "same-night")
        found = self.metrics.get(metric)
        return found if found is not None else replace(
            _prior(metric, self.total, self.common_share, self.stated), nights=self.nights)

    @classmethod
    def prior(cls, total: float = DEFAULT_RUN_NOISE,
              common_share: float = DEFAULT_COMMON_SHARE, stated: bool = False) -> NoiseModel:
        return cls({}, total, common_share, stated=stated)

    @classmethod
    def same_night(cls) -> NoiseModel:
        return cls({}, 0.0, DEFAULT_COMMON_SHARE, True)

    def to_dict(self) -> dict[str, Any]:
        return {"same_night": self.same, "prior": self.total, "common_share": self.common_share,
                "stated": self.stated,
                "metrics": {m: n.to_dict() for m, n in sorted(self.metrics.items())}}


def prior_weight(stated: bool) -> float:
    """How many nights of history the prior weighs against (:data:`PRIOR_WEIGHT`)."""
    return STATED_PRIOR_WEIGHT if stated else PRIOR_WEIGHT


def _prior(metric: str, total: float, common_share: float, stated: bool = False) -> RunNoise:
    common = total * common_share
    own = total * math.sqrt(max(1.0 - common_share**2, 0.0))
    return RunNoise(metric, common, own, math.inf, 0, "prior", stated)


def check_prior(total: float, common_share: float) -> None:
    """A prior the model can use: σ ≥ 0 and a common share in [0, 1] (ValueError otherwise)."""
    if not (math.isfinite(total) and 0.0 <= total < 1.0):
        raise ValueError(f"run-to-run noise must be a fraction in [0, 1), got {total!r}")
    if not (math.isfinite(common_share) and 0.0 <= common_share <= 1.0):
        raise ValueError(f"the common share must be in [0, 1], got {common_share!r}")


# -- estimation from the history ----------------------------------------------------------------
def counted(entry: Mapping[str, Any], label: str) -> bool:
    """A history line that tells the box's run-to-run noise: a complete full sweep of ``label``
    that was not judged a regression (a real change is a level shift, not spread: a run
    that regressed would teach the model that the regression is noise)."""
    return (str(entry.get("label", "")) == label
            and str(entry.get("kind") or "full") in _COUNTED_KINDS
            and not entry.get("interrupted") and not entry.get("outage")
            and not entry.get("stopped_by") and isinstance(entry.get("cells"), dict)
            and not entry.get("failed"))


def _segment_key(entry: Mapping[str, Any]) -> str:
    """Runs with the same baseline and fingerprint share their levels (a boundary resets)."""
    return json.dumps([entry.get("baseline"), entry.get("fingerprint")], sort_keys=True,
                      default=str)


def _created(entry: Mapping[str, Any]) -> datetime | None:
    """When the run was written (ISO 8601, as results.json stores it); None if unreadable."""
    text = str(entry.get("created", ""))
    try:
        found = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return found if found.tzinfo else found.replace(tzinfo=timezone.utc)


def nights_of(entries: Sequence[Mapping[str, Any]],
              window_h: float = DEFAULT_NIGHT_WINDOW_H) -> list[list[Mapping[str, Any]]]:
    """The runs (oldest first) grouped into nights: a run written less than ``window_h`` hours
    after the first run of the current night shares its night term. A run whose time cannot
    be read is a night of its own."""
    nights: list[list[Mapping[str, Any]]] = []
    first: datetime | None = None
    for entry in entries:
        at = _created(entry)
        if (nights and at is not None and first is not None
                and (at - first).total_seconds() < window_h * 3600.0):
            nights[-1].append(entry)
            continue
        nights.append([entry])
        first = at
    return nights


def _night_logs(night: Sequence[Mapping[str, Any]], metric: str
                ) -> tuple[dict[str, float], dict[str, float]]:
    """One night: each cell's mean log median over the night's runs, and that mean's request
    variance (0 when not stored)."""
    sums: dict[str, list[float]] = {}
    req: dict[str, list[float]] = {}
    for entry in night:
        ses = entry.get("cell_se") or {}
        for cell, metrics in (entry.get("cells") or {}).items():
            value = (metrics or {}).get(metric)
            if isinstance(value, (int, float)) and value > 0 and math.isfinite(value):
                sums.setdefault(cell, []).append(math.log(value))
                se = (ses.get(cell) or {}).get(metric)
                req.setdefault(cell, []).append(float(se) ** 2
                                                if isinstance(se, (int, float)) else 0.0)
    logs = {c: sum(v) / len(v) for c, v in sums.items()}
    var = {c: sum(v) / len(v) ** 2 for c, v in req.items()}
    return logs, var


@dataclass
class _Sums:
    """Successive differences of nights, pooled over segments."""

    ss_own: float = 0.0  # Σ over pairs of the cells' spread about the pair's mean difference
    df_own: float = 0.0
    req_own: float = 0.0  # the request variance taken out of ss_own
    pairs: list[tuple[float, int, float]] = field(default_factory=list)  # (mean Δ, cells, req)
    nights: int = 0


def _segment(nights: Sequence[tuple[dict[str, float], dict[str, float]]], sums: _Sums) -> None:
    """Add one segment's nights (same levels) to the sums, by successive differences.

    The difference of two neighbouring nights cancels the cells' levels without estimating
    them, so a level that moves inside a segment (a change too small to be judged a
    regression) adds one large difference instead of widening every residual (von Neumann's
    mean square successive difference)."""
    if len(nights) < 2:
        return
    sums.nights += len(nights)
    for (logs0, var0), (logs1, var1) in zip(nights, nights[1:], strict=False):
        cells = sorted(set(logs0) & set(logs1))
        if not cells:
            continue
        deltas = [logs1[c] - logs0[c] for c in cells]
        req = [var0.get(c, 0.0) + var1.get(c, 0.0) for c in cells]
        mean = sum(deltas) / len(cells)
        mean_req = sum(req) / len(cells)
        if len(cells) > 1:
            spread = sum((x - mean) ** 2 for x in deltas)
            # E[spread] = (C − 1)(2σ_own² + mean request variance)
            sums.ss_own += max(0.0, spread - (len(cells) - 1) * mean_req) / 2.0
            sums.req_own += (len(cells) - 1) * mean_req / 2.0
            sums.df_own += len(cells) - 1
        sums.pairs.append((mean, len(cells), mean_req))


def _history_df(pairs: int) -> float:
    """Degrees of freedom of a variance from ``pairs`` successive differences: neighbouring
    differences share a night, so n − 1 of them carry about two thirds of n − 1 independent
    squares' information (von Neumann's ratio), never less than one."""
    return 1.0 if pairs <= 1 else max(1.0, 2.0 * pairs / 3.0)


def _blend(prior_var: float, weight: float, found: float, raw: float,
           df: float) -> tuple[float, float]:
    """The prior and the history's estimate of one run-term variance, and the blend's df.

    The history's ``found`` is ``raw`` (a mean square with ``df`` degrees of freedom) less
    the medians' known request variance, so its sampling variance is that of ``raw``:
    2·raw²/df. The prior counts as ``weight`` nights of a history whose spread is the prior's
    own (2·prior²/weight). The two are weighted by their precisions: a history whose spread
    is mostly request noise moves the prior little, a quiet box's history (raw below the
    prior) moves it fast. The prior is knowledge, not a sample: it brings no sampling error,
    so the blend's df counts only the history's share (Satterthwaite); the prior alone has
    infinitely many (the normal quantile)."""
    if df <= 0:
        return prior_var, math.inf
    if raw <= 0:  # nights that repeat each other exactly: no run term to carry
        return 0.0, math.inf
    w_history = df / (raw * raw)
    w_prior = weight / (prior_var * prior_var) if prior_var > 0 else 0.0
    share = w_history / (w_prior + w_history)
    value = (1.0 - share) * prior_var + share * found
    if value <= 0:
        return 0.0, math.inf
    return value, max(value * value * df / (share * share * raw * raw), 1.0)


def estimate(entries: Sequence[Mapping[str, Any]], metric: str, *,
             total: float = DEFAULT_RUN_NOISE,
             common_share: float = DEFAULT_COMMON_SHARE, stated: bool = False,
             night_window_h: float = DEFAULT_NIGHT_WINDOW_H) -> RunNoise:
    """One metric's run-to-run noise from counted history lines (oldest first), shrunk toward
    the prior; the prior itself when no segment holds two nights."""
    prior = _prior(metric, total, common_share, stated)
    segments: dict[str, list[Mapping[str, Any]]] = {}
    for entry in entries:
        segments.setdefault(_segment_key(entry), []).append(entry)
    sums = _Sums()
    for group in segments.values():
        _segment([_night_logs(n, metric) for n in nights_of(group, night_window_h)], sums)
    if not sums.pairs:
        return prior
    own_var = sums.ss_own / sums.df_own if sums.df_own > 0 else prior.own**2
    own_raw = own_var + sums.req_own / max(sums.df_own, 1.0)
    # E[mean Δ²] = 2σ_common² + (2σ_own² + mean request variance) / cells
    common_var = max(0.0, sum(m * m / 2.0 - (own_var + req / 2.0) / c
                              for m, c, req in sums.pairs) / len(sums.pairs))
    common_raw = sum(m * m / 2.0 for m, _, _ in sums.pairs) / len(sums.pairs)
    weight = prior_weight(stated)
    own_post, df_own = _blend(prior.own**2, weight, own_var, own_raw,
                              sums.df_own if sums.df_own > 0 else 0.0)
    common_post, df_common = _blend(prior.common**2, weight, common_var, common_raw,
                                    _history_df(len(sums.pairs)))
    # One case's run term: common and own together, its df by Satterthwaite.
    parts = [(v, d) for v, d in ((common_post, df_common), (own_post, df_own)) if v > 0]
    denom = sum(v * v / d for v, d in parts if math.isfinite(d))
    total_var = common_post + own_post
    df = max(total_var * total_var / denom, 1.0) if denom > 0 else math.inf
    return RunNoise(metric, math.sqrt(common_post), math.sqrt(own_post), df, sums.nights,
                    "history", stated)


def from_history(entries: Sequence[Mapping[str, Any]], label: str, *,
                 metrics: Sequence[str] = ("tok_s", "step_ms", "avg_commit", "ttft_ms",
                                           "decode_tok_s"),
                 total: float = DEFAULT_RUN_NOISE,
                 common_share: float = DEFAULT_COMMON_SHARE, stated: bool = False,
                 night_window_h: float = DEFAULT_NIGHT_WINDOW_H) -> NoiseModel:
    """The noise model of box ``label`` from its history lines (any order); ``stated``: the
    prior ``total`` was stated by the user (knowledge of this box), not the default."""
    runs = sorted((e for e in entries if counted(e, label)),
                  key=lambda e: (str(e.get("created", "")), str(e.get("run_id", ""))))
    found = {m: estimate(runs, m, total=total, common_share=common_share, stated=stated,
                         night_window_h=night_window_h) for m in metrics}
    return NoiseModel({m: n for m, n in found.items() if n.source == "history"}, total,
                      common_share, stated=stated, nights=len(nights_of(runs, night_window_h)))
