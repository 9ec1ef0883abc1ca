"""What the scheduler's observers (metrics, decode log) are told: one report per prefill
batch and per verify step, and each request's first token and finish."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from specperf.sim.request import SimRequest


@dataclass(frozen=True)
class StepReport:
    """One verify step as observers (metrics, decode log) see it."""

    batch: Sequence[SimRequest]
    committed: int
    wall_s: float
    context_tokens: int
    queued: int


@dataclass(frozen=True)
class PrefillReport:
    """One prefill batch as observers see it, after its forward pass.

    ``running_before``: requests that were decoding when the batch was formed (SGLang's
    PrefillStats.num_running_reqs counts the running batch without the new requests);
    ``queued``: requests still waiting afterwards.
    """

    batch: Sequence[SimRequest]
    running_before: int
    queued: int


class SchedulerObserver(Protocol):
    def on_prefill(self, report: PrefillReport) -> None: ...
    def on_step(self, report: StepReport) -> None: ...
    def on_first_token(self, request: SimRequest) -> None: ...
    def on_finish(self, request: SimRequest) -> None: ...
