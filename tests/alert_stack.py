"""The alert path's three servers on loopback, as docs/dashboards.md starts them by hand: a
Pushgateway, a Prometheus scraping it with the shipped rules file, an Alertmanager sending to
a webhook. Debian's packages (.ci/run installs them); each server gets a free loopback port,
its own config and data directory under the test's temp dir, never the system services.

A missing binary is a failure, not a skip: CI treats a skip as a failure anyway, and
.ci/run installs them. Every process is stopped on the way out, also when a start fails::

    with WebhookReceiver() as hook, alert_stack(tmp_path, RULES, hook.url) as stack:
        push to stack.pushgateway; hook.wait_for(lambda alerts: ..., deadline_s=45)
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
import pytest
import yaml

BINARIES = {"pushgateway": "prometheus-pushgateway", "alertmanager": "prometheus-alertmanager",
            "prometheus": "prometheus"}
READY_DEADLINE_S = 30.0
POLL_S = 0.1  # between readiness probes: each probe asks the server itself, bounded by the deadline


def binary(kind: str) -> str:
    """The server's path; a missing one fails the test, naming the package to install."""
    found = shutil.which(BINARIES[kind])
    if found is None:
        pytest.fail(f"{BINARIES[kind]} is not installed: apt-get install -y "
                    "prometheus prometheus-pushgateway prometheus-alertmanager (.ci/run does)")
    return found


def free_port() -> int:
    """A loopback port nothing listens on right now (the server binds it next)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    """One started server: its name, its URL, its process and where its log goes."""

    name: str
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def wait_ready(self, deadline_s: float = READY_DEADLINE_S) -> None:
        """Until ``/-/ready`` answers 200; fails with the server's log if it exits or the
        deadline passes."""
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            if self.process.poll() is not None:
                pytest.fail(f"{self.name} exited ({self.process.returncode}):\n{self.tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/-/ready", timeout=2).status_code == 200:
                    return
            time.sleep(POLL_S)
        pytest.fail(f"{self.name} not ready at {self.url} in {deadline_s:.0f} s:\n{self.tail()}")

    def stop(self) -> None:
        """Terminate, then kill if it does not exit within 10 s."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def _start(name: str, args: list[str], url: str, folder: Path) -> Server:
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "log"
    with log.open("wb") as out:
        process = subprocess.Popen([binary(name), *args], stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
    return Server(name, url, process, log)


@dataclass(frozen=True)
class Stack:
    """The three started servers' URLs."""

    pushgateway: str
    alertmanager: str
    prometheus: str


def alertmanager_config(webhook_url: str) -> dict[str, Any]:
    """One route to one webhook; group_wait short so the test sees the alert within seconds
    (a production route waits ~30 s to batch an evaluation's alerts)."""
    return {"route": {"receiver": "webhook", "group_by": ["alertname", "deployment"],
                      "group_wait": "1s", "group_interval": "1s", "repeat_interval": "1h"},
            "receivers": [{"name": "webhook", "webhook_configs": [
                {"url": webhook_url, "send_resolved": False}]}]}


def prometheus_config(pushgateway: str, alertmanager: str, rules: Path) -> dict[str, Any]:
    """Scrape the Pushgateway every second, keeping the pushed ``job`` and ``deployment``
    labels (honor_labels), evaluate ``rules`` every second, alert to the Alertmanager."""
    return {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(rules)],
            "alerting": {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]},
            "scrape_configs": [{"job_name": "pushgateway", "honor_labels": True,
                                "static_configs": [{"targets": [pushgateway]}]}]}


@contextlib.contextmanager
def alert_stack(root: Path, rules: Path, webhook_url: str) -> Iterator[Stack]:
    """Pushgateway, Alertmanager and Prometheus started under ``root``, ready, stopped after."""
    ports = {name: free_port() for name in BINARIES}
    hosts = {name: f"127.0.0.1:{port}" for name, port in ports.items()}
    (root / "alertmanager").mkdir(parents=True)
    (root / "prometheus").mkdir(parents=True)
    am_config = root / "alertmanager" / "alertmanager.yml"
    am_config.write_text(yaml.safe_dump(alertmanager_config(webhook_url)))
    prom_config = root / "prometheus" / "prometheus.yml"
    prom_config.write_text(yaml.safe_dump(prometheus_config(
        hosts["pushgateway"], hosts["alertmanager"], rules)))
    commands = {
        "pushgateway": [f"--web.listen-address={hosts['pushgateway']}",
                        f"--persistence.file={root / 'pushgateway' / 'metrics.data'}"],
        "alertmanager": [f"--web.listen-address={hosts['alertmanager']}",
                         f"--config.file={am_config}", f"--storage.path={root / 'alertmanager'}",
                         "--cluster.listen-address="],  # no gossip port: a single instance
        "prometheus": [f"--web.listen-address={hosts['prometheus']}",
                       f"--config.file={prom_config}",
                       f"--storage.tsdb.path={root / 'prometheus' / 'data'}"]}
    started: list[Server] = []
    try:
        for name, args in commands.items():
            started.append(_start(name, args, f"http://{hosts[name]}", root / name))
        for server in started:
            server.wait_ready()
        yield Stack(*(f"http://{hosts[name]}" for name in commands))
    finally:
        for server in reversed(started):
            server.stop()


class WebhookReceiver:
    """Alertmanager's webhook receiver in the test process: records each POST's JSON body on
    a free loopback port; :meth:`wait_for` blocks until the bodies satisfy a condition."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.received_at: list[float] = []  # unix time each body arrived
        self._changed = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver._changed:
                    receiver.bodies.append(json.loads(body))
                    receiver.received_at.append(time.time())
                    receiver._changed.notify_all()
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:  # keep the test's output clean
                pass

        self._server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_port}/alerts"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> WebhookReceiver:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def alerts(self) -> list[dict[str, Any]]:
        """Every alert of every body received, in arrival order."""
        with self._changed:
            return [a for body in self.bodies for a in body.get("alerts", [])]

    def wait_for(self, done: Callable[[list[dict[str, Any]]], bool], deadline_s: float) -> bool:
        """True once ``done(alerts())`` holds, False if ``deadline_s`` passes first."""
        with self._changed:
            return self._changed.wait_for(
                lambda: done([a for b in self.bodies for a in b.get("alerts", [])]),
                timeout=deadline_s)
