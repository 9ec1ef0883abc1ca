"""A case's verdict: compare its medians with its baseline and say, in one sentence, what moved.

Tolerances are fractions of the baseline median; each metric has a direction
(:data:`DIRECTION`): +1 must not fall, −1 must not rise. Every status is decided by the one
contract (:mod:`specperf.core.contract`): a case's medians are a point estimate, so a metric
regresses when its median moves past ``baseline · (1 ∓ tolerance)`` in its bad direction;
with a noise model each move carries its interval, and the contract judges the interval. A
regression's sentence and its attribution are :mod:`specperf.judge.attribution`'s.

The verdict's value and the context fit's verdict live in :mod:`specperf.core.verdict` and
:mod:`specperf.judge.fit`; they are imported here too, as the public API has always named
them ``specperf.judge.verdict``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from ..core import contract, interval
from ..core.contract import IMPROVED, NOTED, PASS, REGRESSION, UNDETERMINED
from ..core.limits import DIRECTION, FLOOR, LABELS, Move, format_move, format_percent, tolerance
from ..core.noise import NoiseModel
from ..core.stats import Summary
from ..core.verdict import Scope, Verdict
from . import positions
from .attribution import HINTS, case_attribution, regression_factor, regression_message
from .hints import REFRESH_HINT

if TYPE_CHECKING:  # only its type is needed here
    from ..baselines.store import CaseBaseline

__all__ = ["PINNED_METRICS", "PINNED_REASON", "case_se", "judge_case"]


def judge_case(case_id: str, current: Mapping[str, Summary], base: CaseBaseline,
               tolerances: Mapping[str, float], shape: positions.Shape | None = None,
               pinned: bool = False, noise: NoiseModel | None = None,
               base_runs: int = 1, exact: str = "") -> Verdict:
    """Compare one case's medians with its baseline; tolerances are the resolved layers.
    ``shape``: the case's acceptance per draft position and along the output, whose changes
    the verdict then locates (positions.py). ``pinned``: the server's acceptance is
    synthetic (servers/pinned.py), so only what does not depend on it is judged.
    ``noise``: the run-to-run noise of this comparison (core/noise.py; the baseline merged
    from ``base_runs`` runs): each move then carries its interval — both sides' request
    spread and the run term — and the contract judges the interval; None judges the medians
    as point estimates. ``exact``: the status of the prompt-by-prompt comparison of
    acceptance with the baseline's (judge/exact.py) when it settles acceptance ("unchanged"
    or "changed"): the medians of avg commit are shown but judged there, not here — two
    medians over different draws of the same prompts can differ where no prompt changed; the
    per-position shape then only locates a change the comparison found."""
    if pinned:
        return _judge_pinned(case_id, _moves(current, base, tolerances, noise, base_runs))
    if shape is not None:
        verdict = judge_case(case_id, current, base, tolerances, noise=noise,
                             base_runs=base_runs, exact=exact)
        run_sd = 0.0 if noise is None else \
            interval.case_run_sd(noise.of("avg_commit"), base_runs)
        sentences = positions.locate(shape, current, base, tolerances, run_sd)
        if not sentences:
            return verdict
        # A pass whose positions or output stretches moved beyond the tolerance is noted,
        # unless the exact comparison settled acceptance: then they only say where it moved.
        status = contract.combine([verdict.status, NOTED]) \
            if verdict.status == PASS and not exact else verdict.status
        return replace(verdict, status=status, message=" ".join([verdict.message, *sentences]))
    shown = _moves(current, base, tolerances, noise, base_runs)
    moves = {m: mv for m, mv in shown.items() if not (exact and m in EXACT_METRICS)}
    details = {m: mv.detail() if m in moves else _settled(mv) for m, mv in shown.items()}
    if not moves:
        return Verdict(case_id, UNDETERMINED,
                       f"{case_id}: the baseline has no metric this run measured, so "
                       f"nothing can be compared — write a new version with "
                       f"--specperf-update-baselines.",
                       reason=contract.NO_BASELINE, scope=Scope.CASE)
    attribution = case_attribution(shown)
    broken = [m for m in ("tok_s", "decode_tok_s", "avg_commit", "step_ms", "ttft_ms")
              if m in moves and moves[m].regressed]
    heard = _noise_clause(noise, moves)
    status = contract.combine(mv.status for mv in moves.values())
    if status == REGRESSION:
        message = regression_message(shown, broken[0], attribution, base.output_tokens)
        # Decode tok/s is tok/s without prefill: its fall beside tok/s's adds nothing.
        message = _also_beyond(message, [moves[m] for m in broken[1:]
                                         if not (m == "decode_tok_s" and "tok_s" in broken)])
        return Verdict(case_id, REGRESSION, _with_noise(message, heard), attribution, details,
                       factor=regression_factor(shown, broken[0], attribution,
                                                base.output_tokens), scope=Scope.CASE)
    summary = _pass_summary(shown)
    unjudged = _prefill_unjudged(current, moves)
    open_ = [m for m in ("tok_s", "decode_tok_s", "avg_commit", "step_ms", "ttft_ms")
             if m in moves and moves[m].undetermined]
    if status == UNDETERMINED:
        return Verdict(case_id, UNDETERMINED, _undetermined_case(moves, open_, summary, heard),
                       attribution, details, scope=Scope.CASE)
    if status == IMPROVED:
        faster = any(moves[m].improved for m in ("tok_s", "decode_tok_s", "step_ms", "ttft_ms")
                     if m in moves)
        word = "faster" if faster else "better"
        message = f"{summary} — {word} than the baseline: {REFRESH_HINT}{unjudged}."
        return Verdict(case_id, IMPROVED, _with_noise(message, heard), attribution, details,
                       scope=Scope.CASE)
    if status == NOTED:  # a change we are sure of, its median inside the tolerance
        sure = ", ".join(LABELS.get(m, m) for m, mv in moves.items() if mv.status == NOTED)
        message = (f"{summary} — within tolerance; a change we are sure of in {sure}: "
                   f"noted{unjudged}.")
        return Verdict(case_id, NOTED, _with_noise(message, heard), attribution, details,
                       scope=Scope.CASE)
    return Verdict(case_id, PASS, _with_noise(f"{summary} — within tolerance{unjudged}.", heard),
                   attribution, details, scope=Scope.CASE)


def _settled(move: Move) -> dict[str, float]:
    """A settled metric's detail: its medians and their change, without the interval this
    verdict did not judge it by (a view must not read one off it), marked exact."""
    return {"base": move.base, "new": move.new, "change": move.change,
            "limit": -move.direction * move.tolerance, "exact": 1.0}


def _also_beyond(message: str, others: Sequence[Move]) -> str:
    """Every metric beyond its limit is named: those the attribution did not mention."""
    missing = [mv for mv in others
               if f"{mv.label or LABELS.get(mv.metric, mv.metric)} " not in message]
    if not missing:
        return message
    hints = [HINTS[mv.metric] for mv in missing if mv.metric in HINTS
             and HINTS[mv.metric] not in message]
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


# What an exact comparison of acceptance settles (judge/exact.py judges it).
EXACT_METRICS = ("avg_commit",)

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
                       f"--specperf-update-baselines.", reason=contract.NO_BASELINE,
                       scope=Scope.CASE)
    broken = [m for m in PINNED_METRICS if m in moves and moves[m].regressed]
    if broken:
        return Verdict(case_id, REGRESSION, f"{moves[broken[0]].text(limit=True)} — "
                       f"{HINTS[broken[0]]}; {PINNED_REASON}.", None, details,
                       factor=regression_factor(moves, broken[0], None), scope=Scope.CASE)
    summary = "; ".join(moves[m].text(limit=True) for m in moves)
    if any(mv.improved for mv in moves.values()):
        return Verdict(case_id, IMPROVED, f"{summary} — faster than the baseline: "
                       f"{REFRESH_HINT}; {PINNED_REASON}.", None, details, scope=Scope.CASE)
    return Verdict(case_id, PASS, f"{summary} — within tolerance; {PINNED_REASON}.", None,
                   details, scope=Scope.CASE)


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


def case_se(now: Summary, then: Summary, noise: NoiseModel | None, metric: str,
            base_runs: int) -> tuple[float, float]:
    """A case's log change: its standard error and df (core/interval.py); (0, inf) without a
    noise model."""
    return interval.comparison(now, then, None if noise is None else noise.of(metric),
                               base_runs)


def _pass_summary(moves: Mapping[str, Move]) -> str:
    parts = []
    if "tok_s" in moves:
        parts.append(moves["tok_s"].text(limit=True))
    parts += [format_move(m, moves[m].base, moves[m].new)
              for m in ("avg_commit", "step_ms", "ttft_ms") if m in moves]
    return "; ".join(parts)
