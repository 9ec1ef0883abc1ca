"""Exact acceptance: the same prompt, the same verify steps, or a named change.

At temperature 0 a speculative server commits the target's greedy tokens, in verify steps
decided by the drafter; for the same prompt both repeat exactly on a deterministic server.
When a run sends the baseline's prompts (:mod:`specperf.plan.reuse`) and the server repeated
itself in this run (the warm-up re-sent repeat 0's prompt: :func:`deterministic`), each
prompt's verify steps are compared with the baseline's, exactly: no tolerance, no repeats.

A change is attributed by the output: the same output text in more or fewer steps is the
**drafter** (greedy verification is lossless, so only the proposals changed); a different
output is the **numerics** (kernels, precision, the target model), and acceptance moved
with the text. Step time stays statistical (:mod:`specperf.judge.verdict`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..core.limits import ARROW
from ..measure.determinism import (
    EXACT_SOURCES,
    PromptRecord,
    determinism_detail,
    deterministic,
    records,
)
from .verdict import Verdict

if TYPE_CHECKING:
    from ..measure.loop import Measurement, Sample

SHOWN_CHANGES = 4
DRAFTER = ("the output text is the same, so the drafter proposes differently — check the "
           "draft model and its settings")
NUMERICS = ("the output text changed on {n} of them, so the target's greedy output moved — "
            "numerics (kernels, precision, attention backend) or the target model; "
            "acceptance moved with the text")


@dataclass(frozen=True)
class ExactResult:
    """The exact comparison of one case: "unchanged", "changed" or "unavailable"."""

    status: str
    message: str
    compared: int = 0
    changes: tuple[tuple[int, int, int, bool], ...] = ()  # (k, base, new, same output)
    cause: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def steps_delta(self) -> int:
        """Verify steps added over the changed prompts (positive: acceptance fell)."""
        return sum(new - base for _, base, new, _ in self.changes)

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "message": self.message, "compared": self.compared,
                "changed": len(self.changes), "cause": self.cause,
                "steps_delta": self.steps_delta,
                "changes": [{"prompt": k, "base_steps": b, "steps": n, "same_output": same}
                            for k, b, n, same in self.changes], **self.extra}


def unavailable(reason: str) -> ExactResult:
    return ExactResult("unavailable", f"exact acceptance unavailable: {reason}; acceptance "
                       f"is judged by statistics.")


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
                           "new version with --update-baselines")
    if base_deterministic is False:
        return unavailable("the server was not deterministic when the baseline was written")
    if deterministic(samples) is not True:
        return unavailable(f"the server is not shown deterministic here: "
                           f"{determinism_detail(samples)}")
    same = sorted(k for k in mine if k in base and base[k].prompt == mine[k].prompt)
    if not same:
        return unavailable("this run's prompts differ from the baseline's although their "
                           "nonces match (the tokenizer or the prompt text changed)")
    changes = tuple((k, base[k].steps, mine[k].steps, base[k].output == mine[k].output)
                    for k in same if base[k].steps != mine[k].steps)
    if not changes:
        return ExactResult("unchanged", f"exact acceptance: identical verify steps on "
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
    return ExactResult("changed", message, len(same), changes, cause)


def combine(verdict: Verdict, result: ExactResult) -> Verdict:
    """The case verdict with the exact acceptance result: a change where prompts took more
    steps fails at once (no tolerance); fewer steps is an improvement; step time keeps its
    statistical judgement (the statistical sentence follows)."""
    combined = replace(verdict, exact=result.to_dict())
    if result.status != "changed":
        return combined
    message = f"{result.message} Statistics: {verdict.message}"
    if result.steps_delta > 0 or verdict.status == "fail":
        return replace(combined, status="fail", message=message)
    status = "improved" if result.steps_delta < 0 else verdict.status
    return replace(combined, status=status, message=message)


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
        if e["status"] == "unavailable":
            reasons.setdefault(str(e["message"]), []).append(case)
    for message, cases in reasons.items():
        who = cases[0] if len(cases) == 1 else f"{len(cases)} cases ({', '.join(cases)})"
        lines.append(f"  {who}: {message}")
    return lines


def html(verdict: Mapping[str, Any]) -> str:
    """The report's exact-acceptance note under a verdict (escaped by the caller's helper)."""
    found = verdict.get("exact")
    if not found or found.get("status") == "changed":  # a change already leads the message
        return ""
    return str(found.get("message", ""))
