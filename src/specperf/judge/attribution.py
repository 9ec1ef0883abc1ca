"""The sentence of a regressed case: which metric moved, and what explains a tok/s drop.

Regressions are attributed with the log identity of :mod:`specperf.core.model`: tok/s = avg
commit / step time, so a tok/s drop splits into an acceptance share, a step-time share and an
unexplained rest; with the baseline's output length, prefill takes its own share of tok/s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from ..core import interval
from ..core.limits import MINUS, Move
from ..core.model import Attribution, attribute
from .hints import ACCEPTANCE_HINT, PREFILL_HINT, STEP_HINT

# Attribution thresholds. A part "explains" a drop when the other part's share is
# below SECONDARY_SHARE (it is then noise-sized next to the main cause); when both
# reach it, both are named with their shares, the smaller only when its own move is sure
# (its interval, which carries the run-to-run noise, lies on the bad side of no change): a
# night's step time moving +3 % beside an 8 % acceptance drop is a quarter of the drop, yet
# the night's noise, and naming it sent a third of such failures to the kernels (issue 47).
# The drop is unexplained when the rest (prefill, transport, client) carries at least half.
SECONDARY_SHARE = 0.25
# How sure the smaller share's own move must be to be named beside the larger: one-sided
# 0.5 % a cell, so the eight cells of a main job name a night's noise in about 4 % of runs.
SURE_LEVEL = 0.99
UNEXPLAINED_SHARE = 0.5

# What to check when this metric alone is past its limit.
HINTS = {"avg_commit": ACCEPTANCE_HINT, "step_ms": STEP_HINT, "ttft_ms": PREFILL_HINT}


def case_attribution(moves: Mapping[str, Move]) -> Attribution | None:
    """A case's tok/s change split into acceptance, step time and the rest (None without all
    three metrics)."""
    if not all(m in moves for m in ("tok_s", "avg_commit", "step_ms")):
        return None
    ratios = [moves[m].new / moves[m].base for m in ("tok_s", "avg_commit", "step_ms")]
    if min(ratios) <= 0:  # a zero median has no logarithm; nothing to split
        return None
    return attribute(*ratios)


def sure_worse(move: Move) -> bool:
    """Whether ``move`` is sure to be on its bad side of no change: its SURE_LEVEL interval
    excludes no change (a point estimate, judged without noise, is taken as it is)."""
    if move.se <= 0 or move.base <= 0 or move.new <= 0:
        return move.good_change < 0
    better = move.direction * math.log(move.new / move.base)
    return better + interval.half_width(move.se, move.df, SURE_LEVEL) < 0


def counted(commit: Move, step: Move, attr: Attribution) -> tuple[bool, bool]:
    """Which of acceptance and step time a split names: a share of SECONDARY_SHARE or more,
    and the larger share or a move sure to be worse."""
    acc, stp = attr.share("acceptance"), attr.share("step")
    return (acc >= SECONDARY_SHARE and (acc >= stp or sure_worse(commit)),
            stp >= SECONDARY_SHARE and (stp > acc or sure_worse(step)))


def regression_message(moves: Mapping[str, Move], first: str,
                       attribution: Attribution | None, output_tokens: int = 0) -> str:
    """The sentence of a case whose ``first`` metric regressed: what moved and what explains it."""
    head = moves[first].text(limit=True)
    if first in HINTS:
        return f"{head}{_while_tok_s(moves)} — {HINTS[first]}."
    ratio_attr = attribution if first == "tok_s" else _decode_attribution(moves)
    if ratio_attr is None or "avg_commit" not in moves or "step_ms" not in moves:
        return (f"{head} — acceptance or step time was not measured, so the drop cannot be "
                f"attributed: check the acceptance source.")
    # Decode tok/s has no prefill in it; tok/s does (one prefill per request).
    prefill = _prefill_share(moves, output_tokens) if first == "tok_s" else None
    if prefill is not None and prefill[1] >= SECONDARY_SHARE:
        return f"{head}: {_prefill_clause(moves, ratio_attr, *prefill)}"
    return f"{head}: {_cause_clause(moves['avg_commit'], moves['step_ms'], ratio_attr)}"


# The factor key (views/headline.py FACTORS) of a metric past its limit on its own.
_METRIC_FACTORS = {"avg_commit": "acceptance", "step_ms": "step", "ttft_ms": "prefill"}


def regression_factor(moves: Mapping[str, Move], first: str,
                      attribution: Attribution | None, output_tokens: int = 0) -> str:
    """The factor :func:`regression_message` names for the same case, as data: "acceptance",
    "step", "acceptance+step", "prefill" or "unexplained" ("" when the drop cannot be
    attributed: acceptance or step time unmeasured). The same thresholds decide both, so a
    record's factor and its sentence never disagree."""
    if first in _METRIC_FACTORS:
        return _METRIC_FACTORS[first]
    ratio_attr = attribution if first == "tok_s" else _decode_attribution(moves)
    if ratio_attr is None or "avg_commit" not in moves or "step_ms" not in moves:
        return ""
    acc, stp = ratio_attr.share("acceptance"), ratio_attr.share("step")
    prefill = _prefill_share(moves, output_tokens) if first == "tok_s" else None
    if prefill is not None and prefill[1] >= SECONDARY_SHARE:
        share = prefill[1]
        if ratio_attr.share("rest") - share >= UNEXPLAINED_SHARE:
            return "unexplained"
        if max(acc, stp) < SECONDARY_SHARE:
            return "prefill"
        scale = min(1.0, (1.0 - share) / (acc + stp)) if acc + stp > 0 else 1.0
        causes = [("acceptance", acc * scale), ("step", stp * scale), ("prefill", share)]
        return max((c for c in causes if c[0] == "prefill" or c[1] >= SECONDARY_SHARE),
                   key=lambda c: c[1])[0]
    if ratio_attr.share("rest") >= UNEXPLAINED_SHARE or max(acc, stp) < SECONDARY_SHARE:
        return "unexplained"
    by_acc, by_step = counted(moves["avg_commit"], moves["step_ms"], ratio_attr)
    if not by_step:
        return "acceptance"
    if not by_acc:
        return "step"
    return "acceptance+step"


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
    by_acc, by_step = counted(commit, step, attr)
    if not by_step:
        return f"{commit.text()} explains it; {step.text(noise=True)} — {ACCEPTANCE_HINT}."
    if not by_acc:
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
