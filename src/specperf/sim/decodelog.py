"""SGLang-format ``Decode batch`` log lines, one per ``decode_log_interval`` verify steps.

Current format (SGLang 0.5.x)::

    [2026-11-29 10:00:00 TP0] Decode batch, #running-req: 1, #token: 10234, token usage: ...
    ... 0.01, accept len: 4.50, accept rate: 0.23, cuda graph: True, gen throughput ...
    ... (token/s): 604.01, #queue-req: 0

(one line). The legacy format (SGLang 0.4.10 managers/scheduler_metrics_mixin.py) is ``[...]
Decode batch. #running-req: 1, #token: 10234, token usage: 0.01, accept len: 4.50, cuda graph:
True, gen throughput (token/s): 604.01, #queue-req: 0, `` (period, no accept rate, trailing
comma); both carry the logger's ``[time TP0]`` prefix. With ``SGLANG_LOG_FORWARD_ITERS=1``
(profile flag ``log_forward_iters``) the current line reads ``Decode batch [N], ...`` with the
forward iteration N (managers/scheduler_components/metrics_reporter.py). ``accept len``
is committed tokens per request-verify-step over the window; ``accept rate`` is
(accept len - 1) / draft tokens per step; throughput is committed tokens per wall second of
the window.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TextIO

from specperf.sim.metrics import SimMetrics
from specperf.sim.observer import PrefillReport, StepReport
from specperf.sim.request import SimRequest
from specperf.sim.vllm_metrics import VllmMetrics

_MAX_TOTAL_TOKENS = 1_000_000  # KV pool size behind "token usage"


class DecodeLog:
    """Accumulates a window of steps and writes a line when it is full; a scheduler observer."""

    def __init__(
        self,
        path: Path | None,
        interval: int,
        legacy: bool,
        draft_tokens: int,
        metrics: SimMetrics | VllmMetrics | None,
        forward_iters: bool = False,
    ) -> None:
        self._forward_iters = forward_iters
        self._iterations = 0
        self._file: TextIO | None = path.open("a", encoding="utf-8") if path else None
        self._interval = max(1, interval)
        self._legacy = legacy
        self._draft_tokens = max(1, draft_tokens)
        self._metrics = metrics
        self._steps = 0
        self._request_steps = 0
        self._committed = 0
        self._wall = 0.0

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def on_step(self, report: StepReport) -> None:
        self._iterations += 1
        self._steps += 1
        self._request_steps += len(report.batch)
        self._committed += report.committed
        self._wall += report.wall_s
        if self._steps >= self._interval:
            self._emit(report)
            self._steps = self._request_steps = self._committed = 0
            self._wall = 0.0

    def on_prefill(self, report: PrefillReport) -> None:
        return None

    def on_first_token(self, request: SimRequest) -> None:
        return None

    def on_finish(self, request: SimRequest) -> None:
        return None

    def _emit(self, report: StepReport) -> None:
        accept_len = self._committed / max(self._request_steps, 1)
        accept_rate = min(max((accept_len - 1.0) / self._draft_tokens, 0.0), 1.0)
        throughput = self._committed / self._wall if self._wall > 0 else 0.0
        if self._metrics is not None:
            self._metrics.set_window(accept_len, accept_rate, throughput)
        if self._file is None:
            return
        line = format_line(len(report.batch), report.context_tokens, accept_len, accept_rate,
                           throughput, report.queued, self._legacy,
                           self._iterations if self._forward_iters else None)
        self._file.write(line + "\n")
        self._file.flush()


def format_line(
    running: int,
    tokens: int,
    accept_len: float,
    accept_rate: float,
    throughput: float,
    queued: int,
    legacy: bool,
    iteration: int | None = None,
) -> str:
    """One decode log line in SGLang's current or legacy format."""
    usage = tokens / _MAX_TOTAL_TOKENS
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    if legacy:
        return (
            f"[{stamp} TP0] Decode batch. #running-req: {running}, #token: {tokens}, "
            f"token usage: {usage:.2f}, "
            f"accept len: {accept_len:.2f}, cuda graph: True, "
            f"gen throughput (token/s): {throughput:.2f}, #queue-req: {queued}, "
        )
    iters = "" if iteration is None else f" [{iteration}]"
    return (
        f"[{stamp} TP0] Decode batch{iters}, #running-req: {running}, #token: {tokens}, "
        f"token usage: {usage:.2f}, accept len: {accept_len:.2f}, "
        f"accept rate: {accept_rate:.2f}, cuda graph: True, "
        f"gen throughput (token/s): {throughput:.2f}, #queue-req: {queued}"
    )
