"""The results store: every run as rows in one database, SQLite beside the reports by default,
PostgreSQL for a fleet (``--specperf-results-db``; docs/store.md).

``schema`` (the tables, one definition for both engines), ``engine`` (a URL to a migrated
engine; SQLAlchemy and Alembic stay behind it, their errors translated there into
:class:`~specperf.core.errors.StoreError`), ``ingest`` (a run in one transaction, once per run
id), ``history`` (the run history as history lines, from the store or history.jsonl),
``hostlock`` (PostgreSQL's advisory lock across hosts, with its holder) and ``export``
(PyTorch benchmark database v3 rows).

May import: core
"""
