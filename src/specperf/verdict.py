"""Verdicts: compare a case with its baseline and say, in one sentence, what moved and why.

A :class:`Verdict` is a small value whose :meth:`Verdict.fails` returns the sentence
a person acts on (or None). Regressions are attributed with the log identity of
:mod:`specperf.model`: tok/s = avg commit / step time, so a tok/s drop splits into
an acceptance share, a step-time share and an unexplained rest.

Tolerances are fractions of the baseline median; each metric has a direction
(:data:`DIRECTION`): +1 must not fall, −1 must not rise. A metric regresses when
its median moves past ``baseline · (1 ∓ tolerance)`` in its bad direction.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import ConfigError
from .model import Attribution, ContextFit, attribute, predict_tok_s, rel_se, rest_ratio, t95
from .stats import UNSTABLE_REL_MAD, Summary, summarize

if TYPE_CHECKING:  # baseline imports this module's tables, so only a type-time import here
    from .baseline import CaseBaseline

DEFAULT_TOLERANCES: dict[str, float] = {
    "tok_s": 0.10, "avg_commit": 0.10, "step_ms": 0.10, "decode_tok_s": 0.10, "slope": 0.15,
}
DIRECTION: dict[str, int] = {"tok_s": +1, "avg_commit": +1, "decode_tok_s": +1, "step_ms": -1}
LABELS: dict[str, str] = {
    "tok_s": "tok/s", "decode_tok_s": "decode tok/s", "avg_commit": "avg commit",
    "step_ms": "step time",
}
STATUSES = ("pass", "fail", "improved", "no-baseline", "undetermined")

# Attribution thresholds. A part "explains" a drop when the other part's share is
# below SECONDARY_SHARE (it is then noise-sized next to the main cause); when both
# reach it, both are named with their shares. The drop is unexplained when the rest
# (prefill, transport, client) carries at least half of it.
SECONDARY_SHARE = 0.25
UNEXPLAINED_SHARE = 0.5

MINUS = "\u2212"
ARROW = "\u2192"
ACCEPTANCE_HINT = "acceptance regression: check the drafter and the text"
STEP_HINT = "step-time regression: check the kernels, attention backend and KV cache"
REFRESH_HINT = "refresh it with --update-baselines if this is intended"

Details = dict[str, dict[str, float]]


@dataclass(frozen=True)
class Verdict:
    """The outcome of one comparison, with the sentence that explains it."""

    case_id: str
    status: str
    message: str
    attribution: Attribution | None = None
    details: Details = field(default_factory=dict)
    # The exact acceptance comparison (exact.ExactResult.to_dict()), when one was made.
    exact: dict[str, Any] | None = None

    def fails(self) -> str | None:
        """The sentence to fail the case with, or None when it did not regress."""
        return self.message if self.status == "fail" else None


# --- formatting -------------------------------------------------------------------


def _signed(value: float, decimals: int) -> str:
    text = f"{abs(value):.{decimals}f}"
    # A value that rounds to zero reads as +0.0, never as −0.0.
    negative = value < 0 and float(text) != 0.0
    return (MINUS if negative else "+") + text


def format_percent(fraction: float) -> str:
    """A relative change as a signed percentage with one decimal, e.g. −30.1%."""
    return _signed(100.0 * fraction, 1) + "%"


def format_limit(metric: str, tolerance: float) -> str:
    """The limit in the metric's bad direction, e.g. −10% for tok/s, +10% for step time."""
    sign = MINUS if DIRECTION.get(metric, -1) > 0 else "+"
    return f"{sign}{round(100.0 * tolerance, 1):g}%"


def format_value(metric: str, value: float) -> str:
    """A metric value at the precision people compare it at (ms carries its unit)."""
    if metric == "avg_commit":
        return f"{value:.2f}"
    if metric == "step_ms":
        return f"{value:.1f}" if abs(value) < 10 else f"{value:.0f}"
    return f"{value:.1f}"


def format_move(metric: str, base: float, new: float) -> str:
    """'step time 144 → 148 ms' — label, both values and unit."""
    unit = " ms" if metric == "step_ms" else ""
    return (f"{LABELS.get(metric, metric)} {format_value(metric, base)} {ARROW} "
            f"{format_value(metric, new)}{unit}")


def _change(base: float, new: float) -> float:
    return new / base - 1.0 if base else 0.0


# --- tolerances ---------------------------------------------------------------------


def resolve_tolerances(*layers: Mapping[str, float]) -> dict[str, float]:
    """Merge tolerance layers, later ones overriding (defaults < ini < file < case < marker)."""
    merged: dict[str, float] = {}
    for layer in layers:
        for key, value in layer.items():
            merged[key] = _checked_tolerance(key, value)
    return merged


def _checked_tolerance(key: str, value: object) -> float:
    if key not in DEFAULT_TOLERANCES:
        accepted = ", ".join(sorted(DEFAULT_TOLERANCES))
        raise ConfigError(f"unknown tolerance {key!r}: use one of {accepted}.")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"tolerance {key}={value!r} is not a number: give a fraction "
                          f"in (0, 1], e.g. 0.10 for 10%.")
    if not 0.0 < float(value) <= 1.0:
        raise ConfigError(f"tolerance {key}={value!r} is out of range: give a fraction "
                          f"in (0, 1], e.g. 0.10 for 10%.")
    return float(value)


def _tolerance(tolerances: Mapping[str, float], metric: str) -> float:
    return tolerances.get(metric, DEFAULT_TOLERANCES[metric])


# --- case verdicts --------------------------------------------------------------------


@dataclass(frozen=True)
class _Move:
    """One metric's baseline and current medians, judged against its tolerance."""

    metric: str
    base: float
    new: float
    tolerance: float

    @property
    def change(self) -> float:
        return _change(self.base, self.new)

    @property
    def good_change(self) -> float:
        """The change signed so that positive is better."""
        return DIRECTION[self.metric] * self.change

    @property
    def regressed(self) -> bool:
        return self.good_change < -self.tolerance

    @property
    def improved(self) -> bool:
        return self.good_change > self.tolerance

    @property
    def noise(self) -> bool:
        return abs(self.change) < self.tolerance

    def text(self, *, limit: bool = False, noise: bool = False) -> str:
        """'avg commit 7.85 → 5.64 (−28.2%)', optionally with the limit or 'within noise'."""
        extra = ""
        if limit:
            extra = f", limit {format_limit(self.metric, self.tolerance)}"
        elif noise and self.noise:
            extra = ", within noise"
        move = format_move(self.metric, self.base, self.new)
        return f"{move} ({format_percent(self.change)}{extra})"

    def detail(self) -> dict[str, float]:
        return {"base": self.base, "new": self.new, "change": self.change,
                "limit": -DIRECTION[self.metric] * self.tolerance}


def judge_case(case_id: str, current: Mapping[str, Summary], base: CaseBaseline,
               tolerances: Mapping[str, float]) -> Verdict:
    """Compare one case's medians with its baseline; tolerances are the resolved layers."""
    moves = _moves(current, base, tolerances)
    details = {m: mv.detail() for m, mv in moves.items()}
    if not moves:
        return Verdict(case_id, "no-baseline",
                       f"{case_id}: the baseline has no metric this run measured, so "
                       f"nothing can be compared — write a new version with --update-baselines.")
    attribution = _attribution(moves)
    broken = [m for m in ("tok_s", "decode_tok_s", "avg_commit", "step_ms")
              if m in moves and moves[m].regressed]
    if broken:
        message = _regression_message(moves, broken[0], attribution)
        return Verdict(case_id, "fail", message, attribution, details)
    summary = _pass_summary(moves)
    if any(mv.improved for mv in moves.values()):
        faster = any(moves[m].improved for m in ("tok_s", "decode_tok_s", "step_ms") if m in moves)
        word = "faster" if faster else "better"
        message = f"{summary} — {word} than the baseline: {REFRESH_HINT}."
        return Verdict(case_id, "improved", message, attribution, details)
    return Verdict(case_id, "pass", f"{summary} — within tolerance.", attribution, details)


def _moves(current: Mapping[str, Summary], base: CaseBaseline,
           tolerances: Mapping[str, float]) -> dict[str, _Move]:
    return {m: _Move(m, base.metrics[m].median, current[m].median, _tolerance(tolerances, m))
            for m in DIRECTION if m in current and m in base.metrics and base.metrics[m].median}


def _attribution(moves: Mapping[str, _Move]) -> Attribution | None:
    if not all(m in moves for m in ("tok_s", "avg_commit", "step_ms")):
        return None
    ratios = [moves[m].new / moves[m].base for m in ("tok_s", "avg_commit", "step_ms")]
    if min(ratios) <= 0:  # a zero median has no logarithm; nothing to split
        return None
    return attribute(*ratios)


def _pass_summary(moves: Mapping[str, _Move]) -> str:
    parts = []
    if "tok_s" in moves:
        parts.append(moves["tok_s"].text(limit=True))
    parts += [format_move(m, moves[m].base, moves[m].new)
              for m in ("avg_commit", "step_ms") if m in moves]
    return "; ".join(parts)


def _regression_message(moves: Mapping[str, _Move], first: str,
                        attribution: Attribution | None) -> str:
    head = moves[first].text(limit=True)
    if first in ("avg_commit", "step_ms"):
        hint = ACCEPTANCE_HINT if first == "avg_commit" else STEP_HINT
        return f"{head}{_while_tok_s(moves)} — {hint}."
    ratio_attr = attribution if first == "tok_s" else _decode_attribution(moves)
    if ratio_attr is None or "avg_commit" not in moves or "step_ms" not in moves:
        return (f"{head} — acceptance or step time was not measured, so the drop cannot be "
                f"attributed: check the acceptance source.")
    return f"{head}: {_cause_clause(moves['avg_commit'], moves['step_ms'], ratio_attr)}"


def _while_tok_s(moves: Mapping[str, _Move]) -> str:
    if "tok_s" not in moves:
        return ""
    return f" while {moves['tok_s'].text()} stayed within its limit"


def _decode_attribution(moves: Mapping[str, _Move]) -> Attribution | None:
    """Decode tok/s splits like tok/s, without prefill (so its rest is ~0)."""
    if not all(m in moves for m in ("decode_tok_s", "avg_commit", "step_ms")):
        return None
    ratios = [moves[m].new / moves[m].base for m in ("decode_tok_s", "avg_commit", "step_ms")]
    return attribute(*ratios) if min(ratios) > 0 else None


def _cause_clause(commit: _Move, step: _Move, attr: Attribution) -> str:
    """What explains a drop: acceptance, step time, both, or neither, and what to check."""
    acc, stp = attr.share("acceptance"), attr.share("step")
    if attr.share("rest") >= UNEXPLAINED_SHARE or max(acc, stp) < SECONDARY_SHARE:
        return (f"{commit.text(noise=True)}; {step.text(noise=True)} — neither acceptance nor "
                f"step time explains it (prefill, transport or client overhead?).")
    if stp < SECONDARY_SHARE:
        return f"{commit.text()} explains it; {step.text(noise=True)} — {ACCEPTANCE_HINT}."
    if acc < SECONDARY_SHARE:
        return f"{step.text()} explains it; {commit.text(noise=True)} — {STEP_HINT}."
    return (f"{commit.text()} and {step.text()} both moved, acceptance explains "
            f"{acc:.0%}, step time {stp:.0%} — acceptance and step-time regression: check the "
            f"drafter and the text, then the kernels, attention backend and KV cache.")


# --- context fit and prediction -------------------------------------------------------------


def judge_fit(text_class: str, current: ContextFit, base: ContextFit,
              slope_tolerance: float, contexts: Sequence[int] = ()) -> Verdict:
    """Compare the context slope b (step time per 1k context) with the baseline's, judged
    against both slopes' standard errors.

    With z the 95 % t quantile of the run's repeats: fail when b − z·se is past the limit,
    improved when b + z·se is below the lower bound, pass when b + z·se is within the limit.
    Anything else is "undetermined" (never a pass or a fail): the errors are wider than the
    tolerance band (the contexts lie too close together) or straddle the limit; its
    message says which contexts to add, or to take more repeats.
    """
    case_id = f"{text_class}-fit"
    old, new = base.b_ms_per_1k, current.b_ms_per_1k
    if old <= 0:
        return Verdict(case_id, "no-baseline",
                       f"{text_class}: the baseline's step time does not grow with context "
                       f"({old:.1f} ms per 1k), so its slope cannot be compared — write a new "
                       f"version with --update-baselines.")
    change = _change(old, new)
    limit = old * (1.0 + slope_tolerance)
    se_new, se_old = current.b_se_ms_per_1k or 0.0, base.b_se_ms_per_1k or 0.0
    margin = t95(current.dof) * math.hypot(se_new, (1.0 + slope_tolerance) * se_old) \
        if current.b_se_ms_per_token is not None else 0.0
    head = (f"{text_class}: step time per 1k context {_pm(old, base.b_se_ms_per_1k)} {ARROW} "
            f"{_pm(new, current.b_se_ms_per_1k)} ms ({format_percent(change)}, limit "
            f"+{round(100 * slope_tolerance, 1):g}%)")
    details = {"slope": {"base": old, "new": new, "change": change, "limit": slope_tolerance,
                         "base_se": se_old, "new_se": se_new, "margin": margin}}
    if new - margin > limit:
        return Verdict(case_id, "fail", f"{head} — attention scaling regression: step time "
                       f"grows faster with context than in the baseline.", None, details)
    if new + margin < old * (1.0 - slope_tolerance):
        return Verdict(case_id, "improved", f"{head} — flatter than the baseline: "
                       f"{REFRESH_HINT}.", None, details)
    if new + margin <= limit:
        return Verdict(case_id, "pass", f"{head} — within tolerance.", None, details)
    why = _undetermined(text_class, margin, old * slope_tolerance, se_new, se_old, contexts)
    return Verdict(case_id, "undetermined", f"{head}: {why}", None, details)


def _pm(value: float, se: float | None) -> str:
    if se is None:
        return f"{value:.1f}"
    return f"{value:.1f} ± {se:.1f}" if se >= 0.05 else f"{value:.1f} ± {se:.2f}"


def _undetermined(text_class: str, margin: float, band: float, se_new: float, se_old: float,
                  contexts: Sequence[int]) -> str:
    """Why a slope cannot be judged, and the command that would judge it."""
    if math.isinf(margin):
        return (f"one repeat per context gives the slope no error estimate, so it is neither "
                f"a pass nor a fail — measure with repeats: pytest perf_tests -m "
                f"context_scaling --text-classes {text_class} --repeats 3")
    if margin <= band:
        return (f"the slope sits within its uncertainty (±{margin:.1f} ms per 1k) of the "
                f"limit, so it is neither a pass nor a fail — measure again with more repeats: "
                f"pytest perf_tests -m context_scaling --text-classes {text_class} "
                f"--repeats 10")
    if se_old > se_new:
        return (f"the baseline's slope is too uncertain (±{se_old:.1f} ms per 1k) to judge "
                f"against a {band:.1f} ms band, so it is neither a pass nor a fail — write a "
                f"baseline with more repeats over the default contexts: pytest perf_tests -m "
                f"context_scaling --update-baselines --baseline-repeats 10")
    wanted = _wider(contexts, margin / band)
    listed = ",".join(str(c) for c in contexts)
    return (f"contexts {listed} lie too close together to determine the slope (±{margin:.1f} "
            f"ms per 1k against a {band:.1f} ms band), so it is neither a pass nor a fail — "
            f"add a longer context: pytest perf_tests -m context_scaling --text-classes "
            f"{text_class} --contexts {','.join(str(c) for c in wanted)}")


def _wider(contexts: Sequence[int], shrink: float) -> list[int]:
    """The contexts plus one far enough out for the slope's error to fit the band.

    A slope's error falls with the spread of the contexts; aim for twice the needed span
    (errors are themselves estimates), in whole hundreds, between the defaults 1663 and 5553
    (the incident's longest context, which determines a slope at ordinary noise).
    """
    if not contexts:
        return [13, 1663]
    low, high = min(contexts), max(contexts)
    span = max(high - low, 1) * shrink * 2.0
    far = min(5553, max(1663, int(math.ceil((low + span) / 100.0)) * 100))
    return sorted({*contexts, far})


@dataclass(frozen=True)
class Observed:
    """This run's medians at one case, with the relative standard error of their ratio."""

    tok_s: float
    avg_commit: float
    step_ms: float | None = None
    rel_se: float = 0.0
    z: float = 2.0


def observe(values: Mapping[str, Sequence[float]]) -> Observed | None:
    """This run's :class:`Observed` from its repeats' tok_s, avg_commit and step_ms values."""
    tok, commit, step = (values.get(m) or [] for m in ("tok_s", "avg_commit", "step_ms"))
    if not tok or not commit:
        return None
    errors = [rel_se(v) for v in (tok, commit, step) if v]
    n = min(len(v) for v in (tok, commit, step) if v)
    return Observed(statistics.median(tok), statistics.median(commit),
                    statistics.median(step) if step else None,
                    math.sqrt(sum(e * e for e in errors)), t95(n - 1))


def base_rest(base: CaseBaseline | None, output_tokens: int, prefill_ms: float) -> float:
    """The baseline case's own rest (client, transport): 1.0 when it has no step time."""
    if base is None:
        return 1.0
    got = {m: base.metrics[m].median for m in ("tok_s", "avg_commit", "step_ms")
           if m in base.metrics}
    if len(got) < 3 or min(got.values()) <= 0:
        return 1.0
    return rest_ratio(got["tok_s"], got["avg_commit"], got["step_ms"], output_tokens,
                      prefill_ms)


def reconcile(case_id: str, observed: Observed, base_fit: ContextFit, mean_context: float,
              output_tokens: int, tolerance: float, prefill_ms: float = 0.0,
              base_rest: float = 1.0) -> Verdict | None:
    """Predict tok/s from this run's acceptance and the baseline's context curve.

    None when the observation agrees within ``tolerance`` plus its uncertainty (this run's
    errors and the curve's at this context). "explained" when it does not, but this run's
    own step time accounts for it: the model holds, the case's step-time verdict speaks.
    "fail" (slower) or "improved" (faster) only when the model itself does not explain the
    observation: tok/s differs from what this run's acceptance and step time predict, by
    more than the baseline's own rest ``base_rest`` (its client and transport overhead).
    """
    step = base_fit.predict_step_ms(mean_context)
    if step <= 0 or observed.avg_commit <= 0:
        return None
    own = _own_model(case_id, observed, output_tokens, tolerance, prefill_ms, base_rest)
    if own is not None:
        return own
    # This run's own time to first token: prefill is no part of the context curve, and
    # leaving it out would call every short-output run "unexplained".
    predicted = predict_tok_s(observed.avg_commit, step, output_tokens, prefill_ms) * base_rest
    change = _change(predicted, observed.tok_s)
    curve_se = base_fit.predict_se_ms(mean_context) / step
    if abs(change) <= tolerance + observed.z * math.hypot(observed.rel_se, curve_se):
        return None
    head = (f"observed tok/s {observed.tok_s:.1f} vs {predicted:.1f} predicted from this run's "
            f"acceptance ({observed.avg_commit:.2f}) and the baseline's context curve "
            f"({format_percent(change)})")
    details = {"tok_s": {"base": predicted, "new": observed.tok_s, "change": change,
                         "limit": -tolerance}}
    if observed.step_ms is not None:
        return Verdict(case_id, "explained", f"{head}: this run's step time "
                       f"{format_value('step_ms', observed.step_ms)} ms vs "
                       f"{format_value('step_ms', step)} ms on the curve explains it.",
                       None, details)
    if change < 0:
        return Verdict(case_id, "fail", f"{head}: a slowdown neither acceptance nor the context "
                       f"curve explains — look at the server (KV cache fragmentation, other "
                       f"load, clocks).", None, details)
    return Verdict(case_id, "improved", f"{head}: faster than acceptance and the context curve "
                   f"predict — the baseline's fit may be stale; {REFRESH_HINT}.", None, details)


def _own_model(case_id: str, observed: Observed, output_tokens: int, tolerance: float,
               prefill_ms: float, base_rest: float) -> Verdict | None:
    """A "fail"/"improved" verdict when this run's acceptance and step time do not explain
    its tok/s (beyond the baseline's rest and the uncertainty); None when they do."""
    if observed.step_ms is None or observed.step_ms <= 0:
        return None
    predicted = predict_tok_s(observed.avg_commit, observed.step_ms, output_tokens,
                              prefill_ms) * base_rest
    change = _change(predicted, observed.tok_s)
    if abs(change) <= tolerance + observed.z * observed.rel_se:
        return None
    head = (f"observed tok/s {observed.tok_s:.1f} vs {predicted:.1f} predicted from this run's "
            f"acceptance ({observed.avg_commit:.2f}) and step time "
            f"({format_value('step_ms', observed.step_ms)} ms) ({format_percent(change)})")
    details = {"tok_s": {"base": predicted, "new": observed.tok_s, "change": change,
                         "limit": -tolerance}}
    if change < 0:
        return Verdict(case_id, "fail", f"{head}: a slowdown neither acceptance nor step time "
                       f"explains — look at prefill, transport and the client (a proxy, TLS, "
                       f"the network).", None, details)
    return Verdict(case_id, "improved", f"{head}: faster than acceptance and step time predict "
                   f"— less client or transport overhead than the baseline's; {REFRESH_HINT}.",
                   None, details)


# --- adaptive repeats ---------------------------------------------------------------------

# For normal data 1.4826·MAD estimates the standard deviation σ, and the median of n
# samples has standard error ≈ 1.2533·σ/√n (√(π/2): the median's efficiency relative
# to the mean). A median 3 standard errors from its limit would need a 3σ fluke to
# land on the other side (≈0.1% one-sided), so more repeats would not change the verdict.
MAD_TO_SIGMA = 1.4826
MEDIAN_SE_FACTOR = 1.2533
CLEAR_MARGIN_SE = 3.0


@dataclass(frozen=True)
class RepeatDecision:
    """Whether a case needs more repeats: "stop", "more" or "unstable", and why."""

    action: str
    reason: str


def decide_repeats(values: Mapping[str, Sequence[float]], base: CaseBaseline | None,
                   tolerances: Mapping[str, float], *, min_repeats: int,
                   max_repeats: int, confirm_repeats: int | None = None,
                   max_spread: float = UNSTABLE_REL_MAD) -> RepeatDecision:
    """Decide after each repeat whether to stop, take another, or give up as unstable.

    1. Fewer than ``min_repeats`` repeats: more.
    2. Any metric whose relative MAD exceeds ``max_spread`` (default 0.10,
       stats.UNSTABLE_REL_MAD; ``--max-spread``) is too noisy
       to judge: more, or "unstable" once ``max_repeats`` is reached — a noisy cell
       must never pass or fail.
    3. With a baseline: for each metric with a tolerance, the margin is the median's
       relative distance from its regression limit, in units of the baseline median;
       the median's uncertainty is 1.4826·MAD·1.2533/√n in the same units. Any margin
       within 3 uncertainties (the verdict could still flip): more, until ``max_repeats``
       (then stop and judge on what there is). Only this run's spread counts: more
       repeats cannot shrink the baseline's.
    4. A metric past its limit (the case would fail) with fewer than ``confirm_repeats``
       (default: twice ``min_repeats``, within ``max_repeats``): more. Blocking a deploy is
       expensive, and three samples can agree by chance under noise that does not average
       out within a request; the extra repeats are spent only on cells about to fail, and
       give the spread check of rule 2 a fair chance to call them unstable instead.
    5. Otherwise (and always without a baseline once stable): stop.
    """
    n = min((len(v) for v in values.values() if v), default=0)
    if n < min_repeats:
        return RepeatDecision("more", f"{n} of at least {min_repeats} repeats taken.")
    summaries = {m: summarize(v) for m, v in values.items() if v}
    noisy = _noisy(summaries, n, max_repeats, max_spread)
    if noisy is not None:
        return noisy
    if base is None:
        return RepeatDecision("stop", f"no baseline to compare with; {n} stable repeats taken.")
    confirm = min(max_repeats, confirm_repeats or 2 * min_repeats)
    return _near_limit(summaries, base, tolerances, n, max_repeats, confirm)


def _noisy(summaries: Mapping[str, Summary], n: int, max_repeats: int,
           max_spread: float = UNSTABLE_REL_MAD) -> RepeatDecision | None:
    for metric, summary in summaries.items():
        if summary.rel_mad <= max_spread:
            continue
        spread = (f"{LABELS.get(metric, metric)} spreads too widely: relative MAD "
                  f"{summary.rel_mad:.2f} > {max_spread:.2f} after {n} repeats")
        if n < max_repeats:
            return RepeatDecision("more", f"{spread}; taking more.")
        return RepeatDecision("unstable", f"{spread} (the bound): the cell cannot be judged — "
                              f"quiet the server (other load, clocks) or raise the repeat bound.")
    return None


def _near_limit(summaries: Mapping[str, Summary], base: CaseBaseline,
                tolerances: Mapping[str, float], n: int, max_repeats: int,
                confirm: int) -> RepeatDecision:
    for metric, summary in summaries.items():
        reference = base.metrics.get(metric)
        if metric not in DIRECTION or reference is None or not reference.median:
            continue
        margin, uncertainty = _margin(metric, summary, reference.median,
                                      _tolerance(tolerances, metric))
        if margin < 0 and n < confirm:
            return RepeatDecision("more", f"{LABELS.get(metric, metric)} is past its limit "
                                  f"after {n} repeats; confirming with {confirm}.")
        if abs(margin) >= CLEAR_MARGIN_SE * uncertainty:
            continue
        near = (f"{LABELS.get(metric, metric)} sits {abs(margin):.1%} from its limit with "
                f"uncertainty {uncertainty:.1%} after {n} repeats")
        if n < max_repeats:
            return RepeatDecision("more", f"{near}; taking more.")
        return RepeatDecision("stop", f"{near}, at the repeat bound: judging on these.")
    return RepeatDecision("stop", f"verdict clear after {n} repeats: every metric is at least "
                          f"{CLEAR_MARGIN_SE:g} standard errors from its limit.")


def _margin(metric: str, summary: Summary, base_median: float,
            tolerance: float) -> tuple[float, float]:
    """Signed distance of the median from its limit (positive: safe side) and its uncertainty.

    Both are fractions of the baseline median, the unit the tolerance is given in.
    """
    good = DIRECTION[metric] * (summary.median / base_median - 1.0)
    uncertainty = MAD_TO_SIGMA * summary.mad * MEDIAN_SE_FACTOR / math.sqrt(summary.n)
    return good + tolerance, uncertainty / abs(base_median)
