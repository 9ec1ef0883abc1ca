"""A/B mode: a candidate endpoint judged against production, side by side.

With ``--specperf-compare-endpoint PRODUCTION`` the measured ``--specperf-endpoint`` is the
candidate. Every case alternates requests between the two (warm-ups, then A B A B …) so drift
on the box — clocks, temperature, a neighbour — lands on both arms alike and cancels in the
ratio. The verdict is the candidate's medians against production's from the same run, with the same
tolerances and attribution as a stored baseline; no baseline file is needed.

Each endpoint has its own GPU lock; both are taken, always in the order of their lock
paths, so two A/B runs with swapped roles cannot deadlock. The interleaved measuring and its
adaptive repeats are :mod:`specperf.measure.pair`; this module judges what it measured.
"""

from __future__ import annotations

from dataclasses import replace

from ..baselines.store import CaseBaseline
from ..core.fingerprint import fingerprint_differences
from ..core.model import ContextFit
from ..core.verdict import NotJudged, Verdict
from ..measure.sample import Measurement, context_fit
from ..measure.session import PerfSession
from ..plan.workload import Case
from .positions import Shape

# Every figure in the message reads reference → measured: production → candidate.
PREFIX = "production → candidate: "

def as_baseline(reference: Measurement) -> CaseBaseline:
    """Production's measurement of this run, in the shape a stored baseline case has."""
    case = reference.case
    shape = Shape.of(s.raw for s in reference.measured)  # where acceptance is, per position
    return CaseBaseline(case.text_class, case.context, case.output_tokens,
                        reference.summaries(), {}, positions=list(shape.positions),
                        along=list(shape.along))


class Comparison:
    """Production's side of an A/B run: its session and its measurement of every case."""

    def __init__(self, production: PerfSession) -> None:
        self.production = production
        self.references: dict[str, Measurement] = {}

    def notes(self, candidate: PerfSession) -> list[str]:
        """How the two servers differ (usually exactly what the deploy changes)."""
        assert self.production.server is not None and candidate.server is not None
        return fingerprint_differences(self.production.server.fingerprint,
                                       candidate.server.fingerprint)

    def baseline_case(self, case: Case) -> CaseBaseline | NotJudged:
        found = self.references.get(case.id)
        if found is None:
            return NotJudged(f"{case.id}: production was not measured (the case errored).")
        return as_baseline(found)

    def fit(self, text_class: str) -> ContextFit | None:
        return context_fit(m for m in self.references.values()
                           if m.case.text_class == text_class)

    @staticmethod
    def label(verdict: Verdict) -> Verdict:
        return replace(verdict, message=PREFIX + verdict.message)
