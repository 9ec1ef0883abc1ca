"""`specperf bisect` at a URL that is no LLM server, and stopped by Ctrl-C (issue 49).

Real HTTP servers on loopback: a plain file server (404 HTML on /health), a JSON API
answering 200 on /health, and a proxy whose error page turns into another site's page once a
deploy ran. The deploy command logs each call, so the tests see how many deploys and
restores bisect started (never the wall clock): identified before the first deploy, a wrong
URL costs none; found wrong after a deploy, no restore follows.
"""

from __future__ import annotations

import argparse
import http.server
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from functools import partial
from pathlib import Path

import pytest

from loopback import serving
from specperf.cli import explain, main
from specperf.measure.lock import GpuLock, lock_path_for

PROXY_PAGE = (b"<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad "
              b"Gateway</h1></center><hr><center>nginx</center></body></html>")
OTHER_SITE = b"<!DOCTYPE html><html><head><title>Not Found</title></head><body>no</body></html>"
DEPLOY = "import pathlib, sys; pathlib.Path(sys.argv[1]).open('a').write(sys.argv[2] + '\\n')"


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        return None


class _Handler(http.server.BaseHTTPRequestHandler):
    def _send(self, status: int, kind: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return None


class HealthyJsonApi(_Handler):
    """200 on /health, as many services answer; no LLM route."""

    def do_GET(self) -> None:
        if self.path == "/health":
            self._send(200, "application/json", b'{"status": "ok"}')
        else:
            self._send(404, "application/json", b'{"detail": "Not Found"}')


class ProxyThenOtherSite(_Handler):
    """A proxy's 502 page (the server behind it down) until ``flag`` exists, then the 404
    page of a site that is no LLM server."""

    flag: Path

    def do_GET(self) -> None:
        if self.flag.exists():
            self._send(404, "text/html", OTHER_SITE)
        else:
            self._send(502, "text/html", PROXY_PAGE)


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[[type], str]]:
    with ExitStack() as stack:
        def start(handler: type) -> str:
            chosen = partial(Quiet, directory=str(tmp_path)) if handler is Quiet else handler
            return stack.enter_context(serving(chosen))

        yield start


@pytest.fixture
def box(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    monkeypatch.setenv("SPECPERF_LOCK_DIR", str(tmp_path / "locks"))
    versions = tmp_path / "versions.txt"
    versions.write_text("a\nb\nc\n", encoding="utf-8")
    return {"versions": versions, "calls": tmp_path / "calls.txt", "locks": tmp_path / "locks"}


def _deploy(calls: Path, then: str = "") -> str:
    """A deploy command that logs the version it was given (and runs ``then`` after)."""
    script = DEPLOY + (f"; {then}" if then else "")
    return shlex.join([sys.executable, "-c", script, str(calls)]) + " {version}"


def _calls(box: dict[str, Path]) -> list[str]:
    path = box["calls"]
    return path.read_text(encoding="utf-8").split() if path.exists() else []


def _bisect(url: str, box: dict[str, Path], deploy: str) -> list[str]:
    return ["bisect", "--endpoint", url, "--versions", str(box["versions"]), "--deploy", deploy,
            "--deploy-timeout", "600"]


def test_a_file_server_is_exit_2_before_any_deploy_in_explains_words(
        serve: Callable[[type], str], box: dict[str, Path],
        capsys: pytest.CaptureFixture[str]) -> None:
    url = serve(Quiet)
    assert main(_bisect(url, box, _deploy(box["calls"]))) == 2
    captured = capsys.readouterr()
    sentence = (f"{url} (from --endpoint) is not an LLM server: GET /health answered "
                "HTTP 404 with an HTML page titled 'Error response', a web server's or proxy's "
                "error page. Point --endpoint at the SGLang, vLLM or llama.cpp server itself.")
    assert captured.err == f"specperf bisect: {sentence}\n"
    assert captured.out == ""
    assert _calls(box) == []  # no deploy, so no deploy wait and no restore
    parser = argparse.ArgumentParser(prog="specperf")
    explain.add_subcommand(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["explain", "--endpoint", url, "--window", "1"])
    assert args.run(args) == 2
    assert capsys.readouterr().err == f"specperf explain: {sentence}\n"


def test_a_json_api_healthy_on_health_is_exit_2_before_any_deploy(
        serve: Callable[[type], str], box: dict[str, Path],
        capsys: pytest.CaptureFixture[str]) -> None:
    url = serve(HealthyJsonApi)
    assert main(_bisect(url, box, _deploy(box["calls"]))) == 2
    assert capsys.readouterr().err == (
        f"specperf bisect: {url} (from --endpoint) is not an LLM server: GET /health "
        "answered 200, but none of /v1/models, /server_info and /props answers with JSON. "
        "Point --endpoint at the SGLang, vLLM or llama.cpp server itself.\n")
    assert _calls(box) == []


def test_a_url_found_wrong_after_a_deploy_ends_the_wait_and_restores_nothing(
        serve: Callable[[type], str], box: dict[str, Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    flag = tmp_path / "deployed"
    handler = type("Flip", (ProxyThenOtherSite,), {"flag": flag})
    url = serve(handler)
    deploy = _deploy(box["calls"], f"pathlib.Path({str(flag)!r}).touch()")
    assert main(_bisect(url, box, deploy)) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (f"specperf bisect: {url} does not serve yet (GET /health answered HTTP "
                      "502): the first deploy should start it")
    assert "specperf bisect: deploying a" in err
    assert err[-1] == (
        f"specperf bisect: {url} (from --endpoint) is not an LLM server: GET /health "
        "answered HTTP 404 with an HTML page titled 'Not Found', a web server's or proxy's "
        "error page. Point --endpoint at the SGLang, vLLM or llama.cpp server itself. The "
        "deploy of a ran before that answer; nothing was restored.")
    assert _calls(box) == ["a"]  # the good end's deploy alone: no second wait, no restore
    with GpuLock(lock_path_for(url, box["locks"]), timeout_s=1):
        pass  # released


def _wait_for(predicate: Callable[[], bool], proc: subprocess.Popen[str], what: str) -> None:
    deadline = time.monotonic() + 60
    while not predicate():
        assert proc.poll() is None, f"bisect ended before {what}"
        assert time.monotonic() < deadline, f"no {what} within 60 s"
        time.sleep(0.05)  # polling an observable state, bounded by the deadline


class Proxy(_Handler):
    """A proxy whose server behind it stays down: bisect waits on it."""

    def do_GET(self) -> None:
        self._send(502, "text/html", PROXY_PAGE)


def test_ctrl_c_during_a_deploy_wait_is_one_line_exit_130_and_the_lock_is_freed(
        serve: Callable[[type], str], box: dict[str, Path]) -> None:
    url = serve(Proxy)
    deploy = _deploy(box["calls"])
    env = {**os.environ, "SPECPERF_LOCK_DIR": str(box["locks"]), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "specperf.cli", *_bisect(url, box, deploy)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: _calls(box) == ["a"], proc, "the good end's deploy")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    restore = shlex.join([sys.executable, "-c", DEPLOY, str(box["calls"]), "c"])
    assert err.splitlines()[-1] == (
        "specperf bisect: interrupted during the deploy of a: what the box runs is unknown; "
        f"deploy c again with `{restore}`.")
    assert "Traceback" not in err and out == ""
    assert _calls(box) == ["a"]  # Ctrl-C starts no restore
    with GpuLock(lock_path_for(url, box["locks"]), timeout_s=1):
        pass
