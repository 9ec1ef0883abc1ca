"""The GPU lock against real processes and real files under tmp_path."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from specperf.core.errors import ConfigError, GpuLockTimeout
from specperf.measure.holder import Holder, holder_path_for, read_holder
from specperf.measure.lock import GpuLock, default_lock_dir, lock_path_for

HOLDER_SCRIPT = Path(__file__).with_name("lock_holder.py")
SRC = Path(__file__).resolve().parents[1] / "src"


@pytest.fixture
def lock_path(tmp_path: Path) -> Path:
    """A lock file path in a fresh directory."""
    return tmp_path / "locks" / "gpu-127.0.0.1-30000.lock"


def _start_holder(path: Path, seconds: float) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.Popen(
        [sys.executable, str(HOLDER_SCRIPT), str(path), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    # Block until the child really holds the lock, so the test never races it.
    assert proc.stdout.readline().strip() == "held"
    return proc


@pytest.fixture
def holder_process(lock_path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the lock for a minute; killed at teardown."""
    proc = _start_holder(lock_path, 60)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()


def test_acquire_writes_holder_and_release_removes_it(lock_path: Path) -> None:
    lock = GpuLock(lock_path, endpoint="http://127.0.0.1:30000")
    waited = lock.acquire()
    assert lock.held and waited >= 0 and lock.waited_s == waited
    holder = read_holder(lock_path)
    assert holder is not None
    assert (holder.pid, holder.endpoint) == (os.getpid(), "http://127.0.0.1:30000")
    assert holder.user and holder.host and holder.since.endswith("Z")
    lock.release()
    lock.release()  # idempotent
    assert not lock.held
    assert not holder_path_for(lock_path).exists()


def test_context_manager_and_fresh_directory(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "x.lock"
    with GpuLock(path) as lock:
        assert lock.held and path.exists()
    assert not lock.held


def test_release_leaves_a_later_holders_record(lock_path: Path) -> None:
    lock = GpuLock(lock_path)
    lock.acquire()
    someone = Holder("bob", "box", 1, "pytest", "2026-11-30T03:00:00Z", "")
    holder_path_for(lock_path).write_text(json.dumps(dataclasses.asdict(someone)))
    lock.release()
    assert read_holder(lock_path) == someone


def test_unwritable_holder_record_does_not_stop_the_run(
    lock_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(src: str, dst: str) -> None:
        raise PermissionError(1, "Operation not permitted", dst)

    # Tests run as root, so simulate another user's record in a sticky directory.
    monkeypatch.setattr(os, "replace", refuse)
    with GpuLock(lock_path) as lock:
        assert lock.held and read_holder(lock_path) is None
    assert list(lock_path.parent.iterdir()) == []  # no temp file left behind


def test_describe() -> None:
    holder = Holder(
        "alice", "gpu-box", 4242, "pytest perf_tests -m context_scaling",
        "2026-11-30T03:00:00Z", "http://127.0.0.1:30000",
    )  # fmt: skip
    assert holder.describe() == (
        "alice@gpu-box pid 4242 since 2026-11-30T03:00:00Z (pytest perf_tests -m context_scaling)"
    )


@pytest.mark.parametrize("content", [None, "", "{not json", "[]", '{"user": "a"}'])
def test_read_holder_tolerates_missing_or_corrupt(lock_path: Path, content: str | None) -> None:
    if content is not None:
        lock_path.parent.mkdir(parents=True)
        holder_path_for(lock_path).write_text(content)
    assert read_holder(lock_path) is None


def test_timeout_names_holder_and_path(
    lock_path: Path, holder_process: subprocess.Popen[str]
) -> None:
    lines: list[str] = []
    lock = GpuLock(
        lock_path, timeout_s=1, progress=lines.append, progress_interval_s=0.2, poll_s=0.05
    )
    with pytest.raises(GpuLockTimeout) as info:
        lock.acquire()
    holder = read_holder(lock_path)
    assert holder is not None and holder.pid == holder_process.pid
    assert str(info.value) == (
        f"GPU lock {lock_path} held by {holder.describe()} for longer than the 1 s timeout. "
        "Another specperf run is measuring this endpoint: wait for it to finish, or raise "
        "--specperf-gpu-lock-timeout to wait longer. Do not delete the lock file: the OS frees "
        "the lock when its holder exits, even if killed."
    )
    assert (info.value.lock_file, info.value.holder) == (str(lock_path), holder.describe())
    assert f"pid {holder_process.pid}" in info.value.holder
    assert isinstance(info.value.__cause__, TimeoutError)  # filelock's, chained
    assert not lock.held and lock.waited_s >= 1
    assert lines, "no progress line while waiting"
    assert lines[0].startswith(
        f"specperf: waiting for the GPU lock {lock_path} held by {holder.describe()}; waited "
    )
    assert lines[0].endswith(" s of 1 s")


def test_waits_for_holder_to_release(lock_path: Path) -> None:
    proc = _start_holder(lock_path, 1.0)
    try:
        lock = GpuLock(lock_path, timeout_s=10, poll_s=0.05)
        waited = lock.acquire()
        assert 0 < waited < 10
        holder = read_holder(lock_path)
        assert holder is not None and holder.pid == os.getpid()
        lock.release()
    finally:
        assert proc.wait(timeout=10) == 0
        assert proc.stdout is not None
        proc.stdout.close()


def test_sigkilled_holder_frees_the_lock(
    lock_path: Path, holder_process: subprocess.Popen[str]
) -> None:
    holder_process.send_signal(signal.SIGKILL)
    holder_process.wait()
    stale = read_holder(lock_path)
    assert stale is not None and stale.pid == holder_process.pid  # left behind by the dead process
    # Taken without waiting for the timeout: a stale holder file is not a held lock.
    with GpuLock(lock_path, timeout_s=60, poll_s=0.05) as lock:
        current = read_holder(lock_path)
        assert current is not None and current.pid == os.getpid()
        assert lock.waited_s < 60


def test_uncreatable_directory_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    directory = tmp_path / "file" / "sub"
    with pytest.raises(ConfigError) as info:
        GpuLock(directory / "x.lock", timeout_s=0).acquire()
    message = str(info.value)
    assert message.startswith(f"GPU lock directory {directory} cannot be created (Not a directory)")
    assert "--specperf-gpu-lock PATH" in message and "SPECPERF_LOCK_DIR" in message
    assert isinstance(info.value.__cause__, OSError)


def test_default_lock_dir_from_env_or_tempdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPECPERF_LOCK_DIR", str(tmp_path / "mine"))
    assert default_lock_dir() == tmp_path / "mine"
    monkeypatch.delenv("SPECPERF_LOCK_DIR")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    shared = default_lock_dir()
    assert shared == tmp_path / "specperf-locks"
    assert shared.stat().st_mode & 0o7777 == 0o1777
    assert default_lock_dir() == shared  # already there: fine


def test_default_lock_dir_uncreatable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("SPECPERF_LOCK_DIR", str(tmp_path / "file" / "sub"))
    with pytest.raises(ConfigError, match="SPECPERF_LOCK_DIR"):
        default_lock_dir()


@pytest.mark.parametrize(
    ("endpoint", "name"),
    [
        ("http://127.0.0.1:30000", "gpu-localhost-30000.lock"),
        ("http://127.0.0.1:30000/v1/", "gpu-localhost-30000.lock"),
        ("https://GPU-Box.specperf-test.invalid", "gpu-gpu-box.specperf-test.invalid-443.lock"),
        ("http://gpu_box.invalid", "gpu-gpu_box.invalid-80.lock"),
        ("http://[::1]:30000", "gpu-localhost-30000.lock"),
        ("localhost:8000", "gpu-localhost-8000.lock"),
    ],
)
def test_lock_path_for(tmp_path: Path, endpoint: str, name: str) -> None:
    assert lock_path_for(endpoint, tmp_path) == tmp_path / name


@pytest.mark.parametrize("endpoint", ["http://host:port", "ftp://host", "http://"])
def test_lock_path_for_bad_endpoint(tmp_path: Path, endpoint: str) -> None:
    with pytest.raises(ConfigError, match="--specperf-gpu-lock PATH"):
        lock_path_for(endpoint, tmp_path)


def test_an_xdist_worker_is_named_as_such_in_the_holder_record(monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw2")
    assert Holder.current().command == f"pytest-xdist worker gw2 of pid {os.getppid()}"


def test_the_lock_directory_does_not_grow_run_after_run(tmp_path: Path) -> None:
    # Each embedded simulator listens on a new port, so each run locks a new path: a
    # release removes its own file (and holder record), or the directory grows forever.
    for port in range(30000, 30020):
        with GpuLock(lock_path_for(f"http://127.0.0.1:{port}", tmp_path)) as lock:
            assert lock.held and lock.path.exists()
    assert list(tmp_path.iterdir()) == []


def test_a_waiter_on_a_removed_file_locks_the_new_one(lock_path: Path, tmp_path: Path) -> None:
    # The holder removes the file as it releases; two runs that waited on it must still
    # take turns (each must lock the file at the path, not the removed one).
    first = _start_holder(lock_path, 0.5)
    log = tmp_path / "turns.log"
    script = ("import sys, time\n"
              "from pathlib import Path\n"
              "from specperf.measure.lock import GpuLock\n"
              "with GpuLock(Path(sys.argv[1]), timeout_s=20, poll_s=0.02):\n"
              "    with open(sys.argv[2], 'a') as f: f.write(f'in {time.monotonic()}\\n')\n"
              "    time.sleep(0.4)\n"
              "    with open(sys.argv[2], 'a') as f: f.write(f'out {time.monotonic()}\\n')\n")
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    waiters = [subprocess.Popen([sys.executable, "-c", script, str(lock_path), str(log)],
                                env=env) for _ in range(2)]
    try:
        assert all(w.wait(timeout=30) == 0 for w in waiters)
    finally:
        first.wait(timeout=10)
        assert first.stdout is not None
        first.stdout.close()
    events = [line.split()[0] for line in log.read_text().splitlines()]
    assert events == ["in", "out", "in", "out"]  # never two holders at once
    assert not lock_path.exists()
