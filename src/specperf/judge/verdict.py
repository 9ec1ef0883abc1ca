"""Verdicts: compare a case with its baseline and say, in one sentence, what moved and why.

A :class:`Verdict` is a small value whose :meth:`Verdict.fails` returns the sentence
a person acts on (or None). Regressions are attributed with the log identity of
:mod:`specperf.core.model`: tok/s = avg commit / step time, so a tok/s drop splits into
an acceptance share, a step-time share and an unexplained rest.

Tolerances are fractions of the baseline median; each metric has a direction
(:data:`DIRECTION`): +1 must not fall, −1 must not rise. Every status is decided by the one
contract (:mod:`specperf.core.contract`): a case's medians are a point estimate, so a metric
regresses when its median moves past ``baseline · (1 ∓ tolerance)`` in its bad direction; a
context slope carries its interval, so it is a regression only when the whole interval is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..core import contract
from ..core.contract import IMPROVED, NOTED, PASS, REGRESSION, UNDETERMINED
from ..core.limits import (
    ARROW,
    DIRECTION,
    FLOOR,
    LABELS,
    MINUS,
    Move,
    format_move,
    format_percent,
    tolerance,
)
from ..core.model import Attribution, ContextFit, attribute, t95
from ..core.noise import NoiseModel
from ..core.stats import MAD_TO_SIGMA, MEDIAN_SE_FACTOR, Summary
from . import positions

if TYPE_CHECKING:  # baseline imports this module's tables, so only a type-time import here
    from ..baselines.store import CaseBaseline

# Attribution thresholds. A part "explains" a drop when the other part's share is
# below SECONDARY_SHARE (it is then noise-sized next to the main cause); when both
# reach it, both are named with their shares. The drop is unexplained when the rest
# (prefill, transport, client) carries at least half of it.
SECONDARY_SHARE = 0.25
UNEXPLAINED_SHARE = 0.5

ACCEPTANCE_HINT = "acceptance regression: check the drafter and the text"
STEP_HINT = "step-time regression: check the kernels, attention backend and KV cache"
PREFILL_HINT = ("prefill regression: check prompt processing (the batch size, e.g. llama.cpp "
                "-ub; chunked prefill; the prefix and attention kernels)")
REFRESH_HINT = "refresh it with --specperf-update-baselines if this is intended"

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
    # Why the status was given, where the word alone would mislead (contract.REASONS).
    reason: str = ""
    # The case's predict-and-reconcile row (judge/reconcile.py Reconciled.to_dict()).
    reconcile: dict[str, Any] | None = None

    def fails(self) -> str | None:
        """The sentence to fail the case with, or None when it did not regress."""
        return self.message if self.status == REGRESSION else None


@dataclass(frozen=True)
class NotJudged:
    """Why a case, slope or sweep has no verdict (no baseline entry, an undetermined slope):
    its test skips with ``reason``, never passes or fails."""

    reason: str


def _change(base: float, new: float) -> float:
    return new / base - 1.0 if base else 0.0


# --- case verdicts --------------------------------------------------------------------


def judge_case(case_id: str, current: Mapping[str, Summary], base: CaseBaseline,
               tolerances: Mapping[str, float], shape: positions.Shape | None = None,
               pinned: bool = False, noise: NoiseModel | None = None,
               base_runs: int = 1) -> Verdict:
    """Compare one case's medians with its baseline; tolerances are the resolved layers.
    ``shape``: the case's acceptance per draft position and along the output, whose changes
    the verdict then locates (positions.py). ``pinned``: the server's acceptance is
    synthetic (servers/pinned.py), so only what does not depend on it is judged.
    ``noise``: the run-to-run noise of this comparison (core/noise.py; the baseline merged
    from ``base_runs`` runs): each move then carries its interval — both sides' request
    spread and the run term — and the contract judges the interval; None judges the medians
    as point estimates."""
    if pinned:
        return _judge_pinned(case_id, _moves(current, base, tolerances, noise, base_runs))
    if shape is not None:
        verdict = judge_case(case_id, current, base, tolerances, noise=noise,
                             base_runs=base_runs)
        run_sd = 0.0 if noise is None else \
            noise.of("avg_commit").case_sd() * math.sqrt(1.0 + 1.0 / max(base_runs, 1))
        sentences = positions.locate(shape, current, base, tolerances, run_sd)
        if not sentences:
            return verdict
        # A pass whose positions or output stretches moved beyond the tolerance is noted.
        status = contract.combine([verdict.status, NOTED]) if verdict.status == PASS \
            else verdict.status
        return replace(verdict, status=status, message=" ".join([verdict.message, *sentences]))
    moves = _moves(current, base, tolerances, noise, base_runs)
    details = {m: mv.detail() for m, mv in moves.items()}
    if not moves:
        return Verdict(case_id, UNDETERMINED,
                       f"{case_id}: the baseline has no metric this run measured, so "
                       f"nothing can be compared — write a new version with "
                       f"--specperf-update-baselines.",
                       reason=contract.NO_BASELINE)
    attribution = _attribution(moves)
    broken = [m for m in ("tok_s", "decode_tok_s", "avg_commit", "step_ms", "ttft_ms")
              if m in moves and moves[m].regressed]
    heard = _noise_clause(noise, moves)
    status = contract.combine(mv.status for mv in moves.values())
    if status == REGRESSION:
        message = _regression_message(moves, broken[0], attribution, base.output_tokens)
        # Decode tok/s is tok/s without prefill: its fall beside tok/s's adds nothing.
        message = _also_beyond(message, [moves[m] for m in broken[1:]
                                         if not (m == "decode_tok_s" and "tok_s" in broken)])
        return Verdict(case_id, REGRESSION, _with_noise(message, heard), attribution, details)
    summary = _pass_summary(moves)
    unjudged = _prefill_unjudged(current, moves)
    open_ = [m for m in ("tok_s", "decode_tok_s", "avg_commit", "step_ms", "ttft_ms")
             if m in moves and moves[m].undetermined]
    if status == UNDETERMINED:
        return Verdict(case_id, UNDETERMINED, _undetermined_case(moves, open_, summary, heard),
                       attribution, details)
    if status == IMPROVED:
        faster = any(moves[m].improved for m in ("tok_s", "decode_tok_s", "step_ms", "ttft_ms")
                     if m in moves)
        word = "faster" if faster else "better"
        message = f"{summary} — {word} than the baseline: {REFRESH_HINT}{unjudged}."
        return Verdict(case_id, IMPROVED, _with_noise(message, heard), attribution, details)
    if status == NOTED:  # a change we are sure of, its median inside the tolerance
        sure = ", ".join(LABELS.get(m, m) for m, mv in moves.items() if mv.status == NOTED)
        message = (f"{summary} — within tolerance; a change we are sure of in {sure}: "
                   f"noted{unjudged}.")
        return Verdict(case_id, NOTED, _with_noise(message, heard), attribution, details)
    return Verdict(case_id, PASS, _with_noise(f"{summary} — within tolerance{unjudged}.", heard),
                   attribution, details)


def _also_beyond(message: str, others: Sequence[Move]) -> str:
    """Every metric beyond its limit is named: those the attribution did not mention."""
    missing = [mv for mv in others
               if f"{mv.label or LABELS.get(mv.metric, mv.metric)} " not in message]
    if not missing:
        return message
    hints = [_HINTS[mv.metric] for mv in missing if mv.metric in _HINTS
             and _HINTS[mv.metric] not in message]
    also = "; ".join(mv.text(limit=True) for mv in missing)
    return f"{message[:-1]}; also beyond its limit: {also}" + \
        (f" — {'; '.join(hints)}." if hints else ".")


def _noise_clause(noise: NoiseModel | None, moves: Mapping[str, Move]) -> str:
    """Which run-to-run noise the intervals carry (one clause: the first judged metric's)."""
    if noise is None:
        return ""
    metric = next((m for m in ("tok_s", "step_ms", "avg_commit", "ttft_ms") if m in moves), "")
    return noise.of(metric).text() if metric else ""


def _with_noise(message: str, heard: str) -> str:
    return f"{message[:-1]} ({heard})." if heard and message.endswith(".") else message


def _undetermined_case(moves: Mapping[str, Move], open_: Sequence[str], summary: str,
                       heard: str) -> str:
    """A case whose interval straddles a limit: what straddles, and what would decide."""
    parts = []
    for m in open_:
        bounds = moves[m].interval()
        assert bounds is not None  # a point estimate is never undetermined
        parts.append(f"{moves[m].text(limit=True)} has a 95% interval of "
                     f"{format_percent(bounds[0])} to {format_percent(bounds[1])}")
    night = "" if not heard or heard.startswith("same-night") else \
        ("; the run-to-run noise dominates it: judge a deploy against a same-night reference "
         "(specperf gate --save-reference DIR before it, --reference DIR after it), or let "
         "nightly runs build the history")
    return (f"{summary} — {'; '.join(parts)}, which straddles the limit ({heard}): neither a pass "
            f"nor a fail — measure again with more repeats (--specperf-repeats){night}.")


PINNED_REASON = ("acceptance not judged: it is pinned (synthetic) on the server, so avg commit, "
                 "tok/s and decode tok/s say nothing about the deployment")
# What pinned acceptance leaves to judge: one verify pass, and prefill.
PINNED_METRICS = ("step_ms", "ttft_ms")


def _judge_pinned(case_id: str, all_moves: Mapping[str, Move]) -> Verdict:
    """A case on a server with pinned acceptance: step time and prefill only."""
    moves = {m: all_moves[m] for m in PINNED_METRICS if m in all_moves}
    details = {m: mv.detail() for m, mv in moves.items()}
    if not moves:
        return Verdict(case_id, UNDETERMINED, f"{case_id}: the baseline has no step time to "
                       f"compare and {PINNED_REASON} — write a new version with "
                       f"--specperf-update-baselines.", reason=contract.NO_BASELINE)
    broken = [m for m in PINNED_METRICS if m in moves and moves[m].regressed]
    if broken:
        return Verdict(case_id, REGRESSION, f"{moves[broken[0]].text(limit=True)} — "
                       f"{_HINTS[broken[0]]}; {PINNED_REASON}.", None, details)
    summary = "; ".join(moves[m].text(limit=True) for m in moves)
    if any(mv.improved for mv in moves.values()):
        return Verdict(case_id, IMPROVED, f"{summary} — faster than the baseline: "
                       f"{REFRESH_HINT}; {PINNED_REASON}.", None, details)
    return Verdict(case_id, PASS, f"{summary} — within tolerance; {PINNED_REASON}.", None,
                   details)


def _prefill_unjudged(current: Mapping[str, Summary], moves: Mapping[str, Move]) -> str:
    """The note for a run that measured prefill against a baseline written without it."""
    if "ttft_ms" not in current or "ttft_ms" in moves:
        return ""
    return ("; prefill (TTFT) not judged: not in the baseline — write a new version with "
            "--specperf-update-baselines to judge it")


def _moves(current: Mapping[str, Summary], base: CaseBaseline,
           tolerances: Mapping[str, float], noise: NoiseModel | None = None,
           base_runs: int = 1) -> dict[str, Move]:
    out = {}
    for m in DIRECTION:
        if m not in current or m not in base.metrics or not base.metrics[m].median:
            continue
        se, df = case_se(current[m], base.metrics[m], noise, m, base_runs)
        out[m] = Move(m, base.metrics[m].median, current[m].median, tolerance(tolerances, m),
                      floor=FLOOR.get(m, 0.0), se=se, df=df)
    return out


# Below this a request spread is clock resolution or commit quantisation, not a quiet box.
REQUEST_SD_FLOOR = 0.005


def _median_var(summary: Summary) -> tuple[float, float]:
    """The relative variance of a median of ``n`` requests (from their MAD) and its df."""
    sd = max(MAD_TO_SIGMA * summary.mad / summary.median, REQUEST_SD_FLOOR) \
        if summary.median > 0 else REQUEST_SD_FLOOR
    n = max(int(summary.n), 1)
    return MEDIAN_SE_FACTOR**2 * sd * sd / n, float(max(n - 1, 1))


def case_se(now: Summary, then: Summary, noise: NoiseModel | None, metric: str,
             base_runs: int) -> tuple[float, float]:
    """A case's log change: its standard error (both medians' request spread and the run
    term) and its df (Welch–Satterthwaite); (0, inf) without a noise model."""
    if noise is None:
        return 0.0, math.inf
    run = noise.of(metric)
    parts = [_median_var(now), _median_var(then),
             (run.case_sd() ** 2 * (1.0 + 1.0 / max(base_runs, 1)), run.df)]
    total = sum(v for v, _ in parts)
    denom = sum(v * v / df for v, df in parts if v > 0 and math.isfinite(df))
    return math.sqrt(total), (total * total / denom if denom > 0 else math.inf)


def _attribution(moves: Mapping[str, Move]) -> Attribution | None:
    if not all(m in moves for m in ("tok_s", "avg_commit", "step_ms")):
        return None
    ratios = [moves[m].new / moves[m].base for m in ("tok_s", "avg_commit", "step_ms")]
    if min(ratios) <= 0:  # a zero median has no logarithm; nothing to split
        return None
    return attribute(*ratios)


def _pass_summary(moves: Mapping[str, Move]) -> str:
    parts = []
    if "tok_s" in moves:
        parts.append(moves["tok_s"].text(limit=True))
    parts += [format_move(m, moves[m].base, moves[m].new)
              for m in ("avg_commit", "step_ms", "ttft_ms") if m in moves]
    return "; ".join(parts)


_HINTS = {"avg_commit": ACCEPTANCE_HINT, "step_ms": STEP_HINT, "ttft_ms": PREFILL_HINT}


def _regression_message(moves: Mapping[str, Move], first: str,
                        attribution: Attribution | None, output_tokens: int = 0) -> str:
    head = moves[first].text(limit=True)
    if first in _HINTS:
        return f"{head}{_while_tok_s(moves)} — {_HINTS[first]}."
    ratio_attr = attribution if first == "tok_s" else _decode_attribution(moves)
    if ratio_attr is None or "avg_commit" not in moves or "step_ms" not in moves:
        return (f"{head} — acceptance or step time was not measured, so the drop cannot be "
                f"attributed: check the acceptance source.")
    # Decode tok/s has no prefill in it; tok/s does (one prefill per request).
    prefill = _prefill_share(moves, output_tokens) if first == "tok_s" else None
    if prefill is not None and prefill[1] >= SECONDARY_SHARE:
        return f"{head}: {_prefill_clause(moves, ratio_attr, *prefill)}"
    return f"{head}: {_cause_clause(moves['avg_commit'], moves['step_ms'], ratio_attr)}"


def _prefill_share(moves: Mapping[str, Move], output_tokens: int) -> tuple[Move, float] | None:
    """The prefill move and its share of the tok/s change: the log change that prefill's
    extra milliseconds alone make to the baseline's request time N / tok/s."""
    prefill, tok = moves.get("ttft_ms"), moves["tok_s"]
    if prefill is None or output_tokens <= 0 or tok.base <= 0 or tok.new <= 0:
        return None
    total = math.log(tok.new / tok.base)
    wall_ms = 1000.0 * output_tokens / tok.base
    extra = prefill.new - prefill.base
    if total == 0 or wall_ms + extra <= 0:
        return None
    return prefill, -math.log1p(extra / wall_ms) / total


def _prefill_clause(moves: Mapping[str, Move], attr: Attribution, prefill: Move,
                    share: float) -> str:
    """What explains a tok/s drop that prefill carries at least a secondary share of."""
    commit, step = moves["avg_commit"], moves["step_ms"]
    acc, stp = attr.share("acceptance"), attr.share("step")
    rest = attr.share("rest") - share
    if rest >= UNEXPLAINED_SHARE:
        return (f"{commit.text(noise=True)}; {step.text(noise=True)}; {prefill.text()} "
                f"explains {share:.0%} — the rest is neither acceptance, step time nor "
                f"prefill (transport or client overhead?).")
    if max(acc, stp) < SECONDARY_SHARE:
        return (f"{prefill.text()} explains it; {commit.text(noise=True)}; "
                f"{step.text(noise=True)} — {PREFILL_HINT}.")
    # Acceptance and step time act on the decode part only; their log shares assume the
    # whole request decodes, so scale them into what prefill leaves.
    scale = min(1.0, (1.0 - share) / (acc + stp)) if acc + stp > 0 else 1.0
    named = [(n, m, s * scale) for n, m, s in (("acceptance", commit, acc),
                                                ("step time", step, stp))
             if s >= SECONDARY_SHARE]
    moved = ", ".join(m.text() for _, m, _ in named)
    shares = ", ".join(f"{n} {s:.0%}" for n, _, s in named)
    # The largest share is the diagnosis; the others are what to check next.
    causes = sorted([(n, s) for n, _, s in named] + [("prefill", share)], key=lambda c: -c[1])
    then = " and ".join(_CHECKS[n] for n, _ in causes[1:])
    return (f"{moved} and {prefill.text()} moved together ({shares}, prefill {share:.0%} of "
            f"the drop) — {_CAUSE_HINTS[causes[0][0]]}; then check {then}.")


_CAUSE_HINTS = {"acceptance": ACCEPTANCE_HINT, "step time": STEP_HINT, "prefill": PREFILL_HINT}
_CHECKS = {n: hint.split(": check ", 1)[1] for n, hint in _CAUSE_HINTS.items()}


def _while_tok_s(moves: Mapping[str, Move]) -> str:
    if "tok_s" not in moves:
        return ""
    if moves["tok_s"].undetermined:  # its interval straddles the limit: not "within" it
        return (f" while {moves['tok_s'].text(limit=True)} is undetermined (its interval "
                f"straddles the limit)")
    return f" while {moves['tok_s'].text()} stayed within its limit"


def _decode_attribution(moves: Mapping[str, Move]) -> Attribution | None:
    """Decode tok/s splits like tok/s, without prefill (so its rest is ~0)."""
    if not all(m in moves for m in ("decode_tok_s", "avg_commit", "step_ms")):
        return None
    ratios = [moves[m].new / moves[m].base for m in ("decode_tok_s", "avg_commit", "step_ms")]
    return attribute(*ratios) if min(ratios) > 0 else None


def _cause_clause(commit: Move, step: Move, attr: Attribution) -> str:
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
            f"{acc:.0%}, step time {stp:.0%}{_rest_clause(attr)} — acceptance and step-time "
            f"regression: check the drafter and the text, then the kernels, attention backend "
            f"and KV cache.")


def _rest_clause(attr: Attribution) -> str:
    """The rest of a split whose two shares do not add up to the whole: prefill and client
    time, which dilute a decode slowdown (a negative share) or add to it."""
    rest = attr.share("rest")
    if abs(rest) < 0.05:
        return ""
    why = "unchanged, they soften the drop" if rest < 0 else "they add to the drop"
    return f", prefill and client time {round(100 * rest):d}% ({why})".replace("-", MINUS)


# --- context fit and prediction -------------------------------------------------------------


def judge_fit(text_class: str, current: ContextFit, base: ContextFit,
              slope_tolerance: float, contexts: Sequence[int] = (),
              step_tolerance: float | None = None, far: float = 0.0,
              noise: NoiseModel | None = None, base_runs: int = 1) -> Verdict:
    """Compare the context slope b (step time per 1k context) with the baseline's, judged
    against both slopes' standard errors and, with ``noise``, the run-to-run noise: a night
    that slows every step by a factor scales the slope by it too (the part common to the
    cases; each case's own part is in the fits' residuals already).

    With z the 95 % t quantile of the run's repeats, the interval b ± z·se is judged by the
    contract (:func:`specperf.core.contract.status`): fail when b − z·se is past the limit,
    improved when b + z·se is below the lower bound, pass when b + z·se is within the limit
    (noted when the interval also excludes the baseline's slope). Anything else is
    "undetermined" (never a pass or a fail): the errors are wider than the tolerance band (the
    contexts lie too close together) or straddle the limit; its message says which contexts
    to add, or to take more repeats.

    The limit is ``slope_tolerance``, or what moves the baseline's step time at the farthest
    context measured (``far``, in the fit's tokens) by ``step_tolerance`` when that is wider
    (:func:`specperf.core.contract.slope_limit`): a nearly flat slope is not judged by a hair.
    """
    case_id = f"{text_class}-fit"
    old, new = base.b_ms_per_1k, current.b_ms_per_1k
    if old <= 0:
        return Verdict(case_id, UNDETERMINED,
                       f"{text_class}: the baseline's step time does not grow with context "
                       f"({old:.1f} ms per 1k), so its slope cannot be compared — write a new "
                       f"version with --specperf-update-baselines.", reason=contract.NO_BASELINE)
    change = _change(old, new)
    limit = contract.slope_limit(slope_tolerance, base.b_ms_per_token,
                                 base.predict_step_ms(far), far, step_tolerance)
    se_new, se_old = current.b_se_ms_per_1k or 0.0, base.b_se_ms_per_1k or 0.0
    run_sd = 0.0 if noise is None else \
        noise.of("step_ms").parts(base_runs)[0] ** 0.5 * old
    margin = t95(current.dof) * math.hypot(se_new, (1.0 + limit) * se_old, run_sd) \
        if current.b_se_ms_per_token is not None else 0.0
    head = (f"{text_class}: step time per 1k context {_pm(old, base.b_se_ms_per_1k)} {ARROW} "
            f"{_pm(new, current.b_se_ms_per_1k)} ms ({format_percent(change)}, limit "
            f"{slope_limit_text(limit, slope_tolerance, step_tolerance, f'context {far:.0f}')})")
    details = {"slope": {"base": old, "new": new, "change": change, "limit": limit,
                         "base_se": se_old, "new_se": se_new, "margin": margin,
                         "run_sd": run_sd}}
    found = contract.status(_slope_change(old, new, margin, current), -1, limit)
    if noise is not None:
        head = f"{head[:-1]}; {noise.of('step_ms').text()})"
    if found == REGRESSION:
        return Verdict(case_id, REGRESSION, f"{head} — attention scaling regression: step time "
                       f"grows faster with context than in the baseline.", None, details)
    if found == IMPROVED:
        return Verdict(case_id, IMPROVED, f"{head} — flatter than the baseline: "
                       f"{REFRESH_HINT}.", None, details)
    if found == NOTED:
        return Verdict(case_id, NOTED, f"{head} — a change beyond its uncertainty but within "
                       f"tolerance: noted.", None, details)
    if found == PASS:
        return Verdict(case_id, PASS, f"{head} — within tolerance.", None, details)
    why = _undetermined(text_class, margin, old * limit, se_new, se_old, contexts)
    return Verdict(case_id, UNDETERMINED, f"{head}: {why}", None, details)


def slope_limit_text(limit: float, slope_tolerance: float, step_tolerance: float | None,
                where: str) -> str:
    """The slope's limit as the sentence shows it, saying why when the step tolerance set it."""
    text = f"+{round(100 * limit, 1):g}%"
    if limit > slope_tolerance and step_tolerance is not None:
        text += (f": the step-time tolerance {round(100 * step_tolerance, 1):g}% at {where}, "
                 f"wider than the slope's {round(100 * slope_tolerance, 1):g}%")
    return text


def _slope_change(old: float, new: float, margin: float, current: ContextFit) -> contract.Change:
    """The slope's relative change with its interval; a point when the fit states no error."""
    if current.b_se_ms_per_token is None:
        return contract.Change(_change(old, new))
    return contract.Change(_change(old, new), (new - margin) / old - 1.0,
                           (new + margin) / old - 1.0)


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
                f"context_scaling --specperf-text-classes {text_class} --specperf-repeats 3")
    if margin <= band:
        return (f"the slope sits within its uncertainty (±{margin:.1f} ms per 1k) of the "
                f"limit, so it is neither a pass nor a fail — measure again with more repeats: "
                f"pytest perf_tests -m context_scaling --specperf-text-classes {text_class} "
                f"--specperf-repeats 10")
    if se_old > se_new:
        return (f"the baseline's slope is too uncertain (±{se_old:.1f} ms per 1k) to judge "
                f"against a {band:.1f} ms band, so it is neither a pass nor a fail — write a "
                f"baseline with more repeats over the default contexts: pytest perf_tests -m "
                f"context_scaling --specperf-update-baselines --specperf-baseline-repeats 20")
    wanted = _wider(contexts, margin / band)
    listed = ",".join(str(c) for c in contexts)
    return (f"contexts {listed} lie too close together to determine the slope (±{margin:.1f} "
            f"ms per 1k against a {band:.1f} ms band), so it is neither a pass nor a fail — "
            f"add a longer context: pytest perf_tests -m context_scaling --specperf-text-classes "
            f"{text_class} --specperf-contexts {','.join(str(c) for c in wanted)}")


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

