"""The GPU lock: one measuring run per endpoint at a time, with a named holder.

This is the only module that touches ``filelock``; its exceptions are
translated here into :class:`~specperf.core.errors.GpuLockTimeout` and
:class:`~specperf.core.errors.ConfigError`.
"""

from __future__ import annotations

import dataclasses
import getpass
import ipaddress
import json
import os
import re
import shlex
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType
from typing import Literal, get_args
from urllib.parse import urlsplit

import filelock

from ..core.errors import ConfigError, GpuLockTimeout
from ..settings.config import Settings

LOCK_DIR_ENV = "SPECPERF_LOCK_DIR"
# How a session locks its endpoint: "session" holds the GPU lock for the whole session;
# "case" (xdist workers whose controller holds it) takes <lock>.case around each case;
# "none" takes no lock (a caller that holds one itself, or a test of its own simulator).
LockMode = Literal["session", "case", "none"]
LOCK_MODES: tuple[str, ...] = get_args(LockMode)
_DEFAULT_PORTS = {"http": 80, "https": 443}
_UNSAFE_CHARS = re.compile(r"[^A-Za-z0-9.-]")
_WHERE_ELSE = (
    f"pass --gpu-lock PATH to put the lock elsewhere, or set {LOCK_DIR_ENV} to a writable directory"
)


def default_lock_dir() -> Path:
    """``$SPECPERF_LOCK_DIR``, else ``<tmp>/specperf-locks``; created (shared) if missing."""
    configured = os.environ.get(LOCK_DIR_ENV, "")
    directory = Path(configured) if configured else Path(tempfile.gettempdir()) / "specperf-locks"
    try:
        directory.mkdir(parents=True)
    except FileExistsError:
        return directory
    except OSError as exc:
        raise ConfigError(_dir_message(directory, exc)) from exc
    # Every user on the box must be able to lock the same endpoint, so the
    # directory is world-writable; sticky, like /tmp, so nobody can delete
    # another user's files. mkdir's mode is filtered by the umask, hence chmod.
    directory.chmod(0o1777)
    return directory


def lock_path(settings: Settings, url: str | None = None) -> Path:
    """The GPU lock file of a run: ``--gpu-lock``, else derived from the endpoint's URL.

    ``url``: the server actually measured when it is not ``--endpoint`` (the embedded
    simulator's); every holder of a run's lock (the session, an xdist controller) asks here.
    """
    return settings.gpu_lock or lock_path_for(url or settings.endpoint or "")


def lock_path_for(endpoint: str, lock_dir: Path | None = None) -> Path:
    """The lock file for an endpoint, named by the server's canonical identity."""
    host, port = server_identity(endpoint)
    name = _UNSAFE_CHARS.sub("_", f"gpu-{host}-{port}") + ".lock"
    return (lock_dir if lock_dir is not None else default_lock_dir()) / name


def server_identity(endpoint: str) -> tuple[str, int]:
    """(host, port) naming one server however the endpoint spells it.

    The scheme's default port fills a missing one; path, trailing slash and letter case
    go. A host that is this machine (loopback, ``localhost``, its host name, or any address
    of its interfaces) is ``localhost``; any other host is its lowest resolved address, so
    a name and its address share one lock. A name that does not resolve stays itself (the
    probe reports it unreachable). A server reached under unrelated addresses (a load
    balancer, an SSH tunnel) needs ``--gpu-lock PATH`` given the same in every run.
    """
    host, port = _host_port(endpoint)
    addresses = _resolve(host, port)
    if host == "localhost" or any(_is_local(a) for a in addresses):
        return "localhost", port
    return (min(addresses) if addresses else host), port


def _resolve(host: str, port: int) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return sorted({str(info[4][0]).split("%", 1)[0] for info in infos})


def _is_local(address: str) -> bool:
    """Whether an address belongs to this machine: loopback, or one a socket can bind to
    (the kernel accepts a bind only to its own interfaces' addresses)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if ip.is_loopback or ip.is_unspecified:
        return True
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((address, 0))
    except OSError:
        return False
    return True


def _host_port(endpoint: str) -> tuple[str, int]:
    # urlsplit reads "host:port" without a scheme as scheme "host", so add one.
    url = endpoint if "://" in endpoint else f"http://{endpoint}"
    parts = urlsplit(url)
    try:
        port = parts.port or _DEFAULT_PORTS.get(parts.scheme.lower())
    except ValueError as exc:
        raise ConfigError(_endpoint_message(endpoint, "its port is not a number")) from exc
    if not parts.hostname:
        raise ConfigError(_endpoint_message(endpoint, "it has no host"))
    if port is None:
        why = f"scheme {parts.scheme!r} has no default port"
        raise ConfigError(_endpoint_message(endpoint, why))
    return parts.hostname.lower().rstrip("."), port


def _endpoint_message(endpoint: str, why: str) -> str:
    return (
        f"Cannot derive a GPU lock path from endpoint {endpoint!r}: {why}. "
        "Give the endpoint as http://HOST:PORT, or pass --gpu-lock PATH."
    )


def _dir_message(directory: Path, exc: OSError) -> str:
    reason = exc.strerror or str(exc)
    return f"GPU lock directory {directory} cannot be created ({reason}); {_WHERE_ELSE}."


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


def _write_holder(lock_path: Path, holder: Holder) -> None:
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


def _remove_holder(lock_path: Path, holder: Holder) -> None:
    # Only our own record: never erase what a later holder wrote.
    if read_holder(lock_path) == holder:
        holder_path_for(lock_path).unlink(missing_ok=True)


def _seconds(value: float) -> str:
    return f"{value:.0f}" if value == int(value) else f"{value:.1f}"


class GpuLock:
    """An exclusive, cross-process lock on one endpoint's GPU, with a named holder.

    Lifecycle: a session acquires the lock before its first request to the
    endpoint and releases it at session end, whether the session passed,
    failed or was interrupted. Under pytest-xdist with one endpoint the
    controller holds it and workers run inside its hold, serialised per case
    by the suite itself; in a fleet (:mod:`specperf.settings.endpoints`) the worker that
    measures an endpoint holds that endpoint's lock while it measures. Either
    way two suites never measure one endpoint at the same time.

    The lock is an ``fcntl.flock`` (via ``filelock``): the kernel frees it
    when the holding process exits for any reason, SIGKILL included, so a
    stale lock file is harmless. The holder record beside it is informational
    and may be stale; the flock is the truth.

    A release removes the lock file while still holding it, so the lock
    directory does not grow by one file per endpoint ever measured (each
    embedded simulator listens on a new port). That is safe because an
    acquire counts only when the file it locked is still the one at the path:
    a waiter that locked a file just removed tries again on the path's file.

    The hold belongs to the object, not to a thread, so a lock acquired on
    one thread may be released on another. Waiting is done in slices so a
    progress line can be printed every ``progress_interval_s`` seconds.
    """

    def __init__(
        self,
        path: Path,
        *,
        timeout_s: float = 1800.0,
        endpoint: str = "",
        progress: Callable[[str], None] | None = None,
        progress_interval_s: float = 30.0,
        poll_s: float = 0.5,
    ) -> None:
        if timeout_s < 0:
            raise ConfigError(f"GPU lock timeout must be 0 s or more, got {timeout_s} s.")
        if progress_interval_s <= 0 or poll_s <= 0:
            raise ConfigError("GPU lock progress and poll intervals must be positive.")
        self.path = Path(path)
        self.timeout_s = timeout_s
        self.endpoint = endpoint
        self.waited_s = 0.0
        self._progress = progress
        self._progress_interval_s = progress_interval_s
        self._poll_s = poll_s
        self._holder: Holder | None = None
        self._locked_inode: int | None = None
        # mode 0o666: the next run may belong to another user and must open the file.
        self._lock = filelock.FileLock(str(self.path), mode=0o666, thread_local=False,
                                       on_acquired=self._note_inode)

    @property
    def held(self) -> bool:
        """True while this object holds the lock."""
        return self._lock.is_locked

    def acquire(self) -> float:
        """Wait for the lock (up to the timeout), record the holder, and return seconds waited."""
        if self.held:
            return 0.0
        self._check_dir()
        start = time.monotonic()
        self._wait(start)
        self.waited_s = time.monotonic() - start
        self._record_holder()
        return self.waited_s

    def _record_holder(self) -> None:
        holder = Holder.current(self.endpoint)
        try:
            _write_holder(self.path, holder)
        except OSError:
            # The record only informs waiters; the flock is what excludes them. In a
            # sticky shared directory another user's stale record cannot be replaced,
            # and that must not stop this run from measuring.
            return
        except BaseException:
            self.release()
            raise
        self._holder = holder

    def release(self) -> None:
        """Remove our holder record and the lock file, then release the lock; does nothing
        when not held."""
        if not self.held:
            return
        try:
            if self._holder is not None:
                _remove_holder(self.path, self._holder)
        finally:
            self._holder = None
            self._remove_own_file()
            self._locked_inode = None
            self._lock.release(force=True)

    def _note_inode(self, fd: int) -> None:
        self._locked_inode = os.fstat(fd).st_ino

    def _locked_current_file(self) -> bool:
        """Whether the file this object locked is still the one at the path (a holder
        removes it on release; a waiter blocked on the removed file must not count)."""
        try:
            return self._locked_inode is not None and \
                os.stat(self.path).st_ino == self._locked_inode
        except OSError:
            return False

    def _remove_own_file(self) -> None:
        # Only while holding it, and only the file we locked. Another user's file in a
        # sticky directory cannot be removed: it stays, one per endpoint, as before.
        if self._locked_current_file():
            try:
                self.path.unlink()
            except OSError:
                pass

    def __enter__(self) -> GpuLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def _check_dir(self) -> None:
        directory = self.path.parent
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(_dir_message(directory, exc)) from exc
        if not os.access(directory, os.W_OK | os.X_OK):
            raise ConfigError(f"GPU lock directory {directory} is not writable; {_WHERE_ELSE}.")

    def _wait(self, start: float) -> None:
        deadline = start + self.timeout_s
        # A first, non-blocking try: when the lock is busy the waiter says so at once,
        # naming the holder, then again every progress interval.
        next_progress = start
        while True:
            # Never a negative slice: filelock reads a negative timeout as "forever".
            slice_s = max(0.0, min(deadline, next_progress) - time.monotonic())
            try:
                self._acquire_slice(slice_s)
                # No descriptor seen (a soft lock, where a filesystem lacks flock): as is.
                if self._locked_inode is None or self._locked_current_file():
                    return
                # The holder removed the file as it released it: lock the path's new file.
                self._lock.release(force=True)
                continue
            except filelock.Timeout as exc:
                now = time.monotonic()
                if now >= deadline:
                    self.waited_s = now - start
                    raise self._timeout_error() from exc
            if now >= next_progress:
                self._report(now - start)
                next_progress += self._progress_interval_s

    def _acquire_slice(self, timeout_s: float) -> None:
        try:
            self._lock.acquire(timeout=timeout_s, poll_interval=self._poll_s)
        except filelock.Timeout:
            raise  # the caller's business: keep waiting or time out
        except OSError as exc:  # Timeout is an OSError too, hence the order
            reason = exc.strerror or str(exc)
            message = f"GPU lock file {self.path} cannot be opened ({reason}); {_WHERE_ELSE}."
            raise ConfigError(message) from exc

    def _holder_text(self) -> str:
        holder = read_holder(self.path)
        return holder.describe() if holder is not None else "an unrecorded holder"

    def _report(self, waited_s: float) -> None:
        if self._progress is None:
            return
        self._progress(
            f"specperf: waiting for the GPU lock {self.path} held by {self._holder_text()}; "
            f"waited {waited_s:.0f} s of {_seconds(self.timeout_s)} s"
        )

    def _timeout_error(self) -> GpuLockTimeout:
        holder = self._holder_text()
        message = (
            f"GPU lock {self.path} held by {holder} for longer than the "
            f"{_seconds(self.timeout_s)} s timeout. Another specperf run is measuring this "
            "endpoint: wait for it to finish, or raise --gpu-lock-timeout to wait longer. "
            "Do not delete the lock file: the OS frees the lock when its holder exits, "
            "even if killed."
        )
        return GpuLockTimeout(message, lock_file=str(self.path), holder=holder)
