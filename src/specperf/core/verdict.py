"""What every judge returns: a :class:`Verdict` (a status, its scope, its figures and the
sentence a person acts on) or a :class:`NotJudged` reason.

A :class:`Verdict` is a small value whose :meth:`Verdict.fails` returns the sentence to fail
with (or None); its status is the verdict contract's (:mod:`specperf.core.contract`) and its
:class:`Scope` says what was judged, so a view reads the kind of a verdict from a field,
never from its id or the shape of its details. Here, in core, so every room that judges,
records or renders shares the one type.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from .contract import REGRESSION, Status
from .model import Attribution

Details = dict[str, dict[str, float]]


class Scope(str, Enum):
    """What a verdict judged, as results.json's ``scope`` stores it: one case against its
    baseline (its exact acceptance, draft positions and reconcile row are parts of it), a text
    class's context slope, a sweep over cases, a request path (parser, stream, transport), or
    a concurrency level or the slope over levels."""

    def __str__(self) -> str:
        return str(self.value)

    CASE = "case"
    FIT = "fit"
    SWEEP = "sweep"
    PATH = "path"
    CONCURRENCY = "concurrency"


@dataclass(frozen=True)
class Verdict:
    """The outcome of one comparison, with the sentence that explains it."""

    case_id: str
    status: Status
    message: str
    # What was judged (:class:`Scope`): every judge names it, so no view guesses it.
    scope: Scope = field(kw_only=True)
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
        data["scope"] = str(self.scope)
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
