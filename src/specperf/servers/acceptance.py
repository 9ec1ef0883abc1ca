"""Where verify-step counts come from, in order of trust.

1. ``response``: per-request fields the server returns (see :mod:`specperf.servers.routes`).
2. ``metrics``: Prometheus counter deltas bracketing one request at concurrency 1.
3. ``log``: SGLang ``Decode batch`` lines, ``accept len`` weighted by steps.
4. ``none``: throughput only.

Every parser here returns a value or raises :class:`MalformedResponse`; none lets
another exception escape on junk input.
"""

from __future__ import annotations

import math
import re
import shlex
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from ..core.errors import AcceptanceUnavailable, MalformedResponse

SOURCES = ("response", "metrics", "log", "none")

# Sample names (as exposed, with _total) summed over label sets, per server family.
_COUNTERS = {
    "verify_calls": ("sglang:spec_verify_calls_total", "vllm:spec_decode_num_drafts_total",
                     "llamacpp:spec_decode_num_drafts_total"),
    "generation_tokens": ("sglang:generation_tokens_total", "vllm:generation_tokens_total",
                          "llamacpp:tokens_predicted_total"),
    "requests": ("sglang:num_requests_total", "vllm:request_success_total"),
    "running": ("sglang:num_running_reqs", "vllm:num_requests_running",
                "llamacpp:requests_processing"),
    "queued": ("sglang:num_queue_reqs", "vllm:num_requests_waiting",
               "llamacpp:requests_deferred"),
    # llama.cpp (specperf.servers.llamacpp): accepted draft tokens
    "accepted_drafts": ("llamacpp:spec_decode_num_accepted_tokens_total",),
}
# The per-iteration progress counter of each server family: series summed (over names and
# label sets) into MetricsSnapshot.progress. It moves every scheduler iteration, while the
# finish counters above move only when a request finishes; guard.ACCOUNTING says how much
# one request of ours adds to it.
# - SGLang 0.5.23: realtime_tokens_total{mode=prefill_compute|prefill_cache|decode}
#   (sglang/srt/observability/metrics_collector.py increment_realtime_tokens, raised from
#   managers/scheduler_components/metrics_reporter.py report_prefill_stats and, every decode
#   iteration, report_decode_stats).
# - vLLM 0.33.0: prompt_tokens_total and generation_tokens_total, both raised per engine
#   iteration from IterationStats (vllm/v1/metrics/loggers.py PrometheusStatLogger.record;
#   vllm/v1/metrics/stats.py update_from_output counts len(new_token_ids), the first token
#   included, and the whole prompt, cached tokens too (IterationStats.num_prompt_tokens =
#   prompt_token_stats.total), when its prefill completes).
PROGRESS: dict[str, tuple[str, ...]] = {
    "sglang": ("sglang:realtime_tokens_total",),
    "vllm": ("vllm:prompt_tokens_total", "vllm:generation_tokens_total"),
    # llama.cpp (specperf.servers.llamacpp): target decodes, raised every iteration (verify
    # steps and prompt batches too); its guard checks the finish-time token counter (after_counted).
    "llamacpp": ("llamacpp:n_decode_total",),
}


@dataclass(frozen=True)
class MetricsSnapshot:
    """The counters and gauges specperf reads from /metrics, summed over label sets."""

    verify_calls: float | None
    generation_tokens: float | None
    requests: float | None
    running: float | None
    queued: float | None
    progress: float | None = None  # per-iteration counter (PROGRESS), None when not exported
    family: str | None = None  # "sglang", "vllm", ... by the metric names' prefix
    accepted_drafts: float | None = None  # llama.cpp: accepted draft tokens

    @property
    def idle(self) -> bool:
        return not self.running and not self.queued

    @property
    def has_steps(self) -> bool:
        return self.verify_calls is not None and self.generation_tokens is not None


_WANTED = frozenset(name for names in (*_COUNTERS.values(), *PROGRESS.values())
                    for name in names)


def _wanted_lines(text: str, wanted: frozenset[str]) -> str:
    """Only the series asked for (and their HELP/TYPE lines): a server exports hundreds
    of histogram buckets per scrape, and parsing them all costs milliseconds per request."""
    keep = []
    for line in text.splitlines():
        body = line[7:] if line.startswith(("# HELP ", "# TYPE ")) else line
        name = body.split("{", 1)[0].split(" ", 1)[0]
        if name in wanted:
            keep.append(line)
    return "\n".join(keep) + "\n"


def metric_samples(text: str, wanted: frozenset[str]) -> list[Any]:
    """The samples (name, labels, value) of the ``wanted`` sample names in a /metrics text.

    The one reading of Prometheus text in specperf (prometheus_client's parser on the wanted
    lines only, with their HELP/TYPE lines). Text it cannot parse raises
    :class:`MalformedResponse` with one sentence; a name that is absent has no samples.
    """
    try:
        return [sample for family in text_string_to_metric_families(_wanted_lines(text, wanted))
                for sample in family.samples]
    except Exception as exc:  # the parser raises ValueError, IndexError, ... on junk
        raise MalformedResponse(
            f"/metrics is not valid Prometheus text ({type(exc).__name__}: {exc}): fix the "
            "server's metrics exposition, or point --endpoint at the server itself rather "
            "than something in front of it.") from exc


def metric_sums(text: str, wanted: frozenset[str]) -> dict[str, float]:
    """The ``wanted`` sample names of a /metrics text, each summed over its label sets
    (see metric_samples); a name that is absent is absent from the result."""
    sums: dict[str, float] = {}
    for sample in metric_samples(text, wanted):
        sums[sample.name] = sums.get(sample.name, 0.0) + float(sample.value)
    return sums


def parse_metrics(text: str) -> MetricsSnapshot:
    """The counters and gauges specperf reads, from one /metrics text (see metric_sums)."""
    sums = metric_sums(text, _WANTED)

    def pick(names: tuple[str, ...]) -> float | None:
        # NaN and ±Inf are valid exposition but no usable count: treated as absent.
        return next((sums[n] for n in names if n in sums and math.isfinite(sums[n])), None)

    kind = next((f for f in PROGRESS if any(n.startswith(f"{f}:") for n in sums)), None)
    return MetricsSnapshot(**{key: pick(names) for key, names in _COUNTERS.items()},
                           progress=_progress(sums, kind), family=kind)


def _progress(sums: dict[str, float], family: str | None) -> float | None:
    """The family's progress counter: the sum of its series, None unless all are there."""
    names = PROGRESS.get(family or "", ())
    if not names or any(n not in sums or not math.isfinite(sums[n]) for n in names):
        return None
    return sum(sums[n] for n in names)


def steps_from_metrics(before: MetricsSnapshot, after: MetricsSnapshot) -> int:
    """Verify steps of the one request that ran between two snapshots."""
    if before.verify_calls is None or after.verify_calls is None:
        raise AcceptanceUnavailable(
            "/metrics has no verify-step counter (sglang:spec_verify_calls_total or "
            "vllm:spec_decode_num_drafts_total); choose another --specperf-acceptance-source.")
    steps = after.verify_calls - before.verify_calls
    if not math.isfinite(steps) or steps <= 0 or steps != int(steps):
        raise MalformedResponse(
            f"verify-step counter moved by {steps:g} during one request: expected a positive "
            "whole number; was the server restarted mid-measurement?")
    return int(steps)


# -- the log source ---------------------------------------------------------------------------
# "Decode batch [N], ..." with SGLANG_LOG_FORWARD_ITERS=1 (SGLang 0.5.23
# managers/scheduler_components/metrics_reporter.py; its debug_utils/log_parser.py agrees).
_DECODE = re.compile(
    r"\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)[^\]]*\]\s*Decode batch(?: \[\d+\])?[.,]\s*"
    r"#running-req:\s*(?P<running>\d+).*?accept len:\s*(?P<accept>[0-9.]+)")


@dataclass(frozen=True)
class DecodeWindow:
    """One SGLang decode log line: ``accept len`` over the last decode_log_interval steps."""

    ts: datetime
    running: int
    accept_len: float


def parse_decode_log(lines: Iterable[str]) -> list[DecodeWindow]:
    """Decode-batch windows from SGLang log lines, current and older formats; others skipped."""
    windows = []
    for line in lines:
        m = _DECODE.search(line)
        if not m:
            continue
        try:
            ts = datetime.strptime(m["ts"], "%Y-%m-%d %H:%M:%S")
            windows.append(DecodeWindow(ts, int(m["running"]), float(m["accept"])))
        except ValueError:
            continue
    return windows


def avg_commit_from_windows(windows: list[DecodeWindow], start: datetime,
                            end: datetime) -> float | None:
    """Mean accept len of the windows inside [start, end], dropping the first (partial) one.

    Every window covers the same number of steps, so a plain mean is the step-weighted one.
    """
    inside = [w for w in windows if start <= w.ts <= end and w.running >= 1]
    full = inside[1:]
    if not full:
        return None
    return sum(w.accept_len for w in full) / len(full)


class LogSource:
    """Runs ``--specperf-log-command`` (split, no shell: the string comes from the user's own
    config, but a shell would also expand whatever a server log puts into it) and parses its
    output."""

    def __init__(self, command: str, timeout_s: float = 30.0) -> None:
        self.command = command
        self.timeout_s = timeout_s

    def read(self, since: datetime) -> list[DecodeWindow]:
        return parse_decode_log(self.lines(since))

    def lines(self, since: datetime) -> list[str]:
        """The command's output lines (each server kind parses its own format)."""
        # Split first, then fill in: the timestamp holds a space and must stay one argument
        # (journalctl --since "2026-11-30 04:35:00").
        stamp = since.strftime("%Y-%m-%d %H:%M:%S")
        argv = [arg.replace("{since}", stamp) for arg in shlex.split(self.command)]
        try:
            done = subprocess.run(argv, capture_output=True, text=True,
                                  timeout=self.timeout_s, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise AcceptanceUnavailable(
                f"--specperf-log-command {self.command!r} failed: {exc}") from exc
        if done.returncode != 0:
            raise AcceptanceUnavailable(
                f"--specperf-log-command {self.command!r} exited {done.returncode}: "
                f"{done.stderr.strip()[:200]}")
        return done.stdout.splitlines()
