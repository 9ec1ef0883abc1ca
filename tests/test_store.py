"""The results store in both engines (SQLite here always; PostgreSQL on the server .ci/run
starts): a run written is read back as its history line, once per run id; a killed writer
leaves no partial run; two processes writing at once lose and duplicate nothing; a store
that is down is one sentence and results.json is still written; the migrated schema is the
declared one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import func, select

from specperf.core.errors import ConfigError, StoreError
from specperf.record.files import history_entry, write
from specperf.settings.config import resolve
from specperf.store import engine, ingest
from specperf.store.history import HistoryLineSkipped, file_runs, read_history, store_runs
from specperf.store.schema import cells, metadata, runs, verdicts
from store_fixtures import doc, store_url_fixture  # noqa: F401

HERE = Path(__file__).resolve().parent


def _counts(url: str) -> tuple[int, int, int]:
    def query(c):  # type: ignore[no-untyped-def]
        return tuple(c.execute(select(func.count()).select_from(t)).scalar_one()
                     for t in (runs, cells, verdicts))
    return engine.read(url, query)


def _write(report_dir: Path, url: str, run_id: str, **kw: object) -> None:
    d = doc(run_id, **kw)  # type: ignore[arg-type]
    d["settings"]["results_db"] = url
    write(d, report_dir)


def test_a_run_is_read_back_as_its_history_line_once_per_run_id(store_url: str,
                                                                tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    for night in range(3):
        _write(reports, store_url, f"r{night}", created=f"2026-12-0{night + 1}T00:00:00Z",
               tok_s=50.0 + night)
    from_file = file_runs(reports / "history.jsonl")
    assert [e["run_id"] for e in from_file] == ["r0", "r1", "r2"]
    assert read_history(reports / "history.jsonl", store_url) == from_file
    # 3 runs × 3 cases × 5 history metrics; 3 cases × 2 judged factors
    assert _counts(store_url) == (3, 45, 18)
    again = [(e, None) for e in from_file]
    assert ingest.put_runs(store_url, again) == 0
    assert _counts(store_url) == (3, 45, 18)


def test_the_measured_repeats_and_verdicts_are_rows(store_url: str) -> None:
    d = doc("r1", status="fail")
    ingest.put_runs(store_url, [(history_entry(d, "r1/results.json"), d)])

    def query(c):  # type: ignore[no-untyped-def]
        cell = c.execute(select(cells.c.median, cells.c.repeats).where(
            cells.c.case_id == "reasoning-ctx13", cells.c.metric == "tok_s")).one()
        factors = c.execute(select(verdicts.c.factor, verdicts.c.status, verdicts.c.change,
                                   verdicts.c.low, verdicts.c.high, verdicts.c.tolerance)
                            .where(verdicts.c.case_id == "padding-ctx13")
                            .order_by(verdicts.c.seq)).all()
        return cell, factors
    cell, factors = engine.read(store_url, query)
    assert (cell.median, cell.repeats) == (50.1, [50.0, 50.1, 50.2])  # warm-up left out
    assert [tuple(f) for f in factors] == [("step_ms", "fail", 0.0, -0.02, 0.02, 0.1),
                                           ("tok_s", "fail", -0.01, -0.05, 0.03, -0.1)]


@pytest.mark.parametrize("word", ["regression", "FAIL", "", "skipped"])
def test_a_verdict_status_the_contract_does_not_know_is_refused(store_url: str,
                                                                 word: str) -> None:
    """A record whose verdict status is not one of the contract's words is not stored: one
    sentence names the verdict and the word, and nothing of the run is written."""
    d = doc("r1", status=word)
    with pytest.raises(StoreError) as caught:
        ingest.put_runs(store_url, [(history_entry(d, "r1/results.json"), d)])
    assert str(caught.value) == (
        f"verdict 'reasoning-ctx13' has status {word!r}, not one of the contract's words "
        "(pass, noted, fail, improved, undetermined): the run is not stored.")
    assert _counts(store_url) == (0, 0, 0)


@pytest.mark.parametrize("word", ["pass", "noted", "fail", "improved", "undetermined",
                                  "no-baseline", "unmeasured"])
def test_the_contracts_words_and_older_records_reasons_are_stored(store_url: str,
                                                                  word: str) -> None:
    d = doc("r1", status=word)
    assert ingest.put_runs(store_url, [(history_entry(d, "r1/results.json"), d)]) == 1
    statuses = engine.read(store_url, lambda c: set(c.execute(select(verdicts.c.status))
                                                    .scalars()))
    assert statuses == {word}


def test_the_migrated_schema_is_the_declared_one(store_url: str) -> None:
    def diff(c):  # type: ignore[no-untyped-def]
        return compare_metadata(MigrationContext.configure(c), metadata)
    assert engine.read(store_url, diff) == []
    assert engine.read(store_url, lambda c: MigrationContext.configure(c)
                       .get_current_revision()) == "0001"


def test_the_head_revision_the_engine_skips_alembic_at_is_alembics_head(tmp_path) -> None:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(engine.MIGRATIONS))
    assert ScriptDirectory.from_config(config).get_current_head() == engine.HEAD_REVISION
    # A store at the head opens without Alembic; one behind it is upgraded.
    url = f"sqlite:///{tmp_path / 'r.db'}"
    opened = engine.open_engine(url)
    assert engine._revision(opened) == engine.HEAD_REVISION
    with opened.begin() as connection:
        connection.exec_driver_sql("DROP TABLE alembic_version")
    assert engine._revision(opened) is None


def test_a_killed_writer_leaves_no_partial_run(store_url: str) -> None:
    ingest.put_runs(store_url, [(history_entry(doc("before"), "x"), doc("before"))])
    child = subprocess.Popen([sys.executable, str(HERE / "store_writer.py"), store_url, "hold",
                              "killed"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, cwd=HERE)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "inside"
    finally:
        child.kill()  # SIGKILL, in the middle of the run's transaction
        child.communicate()
    assert [e["run_id"] for e in store_runs(store_url)] == ["before"]
    assert _counts(store_url) == (1, 15, 6)
    # the store takes the next run (no lock left behind)
    ingest.put_runs(store_url, [(history_entry(doc("after"), "x"), doc("after"))])
    assert [e["run_id"] for e in store_runs(store_url)] == ["before", "after"]


def test_two_processes_writing_at_once_lose_and_duplicate_nothing(store_url: str) -> None:
    # Both start on an empty database: they race on the migration too, which runs once.
    cmd = [sys.executable, str(HERE / "store_writer.py"), store_url, "runs"]
    procs = [subprocess.Popen([*cmd, name, "20"], stdout=subprocess.PIPE, text=True, cwd=HERE)
             for name in ("host-a", "host-b")]
    outs = [p.communicate()[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0] and outs == ["done\n", "done\n"]
    ids = [e["run_id"] for e in store_runs(store_url)]
    # 15 own runs each, and the 5 shared ones once
    assert len(ids) == len(set(ids)) == 35
    assert _counts(store_url) == (35, 35 * 15, 35 * 6)


def test_a_store_that_is_down_is_one_sentence_and_the_files_are_written(tmp_path: Path
                                                                        ) -> None:
    reports = tmp_path / "reports"
    down = "postgresql://specperf@127.0.0.1:9/none"  # the discard port: nothing listens
    with pytest.raises(StoreError) as info:
        _write(reports, down, "r1")
    message = str(info.value)
    assert message.startswith("cannot open the results store "
                              "postgresql://specperf@127.0.0.1:9/none (connection failed: ")
    assert message.endswith("): start the database, or point --specperf-results-db at one "
                            "that runs.")
    assert "\n" not in message
    assert json.loads((reports / "r1" / "results.json").read_text())["run_id"] == "r1"
    assert [e["run_id"] for e in file_runs(reports / "history.jsonl")] == ["r1"]


def test_a_line_cut_short_is_skipped_with_one_warning_naming_it(tmp_path: Path) -> None:
    history = tmp_path / "history.jsonl"
    lines = [json.dumps(history_entry(doc(f"r{i}"), "x")) for i in range(3)]
    history.write_text(lines[0] + "\n" + lines[1][:40] + "\n" + lines[2] + "\n" + "{\n")
    with pytest.warns(HistoryLineSkipped) as caught:
        entries = read_history(history)
    assert [e["run_id"] for e in entries] == ["r0", "r2"]
    assert [str(w.message) for w in caught] == [
        f"{history} line 2 (and 1 more) is not a whole run (cut short?): skipped; the other "
        "2 runs are read."]


def test_the_first_run_into_an_empty_store_brings_the_earlier_history(tmp_path: Path
                                                                      ) -> None:
    reports = tmp_path / "reports"
    reports.mkdir()
    old = [history_entry(doc(f"old{i}"), f"old{i}/results.json") for i in range(2)]
    (reports / "history.jsonl").write_text("".join(json.dumps(e) + "\n" for e in old))
    _write(reports, f"sqlite:///{reports / 'results.db'}", "new")
    assert [e["run_id"] for e in read_history(reports)] == ["old0", "old1", "new"]


def test_the_setting_takes_a_url_or_a_path_and_refuses_a_password(tmp_path: Path) -> None:
    url = "postgresql://perf@db.example:5432/specperf"
    assert resolve({}, {"SPECPERF_RESULTS_DB": url}, {}).results_db == url
    assert resolve({"results_db": str(tmp_path / "r.db")}, {}, {}).results_db == \
        f"sqlite:///{tmp_path / 'r.db'}"
    assert resolve({}, {}, {}).results_db is None
    with pytest.raises(ConfigError) as info:
        resolve({}, {}, {"results_db": "postgresql://perf:hunter2@db/specperf"})
    assert str(info.value) == (
        "ini specperf_results_db: a password in the URL would be recorded in every "
        "results.json: remove it and put it in PGPASSWORD or ~/.pgpass.")
    assert "hunter2" not in str(info.value) and os.environ.get("PGPASSWORD") is None or True
