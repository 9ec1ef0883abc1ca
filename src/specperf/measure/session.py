"""One measuring session against one endpoint, shared by the pytest plugin and the CLI.

Lifecycle (owned here, explained once): ``start()`` launches the embedded simulator
when no endpoint is configured, takes the GPU lock *before the first request*, probes
the server and prepares prompts; ``measure()`` runs one case; ``close()`` releases the
lock and stops the simulator, always (also on errors and Ctrl-C). Start is lazy, so a
pytest run that collects no perf case never touches the GPU.

Lock modes: ``session`` (the default) holds the GPU lock for the whole session.
``case`` is for pytest-xdist workers whose controller already holds the session lock:
each worker then takes ``<lock>.case`` around the probe and around every case, so
workers never measure one endpoint at the same time.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from ..core.fingerprint import with_declared
from ..plan.workload import (
    CalibratedPromptBuilder,
    Case,
    Prompt,
    PromptBuilder,
    TextClass,
    load_text_classes,
)
from ..servers import routes, simulated
from ..servers.acceptance import LogSource
from ..servers.client import Client
from ..servers.probe import ServerInfo, probe, tokenizer_for
from ..settings.config import Settings
from . import lock as gpulock
from .loop import Decide, Measurer, RunConfig
from .sample import Measurement, Sample

Progress = Callable[[str], None]


class PerfSession:
    """Settings in, measurements out; see the module docstring for the lifecycle."""

    def __init__(self, settings: Settings, *, progress: Progress = lambda _: None,
                 on_sample: Callable[[Sample, int], None] | None = None,
                 lock_mode: gpulock.LockMode = "session") -> None:
        if lock_mode not in gpulock.LOCK_MODES:  # never read an unknown mode as "no lock"
            raise ValueError(f"lock_mode {lock_mode!r}: expected one of {gpulock.LOCK_MODES}")
        self.settings = settings
        self.progress = progress
        self.on_sample = on_sample
        self.lock_mode = lock_mode
        self.sim: simulated.SimProcess | None = None
        self.client: Client | None = None
        self.lock: gpulock.GpuLock | None = None
        self.server: ServerInfo | None = None
        self.measurer: Measurer | None = None
        self.classes: dict[str, TextClass] = {}
        self.measurements: dict[str, Measurement] = {}
        self.lock_wait_s = 0.0
        self.started_at = time.time()

    @property
    def url(self) -> str:
        return self.settings.endpoint or (self.sim.url if self.sim else "")

    def start(self) -> ServerInfo:
        """Everything before the first measured request; idempotent."""
        if self.server is not None:
            return self.server
        s = self.settings
        self.classes = load_text_classes(s.text_class_dir)
        if s.endpoint is None:
            self.sim = simulated.embedded(s)
        self.client = Client(self.url, api_key=s.api_key(), timeout_s=s.request_timeout)
        self._take_lock()
        source = s.sources.get("endpoint", "--endpoint") if s.endpoint else "the embedded simulator"
        with self.case_lock():
            self.server = probe(self.client, api=s.api, model=s.model,
                                wanted_source=s.acceptance_source, log_command=s.log_command,
                                simulated=s.endpoint is None, endpoint_source=source,
                                warn=lambda note: self.progress(f"specperf: {note}"))
        if s.fingerprint:  # what the user declared of the server (--specperf-fingerprint)
            self.server = replace(self.server,
                                  fingerprint=with_declared(self.server.fingerprint, s.fingerprint))
        self.measurer = self._measurer(self.client, self.server)
        return self.server

    def lock_path(self) -> Path:
        """This session's GPU lock file (known before start for a configured endpoint)."""
        return gpulock.lock_path(self.settings, self.url)

    def _take_lock(self) -> None:
        if self.lock_mode != "session":
            return
        self.lock = gpulock.GpuLock(self.lock_path(), timeout_s=self.settings.gpu_lock_timeout,
                                    endpoint=self.url, progress=self.progress,
                                    across=gpulock.across_hosts(self.settings, self.url,
                                                                self.progress))
        self.lock_wait_s = self.lock.acquire()

    def case_lock(self) -> contextlib.AbstractContextManager[object]:
        """In ``case`` mode, the per-case lock among xdist workers; else nothing."""
        if self.lock_mode != "case":
            return contextlib.nullcontext()
        path = self.lock_path().with_name(self.lock_path().name + ".case")
        return gpulock.GpuLock(path, timeout_s=self.settings.gpu_lock_timeout,
                               endpoint=self.url, progress=self.progress)

    def _measurer(self, client: Client, server: ServerInfo) -> Measurer:
        prompts: PromptBuilder | CalibratedPromptBuilder
        if server.tokenizer_path is None:
            prompts = CalibratedPromptBuilder(self._counter(client, server), self.classes)
        else:
            prompts = PromptBuilder(tokenizer_for(client, server.flavour, server.tokenizer_path),
                                    self.classes)
        s = self.settings
        run = RunConfig(repeats=s.repeats, max_repeats=s.max_repeats, warmup=s.warmup,
                        request_timeout=s.request_timeout, max_spread=s.max_spread,
                        case_repeats=dict(s.case_repeats),
                        warmup_tokens=s.warmup_output_tokens)
        log = LogSource(s.log_command) if s.log_command else None
        return Measurer(client, server, prompts, run, log=log, on_sample=self.on_sample)

    def _counter(self, client: Client, server: ServerInfo) -> Callable[[str], int]:
        """Token count of a text by the server itself: a one-token generation's prompt_tokens
        (no /tokenize route; costs a prefill per count, spent once per case)."""

        def count(text: str) -> int:
            prompt = Prompt(text=text, input_ids=None, tokens=0)
            path, body = routes.request_body(server.api, prompt, 1, server.model, "count")
            reply = client.post_json(path, body, timeout_s=self.settings.request_timeout)
            return routes.parse(server.api, reply.data).prompt_tokens

        return count

    def measure(self, case: Case, decide: Decide | None = None) -> Measurement:
        """Measure one case (the session starts on first use)."""
        self.start()
        assert self.measurer is not None
        with self.case_lock():
            measurement = self.measurer.measure(case, decide)
        self.measurements[case.id] = measurement
        return measurement

    def close(self) -> None:
        """Release everything; safe to call twice and after a failed start."""
        try:
            if self.client is not None:
                self.client.close()
            if self.lock is not None:
                self.lock.release()
        finally:
            if self.sim is not None:
                self.sim.stop()


def git_revision(root: Path | None = None) -> str:
    """The suite's git revision, or 'unknown' outside a checkout."""
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=5, cwd=root or os.getcwd(), check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.stdout.strip() or "unknown"


__all__ = ["PerfSession", "git_revision"]
