"""What kind of run a record is, so nobody mistakes a partial run or an outage for a sweep.

Kinds: ``full`` (every case of the planned matrix in the main job), ``gate`` (the smoke
subset only), ``ab`` (candidate against production), ``subset`` (anything else). Beside the
kind, two conditions: ``interrupted`` (stopped before every test ran) and ``outage`` (no
case was measured because every one errored: the box or the endpoint was down).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass
from typing import Any

KIND_LABELS = {"full": "full sweep", "gate": "gate", "ab": "A/B", "subset": "subset"}


@dataclass(frozen=True)
class RunKind:
    """The kind of one run and how much of it happened."""

    kind: str
    interrupted: bool
    outage: bool
    cases: int  # perf tests the run collected
    measured: int
    errored: int
    not_run: int

    def label(self) -> str:
        """e.g. 'full sweep', 'subset, INTERRUPTED (5 of 10 not run)', 'gate, OUTAGE …'."""
        parts = [KIND_LABELS[self.kind]]
        if self.interrupted:
            parts.append(f"INTERRUPTED ({self.not_run} of {self.cases} perf tests not run)")
        if self.outage:
            parts.append(f"OUTAGE (nothing was measured: {self.errored} of "
                         f"{self.cases - self.not_run} perf tests errored)")
        elif self.errored:
            parts.append(f"{self.errored} of {self.cases} perf tests errored")
        return ", ".join(parts)

    @property
    def comparable(self) -> str:
        """The group a trend compares within: like with like."""
        return "partial" if self.interrupted or self.outage else self.kind

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "label": self.label()}


def classify(*, ab: bool, interrupted: bool, outcomes: Mapping[str, str],
             smoke: Collection[str], scaling_cases: Collection[str],
             planned: Collection[str], measured: int) -> RunKind:
    """The kind of a run from its perf tests' outcomes (node id → outcome)."""
    errored = sum(o == "error" for o in outcomes.values())
    not_run = sum(o == "not run" for o in outcomes.values())
    if ab:
        kind = "ab"
    elif outcomes and set(outcomes) <= set(smoke):
        kind = "gate"
    elif planned and set(planned) <= set(scaling_cases):
        kind = "full"
    else:
        kind = "subset"
    ran = len(outcomes) - not_run
    outage = measured == 0 and errored > 0 and errored == ran
    return RunKind(kind, interrupted, outage, len(outcomes), measured, errored, not_run)
