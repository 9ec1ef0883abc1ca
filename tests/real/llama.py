"""Real ``llama-server`` processes for the real-server tier: found or built, started on a free
loopback port, waited for, and stopped cleanly.

The binary is ``$SPECPERF_LLAMA_SERVER`` when set, else whatever ``ci/build-llama-server.sh``
prints (it builds once, about 6 minutes on 2 cores, and reuses its cache afterwards).
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = ROOT / "ci" / "build-llama-server.sh"


# One thread, raised priority: on 2 cores shared with other work, two spinning threads
# per server lose whole time slices (steps 10x slower, 20 % noise), and the server under
# test should see the machine as it would a dedicated one.
PRIORITY = ("--prio", "2", "--prio-batch", "2")


def wait_healthy(server: Any, what: str, timeout_s: float, poll_s: float) -> None:
    """Until ``server.url``/health answers 200; a server that exits or stays silent is a
    ServerSetupError with its command and log tail (the server is stopped first)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise ServerSetupError(f"{what} exited {server.proc.returncode} at start "
                                   f"({server.command}): {server.log_tail()}")
        try:
            if httpx.get(server.url + "/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(poll_s)
    server.stop()
    raise ServerSetupError(f"{what} did not answer /health within {timeout_s:g} s "
                           f"({server.command}): {server.log_tail()}")


class ServerSetupError(RuntimeError):
    """The tier cannot get a server running: an infrastructure error, never a skip."""


def cached_executable(variable: str, build_script: Path, what: str) -> Path:
    """``$variable`` when it names an executable, else what ``build_script`` builds (or has
    cached) and prints on its last line; either failure is a ServerSetupError."""
    given = os.environ.get(variable)
    if given:
        path = Path(given)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ServerSetupError(
                f"{variable}={given} is not an executable file: point it at {what}, or "
                f"unset it to build one with {build_script}.")
        return path
    done = subprocess.run(["bash", str(build_script)], capture_output=True, text=True,
                          timeout=3600, check=False)
    if done.returncode != 0:
        raise ServerSetupError(
            f"{build_script} failed (exit {done.returncode}): {done.stderr.strip()[-800:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def find_binary() -> Path:
    """``$SPECPERF_LLAMA_SERVER``, else the cached (or freshly built) binary."""
    return cached_executable("SPECPERF_LLAMA_SERVER", BUILD_SCRIPT, "a llama-server binary")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class LlamaServer:
    """One ``llama-server`` on 127.0.0.1; its log goes to ``log_path``::

        with LlamaServer(binary, target, draft=draft, log_path=p) as server:
            httpx.get(server.url + "/health")
    """

    def __init__(self, binary: Path, model: Path, *, draft: Path | None = None,
                 log_path: Path, threads: int = 1, slots: int = 1, ctx: int = 4096,
                 extra: tuple[str, ...] = ()) -> None:
        self.binary = binary
        self.log_path = log_path
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        spec = ("-md", str(draft), "--spec-type", "draft-simple") if draft else ()
        # -c is shared out among the slots: give each slot the context asked for.
        self.argv = [str(binary), "-m", str(model), *spec, "--host", "127.0.0.1",
                     "--port", str(self.port), "-c", str(ctx * slots), "-np", str(slots),
                     "-t", str(threads), "--metrics", "--no-webui", *PRIORITY, *extra]
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def command(self) -> str:
        return " ".join(self.argv)

    def start(self, timeout_s: float = 60.0) -> None:
        log = self.log_path.open("wb")
        self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        log.close()
        wait_healthy(self, "llama-server", timeout_s, poll_s=0.1)

    def log_tail(self, chars: int = 1500) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> LlamaServer:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


class LlamaPool:
    """Started servers shared by the tier's tests, one per configuration (model, draft,
    slots, extra flags): each starts the first time a test asks for it and stops when the
    session ends. A server that exited is started afresh. Its counters are cumulative, so
    the tests read deltas (the suite's own guard does too)."""

    def __init__(self, binary: Path, log_dir: Path) -> None:
        self.binary = binary
        self.log_dir = log_dir
        self._servers: dict[tuple[Any, ...], LlamaServer] = {}
        self._started = 0

    def get(self, model: Path, *, draft: Path | None = None, slots: int = 1,
            extra: tuple[str, ...] = ()) -> LlamaServer:
        """The running server of this configuration (started now if it is not)."""
        key = (model, draft, slots, extra)
        server = self._servers.get(key)
        if server is None or server.proc is None or server.proc.poll() is not None:
            server = LlamaServer(self.binary, model, draft=draft, slots=slots, extra=extra,
                                 log_path=self.log_dir / f"llama-{self._started}.log")
            self._started += 1
            server.start()
            self._servers[key] = server
        return server

    def stop_all(self) -> None:
        for server in self._servers.values():
            server.stop()
