"""The plugin writes each run to the results store at its end: by default an SQLite file beside
the reports, read back as the history line the file holds; a store that is down is one line at
the end and exit 3, with results.json and the history line written first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specperf.store.history import file_runs, store_runs

DOWN = "postgresql://specperf@127.0.0.1:9/none"  # the discard port: nothing listens


def test_a_run_is_written_to_the_store_and_a_store_that_is_down_is_exit_3(perf_project,
                                                                          clean_sim) -> None:
    project = perf_project()
    args = ("-m", "context_scaling", "--specperf-text-classes", "padding",
            "--specperf-contexts", "13", "--endpoint", clean_sim.url)
    project.run(*args)
    reports = project.pytester.path / "reports"
    stored = store_runs(f"sqlite:///{reports / 'results.db'}")
    assert stored == file_runs(reports / "history.jsonl") and len(stored) == 1

    down = project.run(*args, "--specperf-results-db", DOWN)
    assert down.ret == pytest.ExitCode.INTERNAL_ERROR
    down.stdout.fnmatch_lines([
        f"specperf: report NOT written: cannot open the results store {DOWN} (*): start the "
        "database, or point --specperf-results-db at one that runs. (results.json and "
        "history.jsonl were written)"])
    lines = file_runs(reports / "history.jsonl")
    assert len(lines) == 2 and len(store_runs(f"sqlite:///{reports / 'results.db'}")) == 1
    record = reports / lines[1]["run_id"] / "results.json"
    assert json.loads(record.read_text())["settings"]["results_db"] == DOWN
    assert not Path(record.parent / "report.html").exists()
