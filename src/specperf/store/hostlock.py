"""The GPU lock across hosts: PostgreSQL's advisory lock on the server's identity, held for the
run on a connection of its own, its holder (host, pid, command) in ``lock_holders`` so that a
waiter on another host can name it.

The database frees a session's advisory lock when its connection ends, so a holder killed
with SIGKILL (its socket closed by the kernel) releases it like one that exits; the row it
left is informational, replaced by the next holder. Waiting happens on the server (``SET
lock_timeout`` then ``pg_advisory_lock``), in slices, so the lock passes at once when freed
and the waiter reports who it waits for between slices.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from datetime import datetime, timezone

from sqlalchemy import Connection, delete, func, select
from sqlalchemy.dialects import postgresql
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from ..core.errors import GpuLockTimeout, StoreError
from . import engine
from .schema import lock_holders

# The ceiling on one server-side wait, so a waiter reports progress between them.
SLICE_S = 5.0
LOCK_NOT_AVAILABLE = "55P03"  # SQLSTATE of a wait cut by lock_timeout


def lock_key(server: str) -> int:
    """The advisory lock's key for a server identity ``host:port``: a signed 64-bit number."""
    digest = hashlib.blake2b(f"specperf-gpu:{server}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class HostLock:
    """One server's advisory lock in a PostgreSQL results store; see the module docstring.

    ``who``: (host, pid, command) recorded for waiters. Acquire before the run's first
    request, release at its end (also on failure: ``release`` in a ``finally``).
    """

    def __init__(self, url: str, server: str, who: tuple[str, int, str], *,
                 timeout_s: float, progress: Callable[[str], None] | None = None,
                 progress_interval_s: float = 30.0) -> None:
        self.url, self.server, self.who = url, server, who
        self.timeout_s, self.progress = timeout_s, progress
        self.progress_interval_s = progress_interval_s
        self._connection: Connection | None = None
        # Why the lock across hosts was not taken (a store that cannot be opened), else "".
        self.unavailable = ""

    @property
    def held(self) -> bool:
        return self._connection is not None

    def acquire(self) -> float:
        """Wait for the lock (up to the timeout), record the holder; seconds waited.

        A store that cannot be opened costs the store, not the night: the run measures under
        the file lock of its own host, says so once (``progress``), and keeps the reason in
        ``unavailable`` (the run ends with the store's sentence and exit 3 all the same)."""
        if self.held:
            return 0.0
        start = time.monotonic()
        try:
            connection = self._connect()
        except StoreError as exc:
            self.unavailable = str(exc)
            if self.progress is not None:
                self.progress(f"specperf: the GPU lock across hosts on {self.server} is NOT "
                              f"held, this host's lock file only: {exc}")
            return time.monotonic() - start
        try:
            self._wait(connection, start)
            self._record(connection)
        except SQLAlchemyError as exc:
            connection.close()
            raise engine.store_error(self.url, "lock across hosts on", exc) from exc
        except BaseException:
            connection.close()
            raise
        self._connection = connection
        return time.monotonic() - start

    def release(self) -> None:
        """Forget the holder row and free the lock; does nothing when not held."""
        connection, self._connection = self._connection, None
        if connection is None:
            return
        host, pid, _ = self.who
        try:
            connection.execute(delete(lock_holders).where(
                lock_holders.c.server == self.server, lock_holders.c.host == host,
                lock_holders.c.pid == pid))
            connection.execute(select(func.pg_advisory_unlock(lock_key(self.server))))
        except SQLAlchemyError:
            pass  # closing the connection below frees the lock all the same
        finally:
            connection.close()

    def holder(self) -> str:
        """Who holds the lock, as its row says (``an unrecorded holder`` without one)."""
        def query(c: Connection) -> str:
            row = c.execute(select(lock_holders).where(lock_holders.c.server == self.server)
                            ).mappings().first()
            if row is None:
                return "an unrecorded holder"
            return f"{row['host']} pid {row['pid']} since {row['since']} ({row['command']})"
        return engine.read(self.url, query)

    def _connect(self) -> Connection:
        try:
            eng = engine.open_engine(self.url)
            return eng.connect().execution_options(isolation_level="AUTOCOMMIT")
        except SQLAlchemyError as exc:
            raise engine.store_error(self.url, "lock across hosts on", exc) from exc

    def _wait(self, connection: Connection, start: float) -> None:
        key = lock_key(self.server)
        if connection.execute(select(func.pg_try_advisory_lock(key))).scalar_one():
            return
        self._report(time.monotonic() - start)  # busy: name the holder at once
        reported = time.monotonic()
        while True:
            left = start + self.timeout_s - time.monotonic()
            slice_ms = max(1, int(1000 * min(SLICE_S, left)))  # 0 would mean "no limit"
            connection.execute(select(func.set_config("lock_timeout", f"{slice_ms}ms", False)))
            try:
                connection.execute(select(func.pg_advisory_lock(key)))
                return
            except OperationalError as exc:
                if getattr(exc.orig, "sqlstate", None) != LOCK_NOT_AVAILABLE:
                    raise
            now = time.monotonic()
            if now - start >= self.timeout_s:
                raise self._timeout()
            if now - reported >= self.progress_interval_s:
                self._report(now - start)
                reported = now

    def _record(self, connection: Connection) -> None:
        host, pid, command = self.who
        since = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        row = {"server": self.server, "host": host, "pid": pid, "command": command[:300],
               "since": since}
        statement = postgresql.insert(lock_holders).values(**row)
        connection.execute(statement.on_conflict_do_update(
            index_elements=["server"], set_={k: v for k, v in row.items() if k != "server"}))

    def _report(self, waited_s: float) -> None:
        if self.progress is not None:
            self.progress(f"specperf: waiting for the GPU lock on {self.server} across hosts "
                          f"(results store {engine.shown(self.url)}) held by {self.holder()}; "
                          f"waited {waited_s:.0f} s of {self.timeout_s:.0f} s")

    def _timeout(self) -> GpuLockTimeout:
        holder = self.holder()
        return GpuLockTimeout(
            f"GPU lock on {self.server} across hosts (results store {engine.shown(self.url)}) "
            f"held by {holder} for longer than the {self.timeout_s:.0f} s timeout. Another "
            "specperf run is measuring this endpoint: wait for it to finish, or raise "
            "--specperf-gpu-lock-timeout to wait longer.", lock_file=self.server, holder=holder)
