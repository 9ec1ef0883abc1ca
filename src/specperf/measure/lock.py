"""The GPU lock: one measuring run per endpoint at a time, with a named holder.

The lock file is named by the server's identity (measure/identity.py) and its holder is
recorded beside it (measure/holder.py). ``filelock``'s exceptions are translated here into
:class:`~specperf.core.errors.GpuLockTimeout` and :class:`~specperf.core.errors.ConfigError`
(the baselines' write lock, baselines/writelock.py, is the other module that uses it).
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Literal, get_args

import filelock

from ..core.errors import ConfigError, GpuLockTimeout
from ..settings.config import Settings
from .holder import Holder, read_holder, remove_holder, write_holder
from .identity import server_identity

if TYPE_CHECKING:  # the store (SQLAlchemy) loads only when a PostgreSQL store is set
    from ..store.hostlock import HostLock

LOCK_DIR_ENV = "SPECPERF_LOCK_DIR"
# How a session locks its endpoint: "session" holds the GPU lock for the whole session;
# "case" (xdist workers whose controller holds it) takes <lock>.case around each case;
# "none" takes no lock (a caller that holds one itself, or a test of its own simulator).
LockMode = Literal["session", "case", "none"]
LOCK_MODES: tuple[str, ...] = get_args(LockMode)
_UNSAFE_CHARS = re.compile(r"[^A-Za-z0-9.-]")
_WHERE_ELSE = (
    f"pass --specperf-gpu-lock PATH to put the lock elsewhere, or set {LOCK_DIR_ENV} to a "
    "writable directory"
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
    """The GPU lock file of a run: ``--specperf-gpu-lock``, else derived from the endpoint's URL.

    ``url``: the server actually measured when it is not ``--endpoint`` (the embedded
    simulator's); every holder of a run's lock (the session, an xdist controller) asks here.
    """
    return settings.gpu_lock or lock_path_for(url or settings.endpoint or "")


def across_hosts(settings: Settings, endpoint: str,
                 progress: Callable[[str], None] | None = None) -> HostLock | None:
    """The advisory lock across hosts (store/hostlock.py), taken beside the file lock when the
    results store is PostgreSQL; None for the embedded store (one host: the file lock)."""
    from ..store.engine import is_postgres
    from ..store.hostlock import HostLock

    if not settings.results_db or not is_postgres(settings.results_db):
        return None
    host, port = server_identity(endpoint)
    me = Holder.current(endpoint)
    return HostLock(settings.results_db, f"{host}:{port}", (me.host, me.pid, me.command),
                    timeout_s=settings.gpu_lock_timeout, progress=progress)


def lock_path_for(endpoint: str, lock_dir: Path | None = None) -> Path:
    """The lock file for an endpoint, named by the server's canonical identity."""
    host, port = server_identity(endpoint)
    name = _UNSAFE_CHARS.sub("_", f"gpu-{host}-{port}") + ".lock"
    return (lock_dir if lock_dir is not None else default_lock_dir()) / name


def _dir_message(directory: Path, exc: OSError) -> str:
    reason = exc.strerror or str(exc)
    return f"GPU lock directory {directory} cannot be created ({reason}); {_WHERE_ELSE}."


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
        across: HostLock | None = None,
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
        self._across = across  # the lock across hosts, held inside the file lock
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
        if self._across is not None:
            try:
                self._across.acquire()
            except BaseException:
                self._lock.release(force=True)
                raise
        self.waited_s = time.monotonic() - start
        self._record_holder()
        return self.waited_s

    def _record_holder(self) -> None:
        holder = Holder.current(self.endpoint)
        try:
            write_holder(self.path, holder)
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
            if self._across is not None:
                self._across.release()
            if self._holder is not None:
                remove_holder(self.path, self._holder)
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
            "endpoint: wait for it to finish, or raise --specperf-gpu-lock-timeout to wait longer. "
            "Do not delete the lock file: the OS frees the lock when its holder exits, "
            "even if killed."
        )
        return GpuLockTimeout(message, lock_file=str(self.path), holder=holder)
