"""Samples (one request each) and measurements (one case): the data the measuring loop
(:mod:`specperf.measure.loop`) produces and every verdict and view reads, with the figures
derived from them (the context fit's points)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.model import ContextFit, fit_repeats
from ..core.stats import Summary, summarize
from ..plan.workload import Case

# The metrics every measurement summarises (results.json and baselines use these names).
METRICS = ("tok_s", "decode_tok_s", "step_ms", "avg_commit")


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
