"""The store's tables, one definition for SQLite and PostgreSQL (migrations/ creates them).

A run is a row of ``runs`` with its history line whole in ``entry`` (readers get back exactly
what record/files.py's history_entry wrote), and its figures as rows beside it: ``cells``
(per case and metric: the median, its relative standard error and the measured repeats) and
``verdicts`` (per judged case and factor). ``lock_holders`` names who holds a server's
advisory lock (hostlock.py).
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
)

SCHEMA_REVISION = "0001"

metadata = MetaData()

runs = Table(
    "runs", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(80), nullable=False, unique=True),
    Column("created", String(40), nullable=False),
    Column("label", String(300), nullable=False, default=""),
    Column("simulated", Boolean, nullable=False, default=False),
    Column("deployment", String(200), nullable=True),
    Column("baseline_version", Integer, nullable=True),
    Column("fingerprint", JSON, nullable=False),
    Column("kind", String(40), nullable=False, default="full"),
    Column("interrupted", Boolean, nullable=False, default=False),
    Column("outage", Boolean, nullable=False, default=False),
    Column("suite_version", String(40), nullable=False, default=""),
    Column("git_revision", String(80), nullable=False, default=""),
    Column("entry", JSON, nullable=False),
)
Index("runs_label_created", runs.c.label, runs.c.created)
Index("runs_created", runs.c.created)

cells = Table(
    "cells", metadata,
    Column("run", Integer, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("case_id", String(200), primary_key=True),
    Column("metric", String(40), primary_key=True),
    Column("median", Float, nullable=True),
    Column("se", Float, nullable=True),
    Column("repeats", JSON, nullable=False),
)

verdicts = Table(
    "verdicts", metadata,
    Column("run", Integer, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("case_id", String(200), nullable=False),
    Column("factor", String(40), nullable=False),
    Column("status", String(20), nullable=False),
    Column("change", Float, nullable=True),
    Column("low", Float, nullable=True),
    Column("high", Float, nullable=True),
    Column("tolerance", Float, nullable=True),
)
Index("verdicts_status", verdicts.c.status, verdicts.c.factor)

lock_holders = Table(
    "lock_holders", metadata,
    Column("server", String(300), primary_key=True),
    Column("host", String(200), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("command", String(300), nullable=False),
    Column("since", String(40), nullable=False),
)
