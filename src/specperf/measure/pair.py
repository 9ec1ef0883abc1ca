"""A/B measuring: a candidate endpoint's requests interleaved with production's (warm-ups,
then A B A B …), so drift on the box lands on both arms alike, with adaptive repeats over
both arms. What it measured is judged by :mod:`specperf.judge.ab`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from ..core.errors import UnstableMeasurement
from ..core.stats import UNSTABLE_REL_MAD, Summary, summarize
from ..plan.workload import Case
from .loop import Measurer
from .repeats import RepeatDecision, decide_repeats
from .sample import Measurement, Sample, sample_values

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


@dataclass(frozen=True)
class _Production:
    """Production's summaries so far, as the reference a repeat decision reads."""

    metrics: Mapping[str, Summary]


def pair_decider(tolerances: Mapping[str, float], min_repeats: int,
                 max_repeats: int, max_spread: float = UNSTABLE_REL_MAD) -> PairDecide:
    """Adaptive repeats on the candidate against production so far; either arm noisy → more."""

    def decide(cand: Mapping[str, Sequence[float]],
               prod: Mapping[str, Sequence[float]]) -> RepeatDecision:
        own = decide_repeats(prod, None, tolerances, min_repeats=min_repeats,
                             max_repeats=max_repeats, max_spread=max_spread)
        if own.action == "unstable":
            return replace(own, reason=f"production: {own.reason}")
        base = _Production({m: summarize(v) for m, v in prod.items() if v})
        mine = decide_repeats(cand, base, tolerances, min_repeats=min_repeats,
                              max_repeats=max_repeats, max_spread=max_spread)
        return mine if mine.action != "stop" or own.action == "stop" else own

    return decide
