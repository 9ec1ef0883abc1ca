"""A run the store missed comes in with the next write that reaches it: every run of the report
directory's history.jsonl the store lacks (with its results.json), once per run id, said in one
line. Against a real PostgreSQL that was never started and one stopped mid-run (pg_ctl stop
between the last case and the write), and through the writer in SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import func, select

from pg_cluster import PgCluster, pg_cluster_fixture  # noqa: F401
from specperf.core.errors import StoreError
from specperf.record.files import write
from specperf.store import engine, ingest
from specperf.store.history import file_runs, store_runs
from specperf.store.schema import verdicts
from store_fixtures import doc, store_url_fixture  # noqa: F401

DOWN = "postgresql://specperf@127.0.0.1:1/specperf"  # port 1: nothing listens
ARGS = ("-m", "context_scaling", "--specperf-text-classes", "padding",
        "--specperf-contexts", "13")
# Stops the project's store after the last case and before the run's write (the plugin's
# sessionfinish writes; this one runs first).
STOPPER = """
import json, os, subprocess, pytest

@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    subprocess.run(json.loads(os.environ["STOP_STORE"]), check=True, timeout=60)
"""


def _write(reports: Path, run_id: str, url: str, night: int) -> list[str]:
    d = doc(run_id, created=f"2026-12-0{night}T02:00:00Z")
    d["settings"]["results_db"] = url
    return write(d, reports)[1]


def _verdict_rows(url: str) -> int:
    return int(engine.read(url, lambda c: c.execute(
        select(func.count()).select_from(verdicts)).scalar_one()))


def test_the_next_write_brings_in_the_runs_the_store_missed_once(store_url: str,
                                                                 tmp_path: Path) -> None:
    assert _write(tmp_path, "n1", store_url, 1) == []
    for run_id, night in (("n2", 2), ("n3", 3)):
        with pytest.raises(StoreError):
            _write(tmp_path, run_id, DOWN, night)
    assert [e["run_id"] for e in store_runs(store_url)] == ["n1"]

    assert _write(tmp_path, "n4", store_url, 4) == ["n2", "n3"]
    assert [e["run_id"] for e in store_runs(store_url)] == ["n1", "n2", "n3", "n4"]
    assert _verdict_rows(store_url) == 4 * 3 * 2  # their results.json came too
    assert _write(tmp_path, "n5", store_url, 5) == []  # once per run id
    assert len(store_runs(store_url)) == 5
    assert ingest.missed_line(["n2", "n3"]) == \
        "results store: also wrote 2 runs missed earlier (n2, n3)."


def _missed_run(project, url: str, env: dict[str, str] | None = None) -> str:  # type: ignore[no-untyped-def]
    """A run whose write the store missed: its run id, after checking the sentence and exit 3."""
    result = project.run(*ARGS, "--endpoint", url, env=env)
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["specperf: results store NOT written: cannot * the results "
                                 "store postgresql://postgres@127.0.0.1:*"])
    [entry] = file_runs(project.pytester.path / "reports" / "history.jsonl")
    return str(entry["run_id"])


def _caught_up(project, url: str, db: str, missed: str) -> None:  # type: ignore[no-untyped-def]
    result = project.run(*ARGS, "--endpoint", url, "--specperf-results-db", db)
    assert result.ret == 0, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines([f"specperf: results store: also wrote 1 run missed earlier "
                                 f"({missed})."])
    ids = [e["run_id"] for e in store_runs(db)]
    assert ids[:2] == ["seed", missed] and len(ids) == 3
    assert _verdict_rows(db) > 0


def _seeded(url: str) -> None:
    """A store that already holds a run (another runner's): not the empty-store import."""
    seed = doc("seed", label="another-box")
    ingest.put_runs(url, [({"run_id": "seed", "label": "another-box", "cells": {}}, seed)])


@pytest.mark.slow
def test_a_store_never_started_then_up_gets_the_missed_run(perf_project, clean_sim,  # type: ignore[no-untyped-def]
                                                            pg_cluster: PgCluster) -> None:
    project = perf_project()
    _seeded(pg_cluster.url)
    missed = _missed_run(project, clean_sim.url, {"SPECPERF_RESULTS_DB": DOWN.replace(
        "specperf@", "postgres@")})
    _caught_up(project, clean_sim.url, pg_cluster.url, missed)


@pytest.mark.slow
def test_a_store_stopped_mid_run_gets_the_run_when_it_is_back(perf_project, clean_sim,  # type: ignore[no-untyped-def]
                                                               pg_cluster: PgCluster) -> None:
    project = perf_project()
    _seeded(pg_cluster.url)
    project.pytester.makeconftest(STOPPER)
    missed = _missed_run(project, clean_sim.url, {
        "SPECPERF_RESULTS_DB": pg_cluster.url,
        "STOP_STORE": json.dumps(pg_cluster.stop_command())})
    assert [e["run_id"] for e in file_runs(project.pytester.path / "reports" / "history.jsonl")
            ] == [missed]
    pg_cluster.start()
    (project.pytester.path / "conftest.py").unlink()
    _caught_up(project, clean_sim.url, pg_cluster.url, missed)
