"""The plugin writes each run to the results store at its end: by default an SQLite file beside
the reports, read back as the history line the file holds; a store that is down is one line at
the end and exit 3, with results.json and the history line written first."""

from __future__ import annotations

import json

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
        f"specperf: results store NOT written: cannot open the results store {DOWN} (*): start "
        "the database, or point --specperf-results-db at one that runs, then load this run "
        f"with `specperf import */results.json --db {DOWN}` (results.json, history.jsonl and "
        "report.html were written).",
        "specperf: report */report.html (this run: *)"])
    lines = file_runs(reports / "history.jsonl")
    assert len(lines) == 2 and len(store_runs(f"sqlite:///{reports / 'results.db'}")) == 1
    record = reports / lines[1]["run_id"] / "results.json"
    assert json.loads(record.read_text())["settings"]["results_db"] == DOWN
    # Nothing is lost: the page of the run is written too, and it is this run's.
    page = (record.parent / "report.html").read_text(encoding="utf-8")
    assert lines[1]["run_id"] in page


def test_a_fleet_whose_store_is_down_writes_every_file_and_says_so(perf_project, clean_sim,
                                                                     tmp_path) -> None:
    project = perf_project()
    fleet = tmp_path / "fleet.toml"
    fleet.write_text(f'[[endpoint]]\nname = "box1"\nurl = "{clean_sim.url}"\n')
    down = project.run("-m", "context_scaling", "--specperf-text-classes", "padding",
                       "--specperf-contexts", "13", "--endpoints", str(fleet),
                       "--specperf-results-db", DOWN)
    assert down.ret == pytest.ExitCode.INTERNAL_ERROR, down.stdout.str()[-2000:]
    down.stdout.fnmatch_lines([
        f"specperf: results store NOT written: cannot open the results store {DOWN} (*): start "
        "the database, or point --specperf-results-db at one that runs, then load this run "
        f"with `specperf import */results.json --db {DOWN}` (results.json, history.jsonl and "
        "report.html were written).",
        "specperf: fleet report */report.html"])
    reports = project.pytester.path / "reports"
    [line] = file_runs(reports / "history.jsonl")
    run_dir = reports / line["results"].split("/")[0]
    assert json.loads((run_dir / "results.json").read_text())["endpoints"][0]["name"] == "box1"
    assert (run_dir / "report.html").read_text(encoding="utf-8").count("box1") > 0
