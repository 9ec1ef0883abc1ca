"""One lock per server, whatever the endpoint calls it (issue 13).

``127.0.0.1``, ``localhost``, this machine's host name or any address of its interfaces,
with or without a trailing slash, a path or the default port, name one lock; a remote host is
named by its resolved address. Two real runs against one simulator, named ``127.0.0.1`` and
``localhost``, are serialised: the second waits and names the holder.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from specperf.measure.holder import read_holder
from specperf.measure.identity import server_identity
from specperf.measure.lock import lock_path_for

ROOT = Path(__file__).resolve().parents[1]


def _machine_addresses() -> list[str]:
    infos = socket.getaddrinfo(socket.gethostname(), None, type=socket.SOCK_STREAM)
    return sorted({str(i[4][0]) for i in infos})


def test_every_local_spelling_of_one_server_is_one_lock(tmp_path: Path) -> None:
    port = 30000
    spellings = ["http://127.0.0.1:30000", "http://localhost:30000/", "localhost:30000",
                 "http://LOCALHOST:30000/v1/chat", "http://[::1]:30000",
                 f"http://{socket.gethostname()}:30000", "http://127.0.0.2:30000/",
                 *(f"http://[{a}]:{port}" if ":" in a else f"http://{a}:{port}"
                   for a in _machine_addresses())]
    paths = {lock_path_for(e, tmp_path) for e in spellings}
    assert paths == {tmp_path / "gpu-localhost-30000.lock"}, spellings
    assert lock_path_for("http://127.0.0.1:30001", tmp_path) != lock_path_for(
        "http://127.0.0.1:30000", tmp_path)  # another port, another server


def test_the_default_port_is_the_schemes(tmp_path: Path) -> None:
    assert server_identity("http://localhost") == server_identity("http://localhost:80/")
    assert server_identity("https://localhost/") == ("localhost", 443)


def test_a_remote_host_is_named_by_its_resolved_address(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    # No DNS on the test machine: a name that resolves to a documentation address (which no
    # interface here carries) stands in for a remote GPU box.
    real = socket.getaddrinfo

    def resolve(host: str, *args: Any, **kwargs: Any) -> Any:
        if host in ("gpu-box", "gpu-box.lab", "198.51.100.7"):
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("198.51.100.7", 30000))]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    names = {server_identity(e) for e in ("http://gpu-box:30000", "http://GPU-Box.lab:30000/",
                                          "http://198.51.100.7:30000/v1")}
    assert names == {("198.51.100.7", 30000)}


# -- two real runs -----------------------------------------------------------------------------
def _run(project: Path, url: str, lock_dir: Path, context: int, output: int, repeats: int = 3
         ) -> subprocess.Popen[str]:
    env = {**os.environ, "SPECPERF_LOCK_DIR": str(lock_dir), "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
         "-v", "-m", "context_scaling", "--endpoint", url, f"--output-tokens={output}",
         f"--contexts={context}", "--text-classes=padding", f"--repeats={repeats}",
         f"--max-repeats={max(repeats, 8)}", "test_context_scaling.py"],
        cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _spans(url: str, prompt: int) -> tuple[float, float]:
    """First arrival and last finish of the measured requests of one prompt length."""
    truth = httpx.get(f"{url}/_sim/truth").json()["requests"]
    mine = [r for r in truth if r["prompt_tokens"] == prompt and not r["background"]]
    assert mine
    return min(r["received_mono"] for r in mine), max(r["finished_mono"] for r in mine)


@pytest.mark.slow  # two whole perf sessions
def test_two_runs_naming_one_server_differently_are_serialised(pytester: pytest.Pytester,
                                                               start_sim: Any,
                                                               tmp_path: Path) -> None:
    # No race with the box's load: every request of the first run hangs 2 s (a simulator
    # fault) until the second run has said it waits, and the first sends 31 of them, so it
    # holds the lock for a minute however slowly the second starts (with 4 requests, 8 s, a
    # loaded box once started the second after the first had finished); then the fault is
    # lifted and both finish.
    sim = start_sim(time_scale=0.5)
    port = sim.url.rsplit(":", 1)[1]
    pytester.path.joinpath("test_context_scaling.py").write_text(
        (ROOT / "perf_tests" / "test_context_scaling.py").read_text())
    lock_dir = tmp_path / "locks"
    lock = lock_dir / f"gpu-localhost-{port}.lock"
    httpx.post(f"{sim.url}/_sim/faults", json={"hang_s": 2.0}).raise_for_status()
    first = _run(pytester.path, f"http://127.0.0.1:{port}", lock_dir, 300, 64, repeats=30)
    deadline = time.monotonic() + 120
    while read_holder(lock) is None:  # the first run holds the lock
        assert first.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    holder = read_holder(lock)
    assert holder is not None and holder.pid == first.pid
    second = _run(pytester.path, f"http://localhost:{port}/", lock_dir, 400, 64)
    assert second.stdout is not None
    seen = []
    for line in second.stdout:  # until the second run says it waits for the first
        seen.append(line)
        if "waiting for the GPU lock" in line:
            break
    httpx.post(f"{sim.url}/_sim/faults", json={"hang_s": 0.0}).raise_for_status()
    out_first, _ = first.communicate(timeout=300)
    rest, _ = second.communicate(timeout=300)
    out_second = "".join(seen) + rest
    assert first.returncode == 0, out_first
    assert second.returncode == 0, out_second
    assert (f"specperf: waiting for the GPU lock {lock} held by {holder.describe()}; waited 0 s"
            in out_second), out_second
    start_first, end_first = _spans(sim.url, 300)
    start_second, end_second = _spans(sim.url, 400)
    assert end_first <= start_second, json.dumps([start_first, end_first, start_second])
