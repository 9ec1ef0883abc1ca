"""Run the simulator under uvicorn on a pre-bound socket, so port 0 yields a known port."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import signal
import socket
import sys
from pathlib import Path
from types import FrameType

import uvicorn

from specperf.sim import READY_PREFIX
from specperf.sim.app import build_app, build_state
from specperf.sim.profile import Profile


class _DroppedResponseFilter(logging.Filter):
    """Hide uvicorn's complaint about the responses the drop fault abandons on purpose."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "without completing response" not in record.getMessage()


class _Server(uvicorn.Server):
    """uvicorn re-raises the stop signal after a graceful shutdown (exit status -15); the
    simulator's contract is a clean exit 0 on SIGTERM/SIGINT, so the signal is only noted."""

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True  # a second Ctrl-C skips the graceful wait
        else:
            self.should_exit = True


def is_loopback(host: str) -> bool:
    """True for localhost and loopback addresses."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (port 0 picks a free one)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto IPPROTO_TCP matters: asyncio only disables Nagle on accepted sockets whose proto
    # says TCP, and with Nagle on, split response writes meet the client's delayed ACK (+40 ms).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def serve(
    profile: Profile,
    host: str,
    port: int,
    time_scale: float,
    seed: int,
    log_file: Path | None,
) -> int:
    """Serve until SIGTERM/SIGINT; returns the process exit code."""
    if not is_loopback(host):
        print(f"specperf-sim: warning: listening on {host}, beyond loopback", file=sys.stderr)
    logging.getLogger("uvicorn.error").addFilter(_DroppedResponseFilter())
    sock = bind(host, port)
    state = build_state(profile, time_scale, seed, log_file)
    config = uvicorn.Config(build_app(state), log_level="warning", access_log=False,
                            lifespan="on", timeout_graceful_shutdown=2)
    server = _Server(config)
    asyncio.run(_run(server, sock, host))
    return 0


async def _run(server: uvicorn.Server, sock: socket.socket, host: str) -> None:
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():
            await task  # surfaces the startup error
            return
        await asyncio.sleep(0.01)
    bound_port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    print(f"{READY_PREFIX}http://{shown}:{bound_port}", flush=True)
    await task
