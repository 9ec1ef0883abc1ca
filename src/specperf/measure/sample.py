"""Samples (one request each) and measurements (one case): the data the measuring loop
(:mod:`specperf.measure.loop`) produces and every verdict and view reads, with the figures
derived from them (the context fit's points)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import ImpossibleSample
from ..core.model import ContextFit, fit_repeats
from ..core.stats import Summary, summarize
from ..plan.workload import Case
from ..servers.fingerprint import step_limit
from ..servers.messages import LIMIT_FROM_KEY, LIMIT_KEY

# The metrics every measurement summarises (results.json and baselines use these names).
METRICS = ("tok_s", "decode_tok_s", "step_ms", "avg_commit", "ttft_ms")


@dataclass(frozen=True)
class StepLimit:
    """What one verify step can commit at most: its draft tokens plus the target's own one."""

    draft_tokens: int
    source: str  # where the number came from, e.g. "speculative_num_draft_tokens in /server_info"

    @property
    def max_commit(self) -> int:
        return self.draft_tokens + 1


@dataclass(frozen=True)
class StepFigures:
    """The figures of one request the physical bounds are checked on, and where S came from.

    ``accepted``/``drafted``: draft tokens accepted and proposed, when the server counts them;
    ``histogram_sum``: the steps an accept histogram counts, when it sends one.
    """

    where: str
    completion_tokens: int
    steps: int | None
    steps_from: str
    decode_s: float | None = None
    histogram_sum: int | None = None
    accepted: int | None = None
    drafted: int | None = None


def check_possible(figures: StepFigures, limit: StepLimit | None = None) -> None:
    """Raise ImpossibleSample when ``figures`` lie outside what the server can produce: at most
    N verify steps, 1 ≤ avg commit ≤ draft tokens + 1 (with ``limit``), a positive step
    time, an accept histogram summing to S, no more draft tokens accepted than proposed.

    Every sample passes it before it is judged (:class:`Sample`), whatever the server kind.
    """
    _check_counters(figures)
    steps = figures.steps
    if not steps:  # no step count (0: a server that does not speculate reports none)
        return
    _check_steps(figures, steps, limit)
    if figures.decode_s is not None and figures.decode_s <= 0:
        raise ImpossibleSample(
            f"{figures.where}: decode time {1000 * figures.decode_s:.1f} ms over {steps} "
            f"verify steps ({figures.steps_from}) gives a step time that is not above 0 ms: "
            "the server's timings are wrong; check its end-to-end and first-token latencies "
            "before judging this deployment.")


def _check_counters(f: StepFigures) -> None:
    if f.histogram_sum is not None and f.steps is not None and f.histogram_sum != f.steps:
        raise ImpossibleSample(
            f"{f.where}: the accept histogram sums to {f.histogram_sum} steps but the server "
            f"counts {f.steps} verify steps ({f.steps_from}): a histogram has one entry per "
            "step, so the server's spec fields disagree; check its speculative metrics.")
    if f.accepted is not None and f.drafted is not None and f.accepted > f.drafted:
        raise ImpossibleSample(
            f"{f.where}: {f.accepted} draft tokens accepted but only {f.drafted} proposed "
            f"({f.steps_from}): no step accepts more than it drafted, so the server's spec "
            "counters disagree; check its speculative metrics.")


def _check_steps(f: StepFigures, steps: int, limit: StepLimit | None) -> None:
    n = f.completion_tokens
    if not 0 < steps <= n:
        raise ImpossibleSample(
            f"{f.where}: {steps} verify steps ({f.steps_from}) for {n} completion tokens: "
            f"every step commits at least one token, so there are between 1 and {n}; the "
            "step count is wrong; check the server's step counter before judging it.")
    if n < 2:
        return
    commit = (n - 1) / steps
    if commit < 1.0:
        raise ImpossibleSample(
            f"{f.where}: avg commit {commit:.2f} = ({n} − 1) / {steps} verify steps "
            f"({f.steps_from}) is below 1, the least a verify step commits: the step count "
            "is wrong; check the server's step counter before judging it.")
    if limit is not None and commit > limit.max_commit:
        raise ImpossibleSample(
            f"{f.where}: avg commit {commit:.2f} = ({n} − 1) / {steps} verify steps "
            f"({f.steps_from}) is above {limit.max_commit}, the most a step commits with "
            f"{limit.draft_tokens} draft tokens per step ({limit.source}): the step count "
            "is wrong; check the server's step counter before judging it.")


def limit_of(raw: dict[str, Any]) -> StepLimit | None:
    """The step limit a sample's raw fields carry (``LIMIT_KEY``), None when unknown."""
    k = raw.get(LIMIT_KEY)
    if not isinstance(k, int) or isinstance(k, bool) or k < 0:
        return None
    return StepLimit(k, str(raw.get(LIMIT_FROM_KEY) or "the server's fingerprint"))


def limit_raw(fingerprint: dict[str, Any]) -> dict[str, Any]:
    """The raw fields that carry a server's step limit into its samples (``limit_of``)."""
    found = step_limit(fingerprint)
    return {} if found is None else {LIMIT_KEY: found[0], LIMIT_FROM_KEY: found[1]}


@dataclass(frozen=True)
class Sample:
    """One measured request (any path, streamed or not) and every raw number it gave.

    Times are in the server's own time base: for the simulator, wall time divided by the
    time scale its adapter reports (``ServerInfo.time_scale``), so figures read like the box's.
    """

    case_id: str
    repeat: int
    warmup: bool
    prompt_tokens: int
    completion_tokens: int
    wall_s: float
    verify_steps: int | None
    decode_s: float | None
    ttft_s: float | None
    server_accept_length: float | None
    cached_tokens: int | None
    acceptance_source: str
    finish_reason: str
    retries: int = 0
    raw: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        # Physically possible or an error: never a figure to judge (check_possible).
        steps_from = str(self.raw.get("steps_from")
                         or f"acceptance source {self.acceptance_source}")
        if self.raw.get("drafting_steps") is not None:  # vLLM: the steps that drafted
            steps_from += f"; num_spec_steps {self.raw['drafting_steps']}"
        check_possible(StepFigures(self.case_id, self.completion_tokens, self.verify_steps,
                                   steps_from, self.decode_s), limit_of(self.raw))

    @property
    def tok_s(self) -> float:
        """N / T: what the user feels."""
        return self.completion_tokens / self.wall_s

    @property
    def avg_commit(self) -> float | None:
        """(N − 1) / S: tokens committed per verify step (the first comes from prefill)."""
        if not self.verify_steps:
            return None
        return (self.completion_tokens - 1) / self.verify_steps

    @property
    def step_ms(self) -> float | None:
        """T_d / S: one verify forward pass, in milliseconds."""
        if not self.verify_steps or self.decode_s is None:
            return None
        return 1000.0 * self.decode_s / self.verify_steps

    @property
    def decode_tok_s(self) -> float | None:
        """(N − 1) / T_d."""
        if not self.decode_s:
            return None
        return (self.completion_tokens - 1) / self.decode_s

    @property
    def ttft_ms(self) -> float | None:
        """Time to first token (prefill, the first token included), in milliseconds."""
        return None if self.ttft_s is None else 1000.0 * self.ttft_s

    def metric(self, name: str) -> float | None:
        value: float | None = getattr(self, name)
        return value

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "raw"}
        out.update({m: self.metric(m) for m in METRICS})
        out["raw"] = self.raw
        return out


@dataclass(frozen=True)
class Measurement:
    """All measured samples of one case and their robust summaries."""

    case: Case
    samples: tuple[Sample, ...]
    decode_method: str
    acceptance_source: str

    @property
    def measured(self) -> tuple[Sample, ...]:
        return tuple(s for s in self.samples if not s.warmup)

    def summary(self, metric: str) -> Summary | None:
        """Median/MAD of ``metric`` over the non-warm-up samples, or None if unavailable."""
        values = [v for s in self.measured if (v := s.metric(metric)) is not None]
        return summarize(values) if values else None

    def summaries(self) -> dict[str, Summary]:
        return {m: s for m in METRICS if (s := self.summary(m)) is not None}

    @property
    def mean_context(self) -> float:
        return mean_context(self.case.context, self.case.output_tokens)

    def to_dict(self) -> dict[str, Any]:
        return {
            "case": self.case.to_dict(),
            "decode_method": self.decode_method,
            "acceptance_source": self.acceptance_source,
            "summaries": {k: v.to_dict() for k, v in self.summaries().items()},
            "samples": [s.to_dict() for s in self.samples],
        }


def mean_context(context: float, output_tokens: float) -> float:
    """Context averaged over a request's decode: prompt plus half the output;
    the x of every context fit."""
    return float(context) + float(output_tokens) / 2


def context_fit(measurements: Iterable[Measurement]) -> ContextFit | None:
    """step_ms = a + b·context over ``measurements`` (one text class), each point weighed by
    its repeats; None with fewer than two contexts."""
    return fit_repeats([(m.mean_context, step_repeats(m)) for m in measurements])


def step_repeats(measurement: Measurement) -> list[float]:
    """The step times of a measurement's repeats (what a context fit weighs its point by)."""
    return [v for s in measurement.measured if (v := s.step_ms) is not None]


def sample_values(samples: Sequence[Sample]) -> dict[str, list[float]]:
    """Each metric's values over ``samples`` (metrics a sample lacks are left out)."""
    out: dict[str, list[float]] = {}
    for metric in METRICS:
        vals = [v for s in samples if (v := s.metric(metric)) is not None]
        if vals:
            out[metric] = vals
    return out
