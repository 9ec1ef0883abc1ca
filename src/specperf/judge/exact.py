"""Exact acceptance: the same prompt, the same verify steps, or a named change.

At temperature 0 a speculative server commits the target's greedy tokens, in verify steps
decided by the drafter; for the same prompt both repeat exactly on a deterministic server.
When a run sends the baseline's prompts (:mod:`specperf.plan.reuse`) and the server repeated
itself in this run (the warm-up re-sent repeat 0's prompt: :func:`deterministic`), each
prompt's verify steps are compared with the baseline's, exactly: no repeats, no noise. A server
that does not repeat itself falls back to statistics and says so. Where the run did not check
(a warm-up shorter than the case, ``--specperf-warmup-output-tokens``), the same steps on every
prompt still settle acceptance (they are what was measured), and a change goes to statistics.

The comparison is evidence, not yet a verdict: it says with certainty whether and where
acceptance changed. Whether that is a regression is the verdict contract's
(:mod:`specperf.core.contract`) on the change of the case's avg commit over the compared
prompts, against the acceptance tolerance: beyond it a regression, inside it **noted** (the
run passes; numerics alone move greedy paths on real engines). The setting
``acceptance_mode = identical`` (a deploy that must not touch decoding, e.g. a parser) fails
on any changed prompt instead.

A change is attributed by the output: the same output text in more or fewer steps is the
**drafter** (greedy verification is lossless, so only the proposals changed); a different
output is the **numerics** (kernels, precision, the target model), and acceptance moved
with the text. Step time stays statistical (:mod:`specperf.judge.verdict`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import TYPE_CHECKING, Any

from ..core import contract
from ..core.limits import ARROW, DEFAULT_TOLERANCES, format_percent, format_share
from ..core.verdict import Verdict
from ..measure.determinism import (
    EXACT_SOURCES,
    PromptRecord,
    determinism_detail,
    deterministic,
    records,
)

if TYPE_CHECKING:
    from ..measure.sample import Measurement, Sample

SHOWN_CHANGES = 4
DRAFTER = ("the output text is the same, so the drafter proposes differently — check the "
           "draft model and its settings")
NUMERICS = ("the output text changed on {n} of them, so the target's greedy output moved — "
            "numerics (kernels, precision, attention backend) or the target model; "
            "acceptance moved with the text")


class ExactStatus(str, Enum):
    """What the exact comparison of a case found, as results.json's ``exact.status`` stores
    it: a type mypy checks, like the contract's :class:`~specperf.core.contract.Status`."""

    def __str__(self) -> str:
        return str(self.value)

    UNCHANGED = "unchanged"  # every compared prompt took the baseline's verify steps
    CHANGED = "changed"  # some prompts' verify steps differ: named, with the cause
    UNAVAILABLE = "unavailable"  # no exact comparison: acceptance judged by statistics


@dataclass(frozen=True)
class ExactResult:
    """The exact comparison of one case."""

    status: ExactStatus
    message: str
    compared: int = 0
    changes: tuple[tuple[int, int, int, bool], ...] = ()  # (k, base, new, same output)
    cause: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    commit_change: float = 0.0  # the avg commit's relative change over the compared prompts

    @property
    def settles(self) -> bool:
        """Whether the comparison settles acceptance: it compared prompts, changed or not."""
        return self.status in (ExactStatus.UNCHANGED, ExactStatus.CHANGED)

    @property
    def steps_delta(self) -> int:
        """Verify steps added over the changed prompts (positive: acceptance fell)."""
        return sum(new - base for _, base, new, _ in self.changes)

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "message": self.message, "compared": self.compared,
                "changed": len(self.changes), "cause": self.cause,
                "steps_delta": self.steps_delta, "commit_change": self.commit_change,
                "changes": [{"prompt": k, "base_steps": b, "steps": n, "same_output": same}
                            for k, b, n, same in self.changes], **self.extra}


def unavailable(reason: str) -> ExactResult:
    return ExactResult(ExactStatus.UNAVAILABLE, f"exact acceptance unavailable: {reason}; "
                       f"acceptance is judged by statistics.")


def compare(measured: Measurement, base: Mapping[int, PromptRecord],
            base_deterministic: bool | None, plan_reason: str) -> ExactResult:
    """Compare a case's per-prompt verify steps with its baseline's, exactly."""
    samples = measured.samples
    mine = records(samples)
    if not mine:
        return unavailable(_why_no_records(samples, plan_reason))
    if not base:
        return unavailable("the baseline records no per-prompt verify steps for this case "
                           "(written before exact acceptance, or with random nonces): write a "
                           "new version with --specperf-update-baselines")
    if base_deterministic is False:
        return unavailable("the server was not deterministic when the baseline was written")
    shown = deterministic(samples)
    if shown is False:
        return unavailable(f"the server is not shown deterministic here: "
                           f"{determinism_detail(samples)}")
    same = sorted(k for k in mine if k in base and base[k].prompt == mine[k].prompt)
    if not same:
        return unavailable("this run's prompts differ from the baseline's although their "
                           "nonces match (the tokenizer or the prompt text changed)")
    changes = tuple((k, base[k].steps, mine[k].steps, base[k].output == mine[k].output)
                    for k in same if base[k].steps != mine[k].steps)
    if changes and shown is None:
        # Unchecked determinism: the same steps on every prompt still settle acceptance (they
        # are what was measured), but a change could be the server's own variation.
        return unavailable(f"the verify steps changed on {len(changes)} of {len(same)} prompts "
                           f"and the server is not shown deterministic here: "
                           f"{determinism_detail(samples)}")
    if not changes:
        return ExactResult(ExactStatus.UNCHANGED, f"exact acceptance: identical verify steps on "
                           f"{len(same)} of {len(same)} prompts.", len(same))
    return _changed(same, changes, base, mine)


def _why_no_records(samples: Sequence[Sample], plan_reason: str) -> str:
    if any(s.acceptance_source not in EXACT_SOURCES for s in samples):
        return "the acceptance source gives no exact per-request step count"
    if not any(s.raw.get("reproducible") for s in samples):
        return plan_reason
    return "no measured prompt was sent reproducibly (the prefix-cache flush was refused)"


def _changed(same: Sequence[int], changes: tuple[tuple[int, int, int, bool], ...],
             base: Mapping[int, PromptRecord], mine: Mapping[int, PromptRecord]
             ) -> ExactResult:
    shown = ", ".join(f"{b} {ARROW} {n} on prompt {k + 1}"
                      for k, b, n, _ in changes[:SHOWN_CHANGES])
    more = " …" if len(changes) > SHOWN_CHANGES else ""
    moved_text = sum(1 for *_, same_output in changes if not same_output)
    cause = "numerics" if moved_text else "drafter"
    why = NUMERICS.format(n=moved_text) if moved_text else DRAFTER
    total = (sum(base[k].steps for k in same), sum(mine[k].steps for k in same))
    message = (f"acceptance changed on {len(changes)} of {len(same)} prompts (verify steps "
               f"{shown}{more}; {total[0]} {ARROW} {total[1]} in all): {why}.")
    # Every prompt has the same output length, so avg commit (N − 1)/S moves as 1/ΣS.
    commit_change = total[0] / total[1] - 1.0 if total[1] else 0.0
    return ExactResult(ExactStatus.CHANGED, message, len(same), changes, cause,
                       commit_change=commit_change)


def combine(verdict: Verdict, result: ExactResult, mode: str = "tolerance",
            tolerance: float | None = None) -> Verdict:
    """The case verdict with the exact acceptance result, judged by the contract: the avg
    commit's exact change beyond the acceptance tolerance (``tolerance``, default the one the
    case verdict used) is a regression, inside it noted; in ``mode`` "identical" any changed
    prompt fails. Step time keeps its statistical judgement (the statistical sentence
    follows)."""
    combined = replace(verdict, exact=result.to_dict())
    if result.status != ExactStatus.CHANGED:
        return combined
    if mode == "identical":
        return replace(combined, status=contract.REGRESSION, factor=_with_acceptance(verdict),
                       message=(
            f"{result.message} In acceptance_mode = identical any changed prompt fails: this "
            f"deploy must not touch decoding. Statistics: {verdict.message}"))
    limit = _acceptance_tolerance(verdict) if tolerance is None else tolerance
    found = contract.status(contract.Change.exact(result.commit_change), +1, limit)
    move = (f"avg commit {format_percent(result.commit_change)} on these prompts, "
            f"{'beyond' if found in (contract.REGRESSION, contract.IMPROVED) else 'inside'} "
            f"the {format_share(limit)} acceptance tolerance")
    if found == contract.REGRESSION:
        judged = (f"{move} \u2014 acceptance regression (drafter or numerics: here the "
                  f"{result.cause}).")
    elif found == contract.IMPROVED:
        judged = f"{move} \u2014 better than the baseline."
    elif verdict.status == contract.REGRESSION:  # the statistics name the regression
        judged = f"{move}: noted; acceptance is not what regressed."
    else:
        judged = f"{move}: noted, not a regression."
    message = f"{result.message} {judged[0].upper()}{judged[1:]} Statistics: {verdict.message}"
    # Prompts whose verify steps changed are a change we are sure of, even where the totals
    # cancel (the avg commit's change is then 0): noted at least.
    exact_status = contract.NOTED if found == contract.PASS else found
    factor = _with_acceptance(verdict) if found == contract.REGRESSION else verdict.factor
    return replace(combined, status=contract.combine([verdict.status, exact_status]),
                   message=message, factor=factor)


def _with_acceptance(verdict: Verdict) -> str:
    """The factor of a case whose exact comparison regressed: acceptance, and step time too
    when the statistics named it."""
    both = verdict.status == contract.REGRESSION and verdict.factor in ("step",
                                                                        "acceptance+step")
    return "acceptance+step" if both else "acceptance"


def _acceptance_tolerance(verdict: Verdict) -> float:
    """The avg commit tolerance the case verdict was judged with (its detail's limit)."""
    limit = verdict.details.get("avg_commit", {}).get("limit")
    return abs(limit) if limit else DEFAULT_TOLERANCES["avg_commit"]


def summary_lines(verdicts: Sequence[Mapping[str, Any]]) -> list[str]:
    """The terminal's two-part acceptance/step-time line and what was not exact, and why."""
    found = [(v["case_id"], v["exact"]) for v in verdicts if v.get("exact")]
    if not found:
        return []
    counts = {s: sum(1 for _, e in found if e["status"] == s)
              for s in ("unchanged", "changed", "unavailable")}
    prompts = sum(int(e.get("compared", 0)) for _, e in found)
    lines = [f"acceptance exact on {counts['unchanged'] + counts['changed']} of {len(found)} "
             f"cases ({prompts} prompts compared: {counts['unchanged']} cases identical, "
             f"{counts['changed']} changed); step time judged by statistics (medians of "
             f"repeats, tolerance)."]
    # One line per reason, naming its cases: eight cases without per-prompt steps in the
    # baseline are one fact, not eight.
    reasons: dict[str, list[str]] = {}
    for case, e in found:
        if e["status"] == ExactStatus.UNAVAILABLE:
            reasons.setdefault(str(e["message"]), []).append(case)
    for message, cases in reasons.items():
        who = cases[0] if len(cases) == 1 else f"{len(cases)} cases ({', '.join(cases)})"
        lines.append(f"  {who}: {message}")
    return lines
