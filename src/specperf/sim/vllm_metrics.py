"""``/metrics`` of a vLLM 0.33 profile: vLLM's names and labels, on a registry of our own.

Names from vllm/v1/metrics/loggers.py and vllm/v1/spec_decode/metrics.py; labels
``model_name`` and ``engine`` ("0"), plus ``finished_reason`` on ``vllm:request_success``.
Token and draft counters move every engine iteration (the stats logger records each step);
``vllm:request_success_total`` when a request finishes. Committed tokens per step =
1 + accepted / drafts.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from specperf.sim.request import SimRequest
from specperf.sim.scheduler import PrefillReport, Scheduler, StepReport

_LABELS = ("model_name", "engine")


class VllmMetrics:
    """A scheduler observer exposing vLLM's counters and gauges."""

    def __init__(self, scheduler: Scheduler, model_name: str, spec_tokens: int) -> None:
        self.registry = CollectorRegistry()
        self._values = {"model_name": model_name, "engine": "0"}
        self._spec_tokens = spec_tokens
        self.drafts = self._counter("spec_decode_num_drafts", "Number of spec decoding drafts.")
        self.draft_tokens = self._counter("spec_decode_num_draft_tokens", "Number of draft tokens.")
        self.accepted = self._counter("spec_decode_num_accepted_tokens",
                                      "Number of accepted tokens.")
        self.generation = self._counter("generation_tokens", "Number of generation tokens.")
        self.prompt = self._counter("prompt_tokens", "Number of prefill tokens processed.")
        self.success = Counter("vllm:request_success", "Count of successfully processed requests.",
                               [*_LABELS, "finished_reason"], registry=self.registry)
        running = Gauge("vllm:num_requests_running", "Running requests.", list(_LABELS),
                        registry=self.registry)
        running.labels(**self._values).set_function(lambda: scheduler.running_count)
        waiting = Gauge("vllm:num_requests_waiting", "Waiting requests.", list(_LABELS),
                        registry=self.registry)
        waiting.labels(**self._values).set_function(lambda: scheduler.queued_count)
        for reason in ("length", "stop", "abort"):
            self.success.labels(**self._values, finished_reason=reason)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def on_step(self, report: StepReport) -> None:
        for request in report.batch:
            if request.finish_reason is not None or not request.commits:
                continue
            commit = request.commits[-1]
            self.drafts.labels(**self._values).inc()
            self.draft_tokens.labels(**self._values).inc(self._spec_tokens)
            self.accepted.labels(**self._values).inc(max(commit - 1, 0))
            self.generation.labels(**self._values).inc(commit)

    def on_prefill(self, report: PrefillReport) -> None:
        return None  # vLLM counts the prompt with the request's first token

    def on_first_token(self, request: SimRequest) -> None:
        self.prompt.labels(**self._values).inc(request.prompt_tokens)
        self.generation.labels(**self._values).inc(1)

    def on_finish(self, request: SimRequest) -> None:
        reason = str((request.finish_reason or {}).get("type", "stop"))
        self.success.labels(**self._values, finished_reason=reason).inc()

    def set_window(self, accept_length: float, accept_rate: float, throughput: float) -> None:
        return None  # vLLM has no SGLang-style window gauges

    def _counter(self, name: str, doc: str) -> Counter:
        return Counter(f"vllm:{name}", doc, list(_LABELS), registry=self.registry)
