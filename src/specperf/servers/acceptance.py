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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from ..core.errors import AcceptanceUnavailable, MalformedResponse
from ..core.stats import t_quantile

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


# -- acceptance per draft position and along the output ------------------------------------------
# Accepted drafts per draft position, as the servers count them: unconditional (a step whose
# draft missed at position i accepts nothing deeper), one series per position label.
# - llama.cpp 0c1e570: llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position}, raised
#   when a request finishes; the series appear only once something was accepted there (a fresh
#   server exports none), so an absent position counts 0 while the drafts counter is exported.
# - vLLM 0.33.0: vllm:spec_decode_num_accepted_tokens_per_pos_total{position} (its
#   v1/spec_decode/metrics.py SpecDecodingStats.observe_draft: positions 0 .. accepted − 1 of
#   every drafting step), per engine iteration.
PER_POSITION = ("llamacpp:spec_decode_num_accepted_tokens_per_pos_total",
                "vllm:spec_decode_num_accepted_tokens_per_pos_total")
DRAFTING_STEPS = ("llamacpp:spec_decode_num_drafts_total", "vllm:spec_decode_num_drafts_total")
# Output tokens per point of the acceptance-along-the-output curve.
ALONG_TOKENS = 100


@dataclass(frozen=True)
class PositionCounts:
    """Accepted drafts per draft position (0 = the first draft token) over ``drafts``
    drafting steps. The counts are unconditional: position i is accepted only if every
    position before it was, so ``accepted`` never grows with depth."""

    accepted: tuple[int, ...]
    drafts: int
    source: str  # where the counts came from, in the server's words

    def conditional(self) -> list[float | None]:
        """Each position's rate given the one before it was accepted: accepted_i /
        accepted_{i−1}, position 0 over the drafting steps; None where nothing reached it."""
        return conditional_rates(self.accepted, self.drafts)

    def raw(self) -> dict[str, Any]:
        """The sample's raw fields (``accepted_per_pos``, ``drafts``, ``positions_from``)."""
        return {"accepted_per_pos": list(self.accepted), "drafts": self.drafts,
                "positions_from": self.source}


def conditional_rates(accepted: Sequence[float], drafts: float) -> list[float | None]:
    """accepted_i / accepted_{i−1} (position 0: accepted_0 / drafts), None over a zero."""
    rates: list[float | None] = []
    below = float(drafts)
    for count in accepted:
        rates.append(count / below if below > 0 else None)
        below = float(count)
    return rates


def _checked(accepted: Sequence[int], drafts: int, source: str, where: str) -> PositionCounts:
    """PositionCounts, or MalformedResponse when no chain of drafts can give these counts."""
    chain = [drafts, *accepted]
    if drafts < 0 or any(deeper > shallower or deeper < 0
                         for shallower, deeper in zip(chain, chain[1:], strict=False)):
        raise MalformedResponse(
            f"{where}: accepted drafts per position {list(accepted)} over {drafts} drafting "
            f"steps ({source}): a position can accept no more than the one before it, so the "
            "server's per-position counts are wrong; check its speculative metrics.")
    return PositionCounts(tuple(accepted), drafts, source)


def _per_position(text: str) -> tuple[dict[int, float], float | None]:
    """Per-position accepted sums and the drafting-step counter of one /metrics text."""
    wanted = frozenset((*PER_POSITION, *DRAFTING_STEPS))
    counts: dict[int, float] = {}
    drafts: float | None = None
    for sample in metric_samples(text, wanted):
        if sample.name in DRAFTING_STEPS:
            drafts = (drafts or 0.0) + float(sample.value)
            continue
        label = str(sample.labels.get("position", ""))
        if label.isdigit():
            counts[int(label)] = counts.get(int(label), 0.0) + float(sample.value)
    return counts, drafts


def positions_from_metrics(before_text: str, after_text: str,
                           where: str = "/metrics") -> PositionCounts | None:
    """Per-position counts of the one request bracketed by two /metrics texts (the traffic
    guard's scrapes); None when the server exports no per-position counters or no drafts."""
    if not before_text or not after_text:
        return None
    (before, drafts0), (after, drafts1) = _per_position(before_text), _per_position(after_text)
    if not after or drafts0 is None or drafts1 is None:
        return None
    moved = [after.get(i, 0.0) - before.get(i, 0.0) for i in range(max(after) + 1)]
    steps = drafts1 - drafts0
    if steps <= 0 or not all(math.isfinite(v) and v == int(v) for v in (*moved, steps)):
        return None
    return _checked([int(v) for v in moved], int(steps), "per-position /metrics counters",
                    where)


def positions_from_histogram(histogram: Sequence[int] | None, source: str,
                             where: str = "response") -> PositionCounts | None:
    """Per-position counts from a per-request accept histogram (index = drafts accepted in
    a step, value = steps): position i was accepted in every step that accepted more than i.
    None for an absent or empty histogram."""
    if not histogram or sum(histogram) <= 0:
        return None
    accepted = [sum(histogram[i + 1:]) for i in range(len(histogram) - 1)]
    return _checked(accepted, sum(histogram), source, where)


def commit_along(commits: Sequence[int], first_token: bool = True,
                 every: int = ALONG_TOKENS) -> list[float]:
    """Avg commit per ``every`` output tokens, from the tokens each verify step committed
    in order: a step counts in the stretch its first token falls in (the first output token
    comes from prefill when ``first_token``)."""
    tokens: dict[int, int] = {}
    steps: dict[int, int] = {}
    at = 1 if first_token else 0
    for count in commits:
        bucket = at // every
        tokens[bucket] = tokens.get(bucket, 0) + count
        steps[bucket] = steps.get(bucket, 0) + 1
        at += count
    return [tokens[b] / steps[b] for b in sorted(steps)]


def _columns(rows: Iterable[Sequence[float | None]]) -> list[list[float]]:
    """Each index's values over ``rows`` (Nones and missing entries left out), up to the
    widest index any row has."""
    values: dict[int, list[float]] = {}
    for row in rows:
        for i, value in enumerate(row):
            if value is not None:
                values.setdefault(i, []).append(float(value))
    return [values.get(i, []) for i in range(max(values, default=-1) + 1)]


def mean_by_index(rows: Iterable[Sequence[float | None]]) -> list[float | None]:
    """The mean of each index over ``rows`` (Nones and missing entries left out)."""
    return [sum(c) / len(c) if c else None for c in _columns(rows)]


def half_width_by_index(rows: Iterable[Sequence[float | None]]) -> list[float | None]:
    """The 95 % half-width of each index's mean over ``rows`` (Student t over the rows that
    have it); None where fewer than two do."""
    return [_half_width(c) for c in _columns(rows)]


def _half_width(values: Sequence[float]) -> float | None:
    if len(values) < 2:
        return None
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    return t_quantile(0.975, len(values) - 1) * sd / math.sqrt(len(values))


def sample_rates(raw: Mapping[str, Any]) -> list[float | None] | None:
    """A sample's conditional rates per position, from its raw ``accepted_per_pos`` and
    ``drafts`` (None when it has none)."""
    accepted, drafts = raw.get("accepted_per_pos"), raw.get("drafts")
    if not isinstance(accepted, list) or not isinstance(drafts, (int, float)):
        return None
    return conditional_rates([float(a) for a in accepted], float(drafts))


def shape_rows(raws: Iterable[Mapping[str, Any]]
               ) -> tuple[list[list[float | None]], list[list[float | None]]]:
    """Each measured sample's conditional rates per draft position and its avg commit per
    ``ALONG_TOKENS`` output tokens, from their raw fields (samples without them left out)."""
    raws = list(raws)
    rates = [r for raw in raws if (r := sample_rates(raw)) is not None]
    curves = [list(c) for raw in raws if isinstance(c := raw.get("commit_along"), list)]
    return rates, curves


def case_shape(raws: Iterable[Mapping[str, Any]]
               ) -> tuple[list[float | None], list[float | None]]:
    """A case's acceptance shape from its measured samples' raw fields: the mean conditional
    rate per draft position and the mean avg commit per ``ALONG_TOKENS`` output tokens."""
    rates, curves = shape_rows(raws)
    return mean_by_index(rates), mean_by_index(curves)
