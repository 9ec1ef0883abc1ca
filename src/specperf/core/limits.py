"""What a regression is, per metric, and how a move is written.

Each metric has a direction (:data:`DIRECTION`: +1 must not fall, −1 must not rise) and a
default tolerance, a fraction of the baseline median. The formatting here is shared by every
sentence the suite prints (verdicts, baselines, fingerprints, digests), so a number reads the
same wherever it appears. This module sits at the bottom of the package: it imports only
:mod:`specperf.core.errors`, :mod:`specperf.core.contract` (what a move's status is) and
:mod:`specperf.core.interval` (a move's interval, built where every judge's is).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from . import contract
from .errors import ConfigError
from .interval import relative

DEFAULT_TOLERANCES: dict[str, float] = {
    "tok_s": 0.10, "avg_commit": 0.10, "step_ms": 0.10, "decode_tok_s": 0.10, "slope": 0.15,
    # Prefill (time to first token) is one short burst per request: noisier than a step
    # time averaged over hundreds of steps, so its band is wider (README: tolerances).
    "ttft_ms": 0.25,
}
DIRECTION: dict[str, int] = {"tok_s": +1, "avg_commit": +1, "decode_tok_s": +1, "step_ms": -1,
                             "ttft_ms": -1}
LABELS: dict[str, str] = {
    "tok_s": "tok/s", "decode_tok_s": "decode tok/s", "avg_commit": "avg commit",
    "step_ms": "step time", "ttft_ms": "prefill (TTFT)",
}
# The metrics in milliseconds: their values carry the unit in every sentence.
MS_METRICS = ("step_ms", "ttft_ms")
# The smallest move that counts, in the metric's unit, whatever its relative size: a tiny
# prompt's prefill takes a few ms, which a loaded host's timer jitter doubles. A move inside
# it is a pass, and a median inside it cannot regress, so its spread decides no repeats.
FLOOR: dict[str, float] = {"ttft_ms": 10.0}

# How a skip about the deployment, not a failed measurement, reads (no parser deployed → no
# parser case to judge); the gate counts such a case as fine by SKIP_PROPERTY, not by this.
NOT_APPLICABLE = "not applicable:"
# The user property a skipped test carries to say why as data (the gate reads it, never the
# skip's words): a test that judges nothing that exists on this server.
SKIP_PROPERTY, SKIP_NOT_APPLICABLE = "specperf_skip", "not-applicable"
# The user property a judged test that reached no verdict records its reason under
# (plugin/conclude.py not_judged): the record keeps it as ``not_judged``, by case.
NOT_JUDGED_PROPERTY = "specperf_not_judged"

MINUS = "\u2212"
ARROW = "\u2192"


def _signed(value: float, decimals: int) -> str:
    text = f"{abs(value):.{decimals}f}"
    # A value that rounds to zero reads as +0.0, never as −0.0.
    negative = value < 0 and float(text) != 0.0
    return (MINUS if negative else "+") + text


def format_percent(fraction: float) -> str:
    """A relative change as a signed percentage with one decimal, e.g. −30.1%."""
    return _signed(100.0 * fraction, 1) + "%"


def format_share(fraction: float) -> str:
    """An unsigned fraction (a tolerance, a share) as a percentage to 0.1, e.g. 2.5%, 10%."""
    return f"{round(100.0 * fraction, 1):g}%"


def format_ci(low: float, high: float, level: float = 0.95) -> str:
    """A relative change's interval, e.g. 95% CI −11.9% to +13.8%."""
    return f"{100 * level:.3g}% CI {format_percent(low)} to {format_percent(high)}"


def format_limit(metric: str, tolerance: float) -> str:
    """The limit in the metric's bad direction, e.g. −10% for tok/s, +10% for step time."""
    sign = MINUS if DIRECTION.get(metric, -1) > 0 else "+"
    return f"{sign}{round(100.0 * tolerance, 1):g}%"


def format_value(metric: str, value: float) -> str:
    """A metric value at the precision people compare it at (ms carries its unit)."""
    if metric == "avg_commit":
        return f"{value:.2f}"
    if metric in MS_METRICS:
        return f"{value:.1f}" if abs(value) < 10 else f"{value:.0f}"
    return f"{value:.1f}"


def format_move(metric: str, base: float, new: float) -> str:
    """'step time 144 → 148 ms' — label, both values and unit."""
    unit = " ms" if metric in MS_METRICS else ""
    return (f"{LABELS.get(metric, metric)} {format_value(metric, base)} {ARROW} "
            f"{format_value(metric, new)}{unit}")


def check_tolerance(metric: str, value: object, where: str, *,
                    form: str = "metric = fraction", example: str = "step_ms = 0.15") -> float:
    """One tolerance override, checked: a known metric and a fraction in (0, 1].

    The one check of a tolerance, wherever it is written (the ``tolerances`` setting, a
    test's ``tolerance`` marker); ``where`` names the entry and its source, ``form`` and
    ``example`` show how that source spells one. Else a ConfigError saying what to write.
    """
    if metric not in DEFAULT_TOLERANCES:
        known = ", ".join(sorted(DEFAULT_TOLERANCES))
        raise ConfigError(f"{where} names no tolerance: expected one of {known} as "
                          f"'{form}', e.g. {example}.")
    number = _number(value)
    if not 0.0 < number <= 1.0:
        raise ConfigError(f"{where} is not valid: expected '{form}' with a fraction in "
                          f"(0, 1], e.g. {example} for 15%.")
    return number


def _number(value: object) -> float:
    """``value`` as a number (a number, or text that spells one); NaN when it is neither."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return float("nan")
    try:
        return float(value)
    except ValueError:
        return float("nan")


def tolerance(tolerances: Mapping[str, float], metric: str) -> float:
    """The tolerance in force for ``metric`` in ``tolerances`` (a run's are computed by
    ``RunState.tolerances_for``), else the default."""
    return tolerances.get(metric, DEFAULT_TOLERANCES[metric])


@dataclass(frozen=True)
class Move:
    """One figure before and after — a baseline and this run, or two paths of one case —
    judged against its tolerance in its metric's direction. Case verdicts and path verdicts
    both speak through it, so a move reads the same in every sentence."""

    metric: str
    base: float
    new: float
    tolerance: float
    label: str = ""  # default: the metric's name in LABELS
    unit: str | None = None  # default: " ms" for step time, none otherwise
    floor: float = 0.0  # FLOOR: a move smaller than this (in the metric's unit) is a pass
    # The log change's standard error and its df: both sides' request spread and, against a
    # baseline of another night, the run-to-run noise (core/noise.py). 0: a point estimate.
    se: float = 0.0
    df: float = math.inf

    @property
    def direction(self) -> int:
        return DIRECTION.get(self.metric, +1)

    @property
    def change(self) -> float:
        return self.new / self.base - 1.0 if self.base else 0.0

    @property
    def good_change(self) -> float:
        """The change signed so that positive is better."""
        return self.direction * self.change

    def interval(self) -> tuple[float, float] | None:
        """The relative change's 95 % interval, or None for a point estimate."""
        if self.se <= 0 or self.base <= 0 or self.new <= 0:
            return None
        return relative(math.log(self.new / self.base), self.se, self.df)

    @property
    def status(self) -> str:
        """The contract's status of this move (:mod:`specperf.core.contract`): its interval
        when it has one, else the point estimate."""
        if abs(self.new - self.base) < self.floor:
            return contract.PASS
        bounds = self.interval()
        if bounds is None:
            return contract.status(contract.Change(self.change), self.direction, self.tolerance)
        return contract.median_status(contract.Change(self.change, *bounds), self.direction,
                                      self.tolerance)

    @property
    def undetermined(self) -> bool:
        return self.status == contract.UNDETERMINED

    @property
    def regressed(self) -> bool:
        return self.status == contract.REGRESSION

    @property
    def improved(self) -> bool:
        return self.status == contract.IMPROVED

    @property
    def noise(self) -> bool:
        return abs(self.change) < self.tolerance

    def text(self, *, vs: str = "", limit: bool = False, noise: bool = False) -> str:
        """'avg commit 7.85 → 5.64 (−28.2%)', optionally with the limit or 'within noise';
        ``vs`` names what the new value is compared with."""
        extra = f", limit {format_limit(self.metric, self.tolerance)}" if limit else \
            (", within noise" if noise and self.noise else "")
        name = self.label or LABELS.get(self.metric, self.metric)
        unit = self.unit if self.unit is not None else (" ms" if self.metric in MS_METRICS
                                                         else "")
        return (f"{name} {format_value(self.metric, self.base)} {ARROW} "
                f"{format_value(self.metric, self.new)}{unit}{vs} "
                f"({format_percent(self.change)}{extra})")

    def detail(self) -> dict[str, float]:
        out = {"base": self.base, "new": self.new, "change": self.change,
               "limit": -self.direction * self.tolerance}
        bounds = self.interval()
        if bounds is not None:
            out.update(low=bounds[0], high=bounds[1], se=self.se)
        return out
