"""The store's commands fail well: one sentence on stderr, no traceback, the documented exit
code (docs/cli.md: 2 a usage error, 3 an infrastructure problem)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specperf.cli import main
from specperf.record.files import history_entry
from store_fixtures import doc

DOWN = "postgresql://specperf@127.0.0.1:1/specperf"  # port 1: nothing listens
REFUSED = ("cannot open the results store postgresql://specperf@127.0.0.1:1/specperf "
           "(connection failed: connection to server at \"127.0.0.1\", port 1 failed: "
           "Connection refused): start the database, or point --specperf-results-db at one "
           "that runs.")


def _history(tmp_path: Path) -> Path:
    path = tmp_path / "history.jsonl"
    path.write_text(json.dumps(history_entry(doc("n1"), "n1/results.json")) + "\n")
    return path


@pytest.mark.parametrize("command", [["trend", "--history", "{h}"], ["import", "{h}"],
                                     ["export", "--format", "pytorch-v3", "--out", "{o}"]])
def test_an_unreachable_store_is_one_sentence_and_exit_3(command: list[str], tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    args = [a.format(h=_history(tmp_path), o=tmp_path / "out") for a in command]
    assert main([*args, "--db", DOWN]) == 3
    out = capsys.readouterr()
    assert out.err == f"specperf {command[0]}: {REFUSED}\n" and out.out == ""


def test_a_named_file_that_is_no_results_document_is_a_usage_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "results.json"
    bad.write_text('{"run_id": "x", "measure')
    assert main(["import", str(bad), "--db", f"sqlite:///{tmp_path / 'r.db'}"]) == 2
    out = capsys.readouterr()
    assert out.err == (f"specperf import: {bad} is not JSON (Unterminated string starting at: "
                       "line 1 column 17 (char 16)): cut short or not a results.json: nothing "
                       "was imported.\n") and out.out == ""
    bad.write_text("[1, 2]")
    assert main(["import", str(bad), "--db", f"sqlite:///{tmp_path / 'r.db'}"]) == 2
    assert capsys.readouterr().err == (f"specperf import: {bad} is not a results document (no "
                                       "run_id): nothing was imported.\n")


def test_corrupt_files_found_in_a_folder_are_named_in_the_summary(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reports = tmp_path / "reports"
    for run_id in ("good", "bad"):
        (reports / run_id).mkdir(parents=True)
    (reports / "good" / "results.json").write_text(json.dumps(doc("good")))
    (reports / "bad" / "results.json").write_text("{")
    store = f"sqlite:///{tmp_path / 'r.db'}"
    assert main(["import", str(reports), "--db", store]) == 0
    assert capsys.readouterr().out == (
        f"specperf import: 1 new run of 1 found into {store} (0 already there). 1 file "
        f"skipped: {reports / 'bad' / 'results.json'} is not JSON (Expecting property name "
        "enclosed in double quotes: line 1 column 2 (char 1)): cut short or not a "
        "results.json.\n")


@pytest.mark.parametrize("command", [["trend", "--history", "{h}"], ["import", "{h}"],
                                     ["export", "--format", "pytorch-v3", "--out", "{o}"]])
def test_a_password_in_the_url_is_refused_as_the_pytest_option_refuses_it(
        command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [a.format(h=_history(tmp_path), o=tmp_path / "out") for a in command]
    assert main([*args, "--db", "postgresql://perf:secret@db/specperf"]) == 2
    out = capsys.readouterr()
    end = ": nothing was imported." if command[0] == "import" else "."
    assert out.err == (f"specperf {command[0]}: --db: a password in the URL would be recorded "
                       "in every results.json: remove it and put it in PGPASSWORD or "
                       f"~/.pgpass{end}\n") and "secret" not in out.out
