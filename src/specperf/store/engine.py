"""A results store's URL to a migrated SQLAlchemy engine: the one boundary where SQLAlchemy's,
Alembic's and the driver's errors become :class:`~specperf.core.errors.StoreError`.

``sqlite:///PATH`` (or a bare path) is the embedded engine, the default being
``<report dir>/results.db``; ``postgresql://USER@HOST:PORT/DB`` is the fleet's (psycopg 3).
A password never sits in the URL (it would reach every results.json's settings): libpq reads
it from ``PGPASSWORD`` or ``~/.pgpass``. Every open brings the schema to the newest revision
(migrations/), serialized between processes so that two first runs do not race.
"""

from __future__ import annotations

import functools
import shlex
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event, func, inspect, select
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.pool import NullPool

from ..core.errors import StoreError

DEFAULT_NAME = "results.db"
MIGRATIONS = Path(__file__).resolve().parent / "migrations"
# pg_advisory_xact_lock key serializing migrations ("specperf" in ASCII, as an int64).
_MIGRATION_KEY = 0x7370656370657266
_SQLITE_BUSY_S = 60.0
# The newest migration's revision (migrations/versions/; tests/test_store.py checks it is
# Alembic's head): a store already there is opened without loading Alembic at all.
HEAD_REVISION = "0001"
T = TypeVar("T")


def store_url(setting: str | None, report_dir: Path) -> str:
    """The store a run writes to: the setting, else SQLite ``<report_dir>/results.db``."""
    if setting:
        return setting
    return f"sqlite:///{(report_dir / DEFAULT_NAME).resolve()}"


def is_postgres(url: str) -> bool:
    return url.split(":", 1)[0].split("+", 1)[0] in ("postgresql", "postgres")


def shown(url: str) -> str:
    """The URL as a message shows it (no password, should one be there anyway)."""
    try:
        return make_url(url).render_as_string(hide_password=True) if "://" in url else url
    except ArgumentError:
        return url


def sqlite_path(url: str) -> Path | None:
    """The file of an SQLite store, None for a server."""
    if is_postgres(url):
        return None
    return Path(url.split(":///", 1)[1]) if ":///" in url else Path(url)


def _driver_url(url: str) -> str:
    if is_postgres(url):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url if "://" in url else f"sqlite:///{Path(url).resolve()}"


@functools.cache
def open_engine(url: str) -> Engine:
    """The engine of ``url``, its schema migrated to the newest revision (once a process)."""
    def opened() -> Engine:
        engine = _create(url)
        _migrate(engine)
        return engine
    return _guarded(url, "open", opened)


def _create(url: str) -> Engine:
    if is_postgres(url):
        # No pool: a connection lives as long as its use, so a killed run leaves none open.
        return create_engine(_driver_url(url), poolclass=NullPool,
                             connect_args={"connect_timeout": 10})
    path = sqlite_path(url)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(_driver_url(url), poolclass=NullPool,
                           connect_args={"timeout": _SQLITE_BUSY_S})
    _sqlite_transactions(engine)
    return engine


def _sqlite_transactions(engine: Engine) -> None:
    """SQLite with real transactions: BEGIN IMMEDIATE takes the write lock up front, so two
    writers queue instead of failing halfway; WAL lets readers read meanwhile."""

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # the driver's own BEGINs off
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def _migrate(engine: Engine) -> None:
    if _revision(engine) == HEAD_REVISION:
        return
    from alembic import command  # only when there is something to migrate: ~0.3 s to load
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:
        if engine.dialect.name == "postgresql":
            connection.execute(select(func.pg_advisory_xact_lock(_MIGRATION_KEY)))
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


def _revision(engine: Engine) -> str | None:
    """The store's Alembic revision, None when it has none yet (a new file or database)."""
    try:
        with engine.connect() as connection:
            if not inspect(connection).has_table("alembic_version"):
                return None
            found = connection.exec_driver_sql("SELECT version_num FROM alembic_version")
            return next((str(row[0]) for row in found), None)
    except SQLAlchemyError:
        return None  # the upgrade says what is wrong


@contextmanager
def transaction(url: str) -> Iterator[Connection]:
    """One transaction on the store: all of it is written, or none (a killed process's
    open transaction is rolled back by the database)."""
    engine = open_engine(url)
    try:
        with engine.begin() as connection:
            yield connection
    except SQLAlchemyError as exc:
        raise store_error(url, "write to", exc) from exc


def read(url: str, query: Callable[[Connection], T]) -> T:
    """``query`` run on a connection of the store, its errors translated."""
    engine = open_engine(url)
    return _guarded(url, "read", lambda: _run(engine, query))


def _run(engine: Engine, query: Callable[[Connection], T]) -> T:
    with engine.connect() as connection:
        return query(connection)


def _guarded(url: str, verb: str, action: Callable[[], T]) -> T:
    try:
        return action()
    except (SQLAlchemyError, OSError) as exc:
        raise store_error(url, verb, exc) from exc


def store_error(url: str, verb: str, exc: BaseException) -> StoreError:
    reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    first = reason[0] if reason else type(exc).__name__
    return StoreError(f"cannot {verb} the results store {shown(url)} ({first}): start the "
                      "database, or point --specperf-results-db at one that runs.",
                      url=shown(url))


def not_written(exc: StoreError, results: str | Path) -> str:
    """The one sentence a run ends with when its store write failed: what failed, and the
    command that loads the run (its ``results`` file, every file written) once the store runs."""
    command = f"specperf import {shlex.quote(str(results))}"
    if exc.url:
        command += f" --db {shlex.quote(exc.url)}"
    return (f"{str(exc).rstrip('.')}, then load this run with `{command}` (results.json, "
            "history.jsonl and report.html were written).")
