"""Who holds a GPU lock: the record written beside the lock file (``<lock>.holder.json``) so
a waiting run can name the user, host, process and command that keep it waiting.

The record is informational and may be stale; the lock itself (measure/lock.py) is the truth.
"""

from __future__ import annotations

import dataclasses
import getpass
import json
import os
import shlex
import socket
import sys
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path


@dataclass(frozen=True)
class Holder:
    """Who holds a GPU lock, as recorded beside it so waiting runs can name them."""

    user: str
    host: str
    pid: int
    command: str
    since: str
    endpoint: str

    @classmethod
    def current(cls, endpoint: str = "") -> Holder:
        """A record describing this process, as of now."""
        since = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        return cls(_user(), socket.gethostname(), os.getpid(), _command(), since, endpoint)

    def describe(self) -> str:
        """E.g. ``alice@gpu-box pid 4242 since 2026-11-30T03:00:00Z (pytest perf_tests)``."""
        text = f"{self.user}@{self.host} pid {self.pid} since {self.since}"
        return f"{text} ({self.command})" if self.command else text


def _user() -> str:
    # getuser() fails in containers whose uid has no passwd entry.
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid {os.getuid()}"


def _command() -> str:
    # An xdist worker's argv is execnet's "-c": name the worker and the run that started it.
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        return f"pytest-xdist worker {worker} of pid {os.getppid()}"
    # Name the script, not its full install path: "pytest -m x", not "/venv/bin/pytest -m x".
    if not sys.argv or not sys.argv[0]:
        return ""
    return shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]])


def holder_path_for(lock_path: Path) -> Path:
    """Where the holder record of a lock lives: ``<lock>.holder.json``."""
    return lock_path.with_name(lock_path.name + ".holder.json")


def read_holder(lock_path: Path) -> Holder | None:
    """The recorded holder of a lock, or None when the record is missing or unreadable."""
    try:
        data = json.loads(holder_path_for(lock_path).read_text(encoding="utf-8"))
        holder = Holder(**data)
    except (OSError, ValueError, TypeError):
        return None
    return holder if _well_typed(holder) else None


def _well_typed(holder: Holder) -> bool:
    # JSON written by hand or by a future version may carry the right keys with wrong types.
    texts = (holder.user, holder.host, holder.command, holder.since, holder.endpoint)
    return type(holder.pid) is int and all(isinstance(text, str) for text in texts)


def write_holder(lock_path: Path, holder: Holder) -> None:
    target = holder_path_for(lock_path)
    text = json.dumps(dataclasses.asdict(holder), indent=2, sort_keys=True) + "\n"
    # Write-then-rename so a waiting run never reads half a record.
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=target.name, suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)  # mkstemp makes it private; other users' runs must read it
        with os.fdopen(fd, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def remove_holder(lock_path: Path, holder: Holder) -> None:
    # Only our own record: never erase what a later holder wrote.
    if read_holder(lock_path) == holder:
        holder_path_for(lock_path).unlink(missing_ok=True)


