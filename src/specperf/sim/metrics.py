"""Prometheus metrics with SGLang's names, on a registry of our own (never the global one).

Every series carries the labels ``model_name`` (served model name), ``engine_type``
("unified"), ``tp_rank`` ("0") and ``pp_rank`` ("0"); ``sglang:generation_tokens_total``
also carries ``is_streaming`` ("true"/"false"). Token and request counters move when a
request finishes -- before its response is sent, so a scrape after the response is exact --
while ``sglang:spec_verify_calls_total`` moves by one per running request per verify step.
The acceptance and throughput gauges describe the last decode-log window only, like SGLang.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from specperf.sim.request import SimRequest
from specperf.sim.scheduler import Scheduler, StepReport

_LABELS = ("model_name", "engine_type", "tp_rank", "pp_rank")
_LATENCY_BUCKETS = (
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0,
)
_ITL_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.5)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class SimMetrics:
    """Owns the registry; a scheduler observer."""

    def __init__(self, scheduler: Scheduler, model_name: str) -> None:
        self.registry = CollectorRegistry()
        self._values = {"model_name": model_name, "engine_type": "unified", "tp_rank": "0",
                        "pp_rank": "0"}
        self._counters(scheduler)
        self._histograms()
        self.gen_throughput = self._gauge("gen_throughput", "Generation throughput (token/s)")
        self.accept_length = self._gauge("spec_accept_length", "Average accept length")
        self.accept_rate = self._gauge("spec_accept_rate", "Average accept rate")
        # A labelled metric is exposed only once its child exists: create every child now,
        # so /metrics lists the same names from the first scrape, as SGLang's does.
        for metric in (self.verify_calls, self.prompt_tokens, self.num_requests, self.itl,
                       self.ttft, self.e2e, self.gen_throughput, self.accept_length,
                       self.accept_rate):
            metric.labels(**self._values)
        for streaming in ("true", "false"):
            self.generation_tokens.labels(**self._values, is_streaming=streaming)

    def render(self) -> bytes:
        """The Prometheus text exposition."""
        return generate_latest(self.registry)

    def on_step(self, report: StepReport) -> None:
        self.verify_calls.labels(**self._values).inc(len(report.batch))
        itl = self.itl.labels(**self._values)
        for request in report.batch:
            # Aborted requests (finish_reason already set) took no part in this step.
            if request.finish_reason is None and request.commits and request.commits[-1]:
                itl.observe(report.wall_s / request.commits[-1])

    def on_first_token(self, request: SimRequest) -> None:
        if request.first_token_mono is not None:
            ttft = request.first_token_mono - request.received_mono
            self.ttft.labels(**self._values).observe(ttft)

    def on_finish(self, request: SimRequest) -> None:
        streaming = "true" if request.spec.stream else "false"
        self.prompt_tokens.labels(**self._values).inc(request.prompt_tokens)
        self.generation_tokens.labels(**self._values, is_streaming=streaming).inc(
            len(request.output_ids)
        )
        self.num_requests.labels(**self._values).inc()
        if request.finished_mono is not None:
            e2e = request.finished_mono - request.received_mono
            self.e2e.labels(**self._values).observe(e2e)

    def set_window(self, accept_length: float, accept_rate: float, throughput: float) -> None:
        """Gauges of the last decode-log window (called by the decode log)."""
        self.accept_length.labels(**self._values).set(accept_length)
        self.accept_rate.labels(**self._values).set(accept_rate)
        self.gen_throughput.labels(**self._values).set(throughput)

    def _counters(self, scheduler: Scheduler) -> None:
        # prometheus_client appends "_total" to counter names itself.
        self.verify_calls = self._counter("spec_verify_calls", "Verify forward passes")
        self.prompt_tokens = self._counter("prompt_tokens", "Prefill tokens processed")
        self.num_requests = self._counter("num_requests", "Requests finished")
        self.generation_tokens = Counter(
            "sglang:generation_tokens", "Generation tokens", [*_LABELS, "is_streaming"],
            registry=self.registry,
        )
        running = self._gauge("num_running_reqs", "Running requests")
        running.labels(**self._values).set_function(lambda: scheduler.running_count)
        queued = self._gauge("num_queue_reqs", "Queued requests")
        queued.labels(**self._values).set_function(lambda: scheduler.queued_count)

    def _histograms(self) -> None:
        self.ttft = self._histogram("time_to_first_token_seconds", "TTFT", _LATENCY_BUCKETS)
        self.e2e = self._histogram("e2e_request_latency_seconds", "E2E latency", _LATENCY_BUCKETS)
        self.itl = self._histogram("inter_token_latency_seconds", "Inter-token latency",
                                   _ITL_BUCKETS)

    def _counter(self, name: str, doc: str) -> Counter:
        return Counter(f"sglang:{name}", doc, list(_LABELS), registry=self.registry)

    def _gauge(self, name: str, doc: str) -> Gauge:
        return Gauge(f"sglang:{name}", doc, list(_LABELS), registry=self.registry)

    def _histogram(self, name: str, doc: str, buckets: tuple[float, ...]) -> Histogram:
        return Histogram(f"sglang:{name}", doc, list(_LABELS), buckets=buckets,
                         registry=self.registry)
