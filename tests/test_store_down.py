"""A results store that is down costs the run its store write, not its verdicts: against a
PostgreSQL nothing listens for and an SQLite file that cannot be created, every case is
measured and judged, results.json and report.html are written, the run ends with one sentence
naming the command that loads it later (it works as printed) and exit 3."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest

from specperf.cli import main
from specperf.store.history import store_runs

DOWN = "postgresql://specperf@127.0.0.1:1/specperf"  # port 1: nothing listens
ARGS = ("-m", "context_scaling", "--specperf-text-classes", "padding",
        "--specperf-contexts", "13")


def _judged_run(project, url: str, db: str) -> tuple[pytest.RunResult, Path, str]:
    """A run against a stored baseline with the store at ``db``; its results.json and the
    store sentence."""
    result = project.run(*ARGS, "--endpoint", url, "--specperf-results-db", db)
    [line] = [s for s in result.outlines if s.startswith("specperf: results store NOT written")]
    command = line.split("`")[1]
    results = project.pytester.path / shlex.split(command)[2]
    return result, results, line


def test_a_store_that_is_down_costs_the_write_not_the_night(perf_project, clean_sim,
                                                            tmp_path: Path) -> None:
    project = perf_project()
    made = project.run(*ARGS, "--endpoint", clean_sim.url, "--specperf-update-baselines")
    assert made.ret == 0, made.stdout.str()[-2000:]

    result, results, line = _judged_run(project, clean_sim.url, DOWN)
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR, result.stdout.str()[-2000:]
    assert line.startswith(f"specperf: results store NOT written: cannot open the results "
                           f"store {DOWN} (")
    assert line.endswith(f"start the database, or point --specperf-results-db at one that "
                         f"runs, then load this run with `specperf import "
                         f"{results.relative_to(project.pytester.path)} --db {DOWN}` "
                         "(results.json, history.jsonl and report.html were written).")
    result.stdout.fnmatch_lines([
        "specperf: the GPU lock across hosts on localhost:* is NOT held, this host's lock file "
        f"only: cannot open the results store {DOWN} (*"])
    doc = json.loads(results.read_text())
    # Every case measured and judged against the baseline: no StoreError anywhere.
    assert doc["errors"] == {} and doc["measurements"]
    assert {v["status"] for v in doc["verdicts"]} <= {"pass", "noted", "improved"}
    assert doc["verdicts"] and (results.parent / "report.html").is_file()

    store = f"sqlite:///{tmp_path / 'later.db'}"
    os.chdir(project.pytester.path)
    assert main(["import", str(results), "--db", store]) == 0
    assert [e["run_id"] for e in store_runs(store)] == [doc["run_id"]]


def test_an_sqlite_store_that_cannot_be_created_is_the_same(perf_project, clean_sim,
                                                              tmp_path: Path) -> None:
    # A file where its directory should be: unwritable for root too (a read-only mode is not).
    project = perf_project()
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    result, results, line = _judged_run(project, clean_sim.url,
                                        f"sqlite:///{blocker / 'results.db'}")
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    assert "cannot open the results store sqlite:///" in line
    doc = json.loads(results.read_text())
    assert doc["errors"] == {} and doc["measurements"]
    assert (results.parent / "report.html").is_file()
