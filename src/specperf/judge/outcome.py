"""What every judge returns: a :class:`Verdict` (a status and the sentence a person acts on)
or a :class:`NotJudged` reason.

A :class:`Verdict` is a small value whose :meth:`Verdict.fails` returns the sentence to fail
with (or None); its status is the verdict contract's (:mod:`specperf.core.contract`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..core.contract import REGRESSION, Status
from ..core.model import Attribution

Details = dict[str, dict[str, float]]


@dataclass(frozen=True)
class Verdict:
    """The outcome of one comparison, with the sentence that explains it."""

    case_id: str
    status: Status
    message: str
    attribution: Attribution | None = None
    details: Details = field(default_factory=dict)
    # The exact acceptance comparison (exact.ExactResult.to_dict()), when one was made.
    exact: dict[str, Any] | None = None
    # Why the status was given, where the word alone would mislead (contract.REASONS).
    reason: str = ""
    # The case's predict-and-reconcile row (judge/reconcile.py Reconciled.to_dict()).
    reconcile: dict[str, Any] | None = None
    # What the judge could have seen (the sweep's: judge/sweep/verdict.py
    # SweepResult.resolution_dict): the smallest change per factor it catches with ``power``.
    resolution: dict[str, Any] | None = None
    # The factor a regression names, for views that say it in a word (views/headline.py
    # FACTORS: "step", "acceptance", "acceptance+step", "prefill", "slope"); "" when the
    # verdict names none.
    factor: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The verdict as the record keeps it: every field, the attribution as its shares."""
        data = asdict(self)
        data["attribution"] = None if self.attribution is None else {
            part: self.attribution.share(part) for part in ("acceptance", "step", "rest")}
        return data

    def fails(self) -> str | None:
        """The sentence to fail the case with, or None when it did not regress."""
        return self.message if self.status == REGRESSION else None


@dataclass(frozen=True)
class NotJudged:
    """Why a case, slope or sweep has no verdict (no baseline entry, an undetermined slope):
    its test skips with ``reason``, never passes or fails."""

    reason: str
