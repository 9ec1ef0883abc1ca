"""The GPU lock across hosts (PostgreSQL's advisory lock, store/hostlock.py) against the real
server .ci/run starts: a second process waits, names the first's host and pid, and takes the
lock when the first releases it or is killed with SIGKILL; a wait past the timeout is a
GpuLockTimeout naming the holder; the file lock carries it only for a PostgreSQL store."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from specperf.core.errors import GpuLockTimeout
from specperf.measure.lock import GpuLock, across_hosts
from specperf.settings.config import Settings
from specperf.store.hostlock import HostLock
from store_fixtures import fresh_pg_database, pg_server_url

HERE = Path(__file__).resolve().parent
pytestmark = pytest.mark.skipif(pg_server_url() is None,
                                reason="SPECPERF_TEST_PG_URL is not set: start PostgreSQL "
                                       "with .ci/postgres.sh (.ci/run always does)")
SERVER = "localhost:30000"


def _holder(url: str) -> subprocess.Popen[str]:
    child = subprocess.Popen([sys.executable, str(HERE / "store_writer.py"), url, "lock",
                              SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, cwd=HERE)
    assert child.stdout is not None and child.stdout.readline().strip() == "held"
    return child


class Waiter:
    """A second run's lock taken on a thread, its progress lines kept."""

    def __init__(self, url: str, timeout_s: float = 120.0) -> None:
        self.lines: list[str] = []
        self.waiting = threading.Event()
        self.lock = HostLock(url, SERVER, (socket.gethostname(), os.getpid(), "pytest"),
                             timeout_s=timeout_s, progress=self._progress)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run)

    def _progress(self, line: str) -> None:
        self.lines.append(line)
        self.waiting.set()

    def _run(self) -> None:
        try:
            self.lock.acquire()
        except BaseException as exc:  # handed to the test
            self.error = exc


def test_a_second_run_waits_names_the_first_and_takes_the_lock_when_it_is_killed() -> None:
    url = fresh_pg_database()
    first = _holder(url)
    waiter = Waiter(url)
    try:
        waiter.thread.start()
        assert waiter.waiting.wait(60)
        assert waiter.lines[0].startswith(
            f"specperf: waiting for the GPU lock on {SERVER} across hosts (results store "
            f"{url}) held by {socket.gethostname()} pid {first.pid} since ")
        assert "(store_writer.py); waited 0 s of 120 s" in waiter.lines[0]
        assert not waiter.lock.held
        first.kill()  # SIGKILL: the server frees the lock with the connection
        first.communicate()
        waiter.thread.join(60)
        assert waiter.error is None and waiter.lock.held
        assert waiter.lock.holder().startswith(f"{socket.gethostname()} pid {os.getpid()} ")
    finally:
        first.kill()
        first.communicate()
        waiter.lock.release()


def test_a_release_passes_the_lock_on() -> None:
    url = fresh_pg_database()
    first = _holder(url)
    waiter = Waiter(url)
    try:
        waiter.thread.start()
        assert waiter.waiting.wait(60)
        assert first.communicate("\n")[0] == "released\n"
        waiter.thread.join(60)
        assert waiter.error is None and waiter.lock.held
    finally:
        first.kill()
        waiter.lock.release()


def test_a_wait_past_the_timeout_names_the_holder() -> None:
    url = fresh_pg_database()
    first = _holder(url)
    try:
        lock = HostLock(url, SERVER, ("other-host", 1, "pytest"), timeout_s=0.2)
        with pytest.raises(GpuLockTimeout) as info:
            lock.acquire()
        assert str(info.value).startswith(
            f"GPU lock on {SERVER} across hosts (results store {url}) held by "
            f"{socket.gethostname()} pid {first.pid} since ")
        assert str(info.value).endswith(
            "(store_writer.py) for longer than the 0 s timeout. Another specperf run is "
            "measuring this endpoint: wait for it to finish, or raise "
            "--specperf-gpu-lock-timeout to wait longer.")
        assert info.value.holder.startswith(f"{socket.gethostname()} pid {first.pid}")
    finally:
        first.kill()
        first.communicate()


def test_the_file_lock_takes_the_lock_across_hosts_only_for_a_postgresql_store(
        tmp_path: Path) -> None:
    url = fresh_pg_database()
    endpoint = "http://127.0.0.1:30000"
    assert across_hosts(Settings(results_db=f"sqlite:///{tmp_path / 'r.db'}"), endpoint) is None
    assert across_hosts(Settings(), endpoint) is None
    across = across_hosts(Settings(results_db=url), endpoint)
    assert across is not None and across.server == SERVER
    with GpuLock(tmp_path / "gpu.lock", endpoint=endpoint, across=across) as lock:
        assert across.held and lock.held
        other = HostLock(url, SERVER, ("h", 1, "c"), timeout_s=0.1)
        with pytest.raises(GpuLockTimeout):
            other.acquire()
    assert not across.held
    other.acquire()  # freed with the file lock
    other.release()
