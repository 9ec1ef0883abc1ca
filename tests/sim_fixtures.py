"""Fixtures that run the simulator as a real process on loopback (imported via pytest_plugins)."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

READY_PREFIX = "specperf-sim listening on "
_START_TIMEOUT_S = 30.0


@dataclass
class SimProcess:
    """A running simulator: its URL and the process behind it."""

    url: str
    process: subprocess.Popen[str]
    log_file: Path | None = None
    stderr_lines: list[str] = field(default_factory=list)
    readers: list[threading.Thread] = field(default_factory=list)
    terminated: bool = False

    def terminate(self) -> None:
        """SIGTERM once, without waiting (``stop`` waits): many simulators stop together."""
        if self.process.poll() is None and not self.terminated:
            self.process.send_signal(signal.SIGTERM)
            self.terminated = True

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM, wait, kill as a last resort; returns the exit code."""
        self.terminate()
        if self.process.poll() is None:
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
        code = self.process.wait()
        for reader in self.readers:
            reader.join(timeout=2)
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()
        return code


def launch_sim(
    profile: str = "kimi-k26-ddtree",
    time_scale: float = 0.02,
    extra_args: tuple[str, ...] | list[str] = (),
    log_file: Path | None = None,
) -> SimProcess:
    """Start ``python -m specperf.sim --port 0`` and wait for its URL line."""
    cmd = [sys.executable, "-m", "specperf.sim", "--port", "0", "--profile", profile,
           "--time-scale", str(time_scale), *extra_args]
    if log_file is not None:
        cmd += ["--log-file", str(log_file)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=env)
    sim = SimProcess(url="", process=process, log_file=log_file)
    sim.url = _read_url(sim)
    return sim


def _read_url(sim: SimProcess) -> str:
    assert sim.process.stdout is not None and sim.process.stderr is not None
    lines: queue.Queue[str] = queue.Queue()
    sim.readers = [
        threading.Thread(target=_pump, args=(sim.process.stdout, lines), daemon=True),
        threading.Thread(target=_collect, args=(sim.process.stderr, sim.stderr_lines),
                         daemon=True),
    ]
    for reader in sim.readers:
        reader.start()
    try:
        line = lines.get(timeout=_START_TIMEOUT_S)
    except queue.Empty:
        line = ""
    if not line.startswith(READY_PREFIX):
        sim.stop(timeout=2)  # also joins the stderr reader, so the message is complete
        stderr = "".join(sim.stderr_lines)
        pytest.fail(f"simulator did not announce its URL (got {line!r}); stderr:\n{stderr}")
    return line[len(READY_PREFIX):].strip()


def _pump(stream: object, lines: queue.Queue[str]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        lines.put(line)
    lines.put("")  # EOF: the process died before announcing itself


def _collect(stream: object, sink: list[str]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        sink.append(line)


@pytest.fixture(scope="session")
def start_sim() -> Iterator[Callable[..., SimProcess]]:
    """Factory ``start_sim(profile=, time_scale=, extra_args=, log_file=)``; stops all at end."""
    started: list[SimProcess] = []

    def start(
        profile: str = "kimi-k26-ddtree",
        # 0.5: a request of the suite's short cases lasts 0.1-0.5 s of wall time, long against
        # a loaded 2-core box's scheduling delays, which the client's wall time (and tok/s, in
        # simulated time: wall / scale) would otherwise amplify into unstable cells.
        time_scale: float = 0.5,
        extra_args: tuple[str, ...] | list[str] = (),
        log_file: Path | None = None,
    ) -> SimProcess:
        sim = launch_sim(profile, time_scale, extra_args, log_file)
        started.append(sim)
        return sim

    try:
        yield start
    finally:
        for sim in started:  # all shut down at once: each takes about a second
            sim.terminate()
        for sim in started:
            sim.stop()


@pytest.fixture(scope="session")
def sim_server(start_sim: Callable[..., SimProcess]) -> SimProcess:
    """The default-profile simulator at time scale 0.02, shared by the session."""
    return start_sim(time_scale=0.02)


@pytest.fixture(scope="module")
def module_sim(start_sim: Callable[..., SimProcess]) -> SimProcess:
    """A default-profile simulator of the module's own at time scale 0.5 (whole perf
    sessions against it: see ``start_sim``)."""
    return start_sim(time_scale=0.5)


@pytest.fixture
def clean_sim(module_sim: SimProcess) -> SimProcess:
    """The module's simulator with its faults and background traffic reset for this test."""
    httpx.post(f"{module_sim.url}/_sim/reset").raise_for_status()
    return module_sim
