"""A/B mode: a candidate endpoint judged against production, side by side.

With ``--specperf-compare-endpoint PRODUCTION`` the measured ``--specperf-endpoint`` is the
candidate. Every case alternates requests between the two (warm-ups, then A B A B …) so drift
on the box — clocks, temperature, a neighbour — lands on both arms alike and cancels in the
ratio. The verdict is the candidate's medians against production's from the same run, with the same
tolerances and attribution as a stored baseline; no baseline file is needed.

Each endpoint has its own GPU lock; both are taken, always in the order of their lock
paths, so two A/B runs with swapped roles cannot deadlock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from ..baselines.store import CaseBaseline
from ..core.errors import UnstableMeasurement
from ..core.fingerprint import fingerprint_differences
from ..core.model import ContextFit
from ..core.stats import UNSTABLE_REL_MAD, summarize
from ..measure.loop import Measurer
from ..measure.repeats import RepeatDecision, decide_repeats
from ..measure.sample import Measurement, Sample, context_fit, sample_values
from ..measure.session import PerfSession
from ..plan.workload import Case
from .outcome import NotJudged, Verdict
from .positions import Shape

# Every figure in the message reads reference → measured: production → candidate.
PREFIX = "production → candidate: "

PairDecide = Callable[[Mapping[str, Sequence[float]], Mapping[str, Sequence[float]]],
                      RepeatDecision]


def measure_pair(case: Case, candidate: Measurer, reference: Measurer,
                 decide: PairDecide) -> tuple[Measurement, Measurement]:
    """Interleave the two endpoints' requests until ``decide`` stops (bounded)."""
    run = candidate.run
    warm: tuple[list[Sample], list[Sample]] = ([], [])
    for i in range(run.warmup):
        warm[0].append(candidate.sample(case, -1 - i, warmup=True))
        warm[1].append(reference.sample(case, -1 - i, warmup=True))
    got: tuple[list[Sample], list[Sample]] = ([], [])
    while True:
        got[0].append(candidate.sample(case, len(got[0]), warmup=False))
        candidate.on_sample(got[0][-1], run.repeats)
        got[1].append(reference.sample(case, len(got[1]), warmup=False))
        if len(got[0]) < run.repeats:
            continue
        decision = decide(sample_values(got[0]), sample_values(got[1]))
        if decision.action == "unstable":
            raise UnstableMeasurement(f"{case.id}: {decision.reason}")
        if decision.action == "stop" or len(got[0]) >= run.max_repeats:
            break
    return (candidate.finish(case, warm[0] + got[0]), reference.finish(case, warm[1] + got[1]))


def as_baseline(reference: Measurement) -> CaseBaseline:
    """Production's measurement of this run, in the shape a stored baseline case has."""
    case = reference.case
    shape = Shape.of(s.raw for s in reference.measured)  # where acceptance is, per position
    return CaseBaseline(case.text_class, case.context, case.output_tokens,
                        reference.summaries(), {}, positions=list(shape.positions),
                        along=list(shape.along))


def pair_decider(tolerances: Mapping[str, float], min_repeats: int,
                 max_repeats: int, max_spread: float = UNSTABLE_REL_MAD) -> PairDecide:
    """Adaptive repeats on the candidate against production so far; either arm noisy → more."""

    def decide(cand: Mapping[str, Sequence[float]],
               prod: Mapping[str, Sequence[float]]) -> RepeatDecision:
        own = decide_repeats(prod, None, tolerances, min_repeats=min_repeats,
                             max_repeats=max_repeats, max_spread=max_spread)
        if own.action == "unstable":
            return replace(own, reason=f"production: {own.reason}")
        base = CaseBaseline("", 0, 0, {m: summarize(v) for m, v in prod.items() if v}, {})
        mine = decide_repeats(cand, base, tolerances, min_repeats=min_repeats,
                              max_repeats=max_repeats, max_spread=max_spread)
        return mine if mine.action != "stop" or own.action == "stop" else own

    return decide


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
