"""Prometheus metrics with SGLang's names, on a registry of our own (never the global one).

Every series carries the labels ``model_name`` (served model name), ``engine_type``
("unified"), ``tp_rank`` ("0") and ``pp_rank`` ("0"); ``sglang:generation_tokens_total``,
``prompt_tokens_total``, ``num_requests_total`` and ``e2e_request_latency_seconds`` also
carry ``is_streaming`` ("true"/"false"). When each series moves follows SGLang 0.5.23
(paths in its wheel, ``sglang/srt/...``):

- ``prompt_tokens_total``, ``generation_tokens_total``, ``num_requests_total`` and
  ``spec_verify_calls_total`` (by the request's verify steps) move once, when a request
  finishes, before its response is sent (observability/metrics_collector.py
  ``observe_one_finished_request``): a long request leaves them still while it runs.
- ``realtime_tokens_total{mode}`` moves every iteration: ``prefill_compute`` (uncached
  prompt tokens) and ``prefill_cache`` (cached ones) after each prefill batch
  (managers/scheduler_components/metrics_reporter.py ``report_prefill_stats``), ``decode``
  by the tokens every decode iteration committed over the batch (``report_decode_stats``,
  fed by batch_result_processor.py ``get_num_generated_tokens``). Profile switch
  ``realtime_tokens = false`` leaves it out.
- ``num_running_reqs`` / ``num_queue_reqs`` are published, not live: after each prefill
  batch (running = the batch that was decoding before the new requests joined, so a first
  request reads 0 until the next decode-log window), every ``decode_log_interval`` decode
  steps, and on an idle server when they disagree with it (``_maybe_log_idle_metrics``,
  0.5.19+); profile switch ``gauge_idle_refresh = "every-30s"`` gives 0.5.14's idle refresh
  only 30 (simulated) seconds after the last publication.
- The acceptance and throughput gauges describe the last decode-log window only.
"""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from specperf.sim.observer import PrefillReport, StepReport
from specperf.sim.profile import Profile
from specperf.sim.request import SimRequest
from specperf.sim.scheduler import Scheduler

_LABELS = ("model_name", "engine_type", "tp_rank", "pp_rank")
_LATENCY_BUCKETS = (
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0,
)
_ITL_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.5)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_REALTIME_MODES = ("prefill_compute", "prefill_cache", "decode")
_IDLE_REFRESH_S = 30.0  # SGLang's fallback refresh of idle gauges (simulated seconds)


class SimMetrics:
    """Owns the registry; a scheduler observer."""

    def __init__(self, scheduler: Scheduler, profile: Profile, time_scale: float = 1.0) -> None:
        self.registry = CollectorRegistry()
        self._scheduler = scheduler
        self._values = {"model_name": profile.served_model_name, "engine_type": "unified",
                        "tp_rank": "0", "pp_rank": "0"}
        self._interval = max(1, profile.decode_log_interval)
        self._idle_at_once = profile.switches.gauge_idle_refresh == "at-once"
        self._idle_refresh_s = _IDLE_REFRESH_S * time_scale
        self._decode_steps = 0
        self._published_at = time.monotonic()
        self._shown = (0, 0)
        self._counters(profile.switches.realtime_tokens)
        self._histograms()
        self.gen_throughput = self._gauge("gen_throughput", "Generation throughput (token/s)")
        self.accept_length = self._gauge("spec_accept_length", "Average accept length")
        self.accept_rate = self._gauge("spec_accept_rate", "Average accept rate")
        # A labelled metric is exposed only once its child exists: create every child now,
        # so /metrics lists the same names from the first scrape, as SGLang's does.
        for metric in (self.verify_calls, self.itl, self.ttft, self.gen_throughput,
                       self.accept_length, self.accept_rate):
            metric.labels(**self._values)
        for streaming in ("true", "false"):
            for split in (self.generation_tokens, self.prompt_tokens, self.num_requests,
                          self.e2e):
                split.labels(**self._values, is_streaming=streaming)
        if self.realtime is not None:
            for mode in _REALTIME_MODES:
                self.realtime.labels(**self._values, mode=mode)
        self._publish(0, 0)

    def render(self) -> bytes:
        """The Prometheus text exposition."""
        self._refresh_idle()
        return generate_latest(self.registry)

    def _publish(self, running: int, queued: int) -> None:
        self.running.labels(**self._values).set(running)
        self.queued.labels(**self._values).set(queued)
        self._shown = (running, queued)
        self._published_at = time.monotonic()

    def _refresh_idle(self) -> None:
        """SGLang re-publishes the gauges from its idle loop; evaluated when scraped, which
        shows the same values, since nothing else changes while the server is idle."""
        scheduler = self._scheduler
        if scheduler.running_count or scheduler.queued_count:
            return
        stale = self._shown != (0, 0)
        overdue = time.monotonic() - self._published_at >= self._idle_refresh_s
        if (stale and self._idle_at_once) or overdue:
            self._publish(0, 0)

    def _realtime(self, mode: str, tokens: int) -> None:
        if self.realtime is not None and tokens > 0:
            self.realtime.labels(**self._values, mode=mode).inc(tokens)

    def on_prefill(self, report: PrefillReport) -> None:
        for request in report.batch:
            cached = request.cached_tokens
            self._realtime("prefill_compute", request.prompt_tokens - cached)
            self._realtime("prefill_cache", cached)
        self._publish(report.running_before, report.queued)

    def on_step(self, report: StepReport) -> None:
        # Every decode iteration: the tokens the whole batch committed (foreign ones too).
        self._realtime("decode", report.committed)
        self._decode_steps += 1
        if self._decode_steps % self._interval == 0:
            self._publish(len(report.batch), report.queued)
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
        self.prompt_tokens.labels(**self._values, is_streaming=streaming).inc(
            request.prompt_tokens)
        self.generation_tokens.labels(**self._values, is_streaming=streaming).inc(
            len(request.output_ids)
        )
        self.num_requests.labels(**self._values, is_streaming=streaming).inc()
        if request.commits:
            self.verify_calls.labels(**self._values).inc(len(request.commits))
        if request.finished_mono is not None:
            e2e = request.finished_mono - request.received_mono
            self.e2e.labels(**self._values, is_streaming=streaming).observe(e2e)

    def set_window(self, accept_length: float, accept_rate: float, throughput: float) -> None:
        """Gauges of the last decode-log window (called by the decode log)."""
        self.accept_length.labels(**self._values).set(accept_length)
        self.accept_rate.labels(**self._values).set(accept_rate)
        self.gen_throughput.labels(**self._values).set(throughput)

    def _counters(self, realtime: bool) -> None:
        # prometheus_client appends "_total" to counter names itself.
        self.verify_calls = self._counter("spec_verify_calls", "Verify forward passes")
        # prompt, generation and request counters (and the e2e histogram) split by
        # is_streaming, as SGLang 0.5.23's (observability/metrics_collector.py ~1855-1945).
        split = [*_LABELS, "is_streaming"]
        self.prompt_tokens = Counter("sglang:prompt_tokens", "Prefill tokens processed", split,
                                     registry=self.registry)
        self.num_requests = Counter("sglang:num_requests", "Requests finished", split,
                                    registry=self.registry)
        self.generation_tokens = Counter("sglang:generation_tokens", "Generation tokens", split,
                                         registry=self.registry)
        self.realtime: Counter | None = None
        if realtime:
            self.realtime = Counter(
                "sglang:realtime_tokens", "Tokens processed, every iteration", [*_LABELS, "mode"],
                registry=self.registry)
        self.running = self._gauge("num_running_reqs", "Running requests")
        self.queued = self._gauge("num_queue_reqs", "Queued requests")

    def _histograms(self) -> None:
        self.ttft = self._histogram("time_to_first_token_seconds", "TTFT", _LATENCY_BUCKETS)
        self.e2e = Histogram("sglang:e2e_request_latency_seconds", "E2E latency",
                             [*_LABELS, "is_streaming"], buckets=_LATENCY_BUCKETS,
                             registry=self.registry)
        self.itl = self._histogram("inter_token_latency_seconds", "Inter-token latency",
                                   _ITL_BUCKETS)

    def _counter(self, name: str, doc: str) -> Counter:
        return Counter(f"sglang:{name}", doc, list(_LABELS), registry=self.registry)

    def _gauge(self, name: str, doc: str) -> Gauge:
        return Gauge(f"sglang:{name}", doc, list(_LABELS), registry=self.registry)

    def _histogram(self, name: str, doc: str, buckets: tuple[float, ...]) -> Histogram:
        return Histogram(f"sglang:{name}", doc, list(_LABELS), buckets=buckets,
                         registry=self.registry)
