"""The simulator's door: the one module of the suite that knows the bundled simulator.

Everything else treats the simulator as the server kind it imitates. This adapter:

- starts it as a real server process on a free loopback port (:class:`SimProcess`) when no
  endpoint is configured;
- checks and names its profile before anything is measured (:func:`check_profile`,
  :func:`profile_name`);
- recognises it on the wire (:func:`identity`). The simulator marks every response with
  the header ``x-specperf-simulator: profile=<name>; time-scale=<float>``; no real server
  sends it, so a real SGLang, vLLM or llama.cpp server is never asked for a simulator route
  and never has its times rescaled. The time scale is how much faster than the modelled GPU
  the simulator runs; the measuring loop divides server and client times by it so that
  figures read like the box's.
"""

from __future__ import annotations

import io
import selectors
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import IO

from ..core.errors import ConfigError, EndpointError, EndpointUnreachable
from ..settings.config import Settings
from ..sim.profile import ProfileError, load_profile
from .client import Client

HEADER = "x-specperf-simulator"

_START_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class SimIdentity:
    """What the simulator's header announces."""

    profile: str
    time_scale: float


def header_value(profile: str, time_scale: float) -> str:
    """The header's value, as the simulator writes it."""
    return f"profile={profile}; time-scale={time_scale!r}"


def parse_header(value: str | None) -> SimIdentity | None:
    """The identity in a header value; None when absent or not in the simulator's form."""
    if not value:
        return None
    fields = dict(part.strip().partition("=")[::2] for part in value.split(";"))
    try:
        scale = float(fields.get("time-scale", ""))
    except ValueError:
        return None
    profile = fields.get("profile", "")
    return SimIdentity(profile, scale) if profile and scale > 0 else None


def identity(client: Client) -> SimIdentity | None:
    """The simulator's identity when ``client`` talks to the bundled simulator, else None.
    One ``GET /health`` (every supported server kind serves it); its headers decide."""
    try:
        headers = client.get_headers("/health", timeout_s=30)
    except EndpointError:
        return None
    return parse_header(headers.get(HEADER))


def check_profile(settings_value: str, source: str) -> None:
    """The embedded simulator's profile must load: one usage error, not one per case."""
    try:
        load_profile(settings_value)
    except ProfileError as exc:
        raise ConfigError(f"{source} = {settings_value!r} is not valid: {exc}.") from None


def embedded(settings: Settings) -> SimProcess:
    """The embedded simulator of a run without an endpoint, started."""
    sim = SimProcess(settings.sim_profile, settings.sim_time_scale)
    sim.start()
    return sim


def profile_name(settings_value: str) -> str:
    """The profile's own name (``--specperf-sim-profile`` may be a path to a profile file)."""
    return load_profile(settings_value).name


class SimProcess:
    """The simulator as a real server process on a free loopback port."""

    def __init__(self, profile: str, time_scale: float, seed: int = 0,
                 extra_args: tuple[str, ...] = ()) -> None:
        self.argv = [sys.executable, "-m", "specperf.sim", "--host", "127.0.0.1", "--port", "0",
                     "--profile", profile, "--time-scale", repr(time_scale), "--seed", str(seed),
                     *extra_args]
        self.proc: subprocess.Popen[str] | None = None
        self.stderr: IO[str] = io.StringIO()
        self.url = ""

    def start(self) -> str:
        # stderr to a file, not a pipe nobody drains: a chatty simulator must never block.
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=self.stderr,
                                     text=True, start_new_session=True)
        line = self._first_line()
        if "http://" not in line:
            err = self._stop_and_stderr()
            raise EndpointUnreachable(
                f"the embedded simulator did not start ({' '.join(self.argv[1:])}): "
                f"{err.strip()[-500:] or 'no output'}. Check --specperf-sim-profile.")
        self.url = line[line.index("http://"):].strip()
        return self.url

    def _first_line(self) -> str:
        assert self.proc is not None and self.proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        ready = sel.select(timeout=_START_TIMEOUT_S)
        sel.close()
        return self.proc.stdout.readline() if ready else ""

    def _stop_and_stderr(self) -> str:
        self._terminate()
        self.stderr.seek(0)
        text = self.stderr.read()
        self.stderr.close()
        return text

    def stop(self) -> None:
        self._terminate()
        self.stderr.close()  # the temporary file goes with the process

    def _terminate(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> SimProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


