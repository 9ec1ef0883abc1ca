"""A concurrency run in the trend is a concurrency run: its own kind (never "empty"), a
``--kind concurrency`` choice, and the concurrency baseline it was judged against."""

from __future__ import annotations

import json

from specperf import cli
from specperf.record import trend as record_trend
from specperf.record.files import history_entry


def _line(run_id: str, kind: str, cells: dict, **extra: object) -> dict:
    doc = {"run_id": run_id, "created": f"2026-01-0{run_id[-1]}T02:17:00Z", "server": {},
           "settings": {"endpoint": "http://box:30000"}, "suite_version": "0.1.0",
           "git_revision": "abc", "fingerprint": {}, "baseline": None, "fits": {},
           "verdicts": [], "measurements": {}, "errors": {},
           "run": {"kind": kind, "interrupted": False, "outage": False, "label": kind}, **extra}
    entry = history_entry(doc, f"{run_id}/results.json")
    entry["cells"] = cells
    return entry


CONCURRENCY_BASE = {"deployment": "demo", "version": 3, "path": "b/demo/concurrency/v3.json"}
FULL = {"padding-ctx13": {"tok_s": 50.0, "step_ms": 30.0, "avg_commit": 4.7}}


def test_a_concurrency_run_is_listed_as_one_with_its_baseline(tmp_path, capsys):
    entries = [_line("r1", "full", FULL),
               _line("r2", "concurrency", {}, concurrency_baseline=CONCURRENCY_BASE),
               _line("r3", "full", {})]  # a line with nothing in it stays "empty"
    assert [record_trend.group(e) for e in entries] == ["full", "concurrency", "empty"]
    history = tmp_path / "history.jsonl"
    history.write_text("".join(json.dumps(e) + "\n" for e in entries))
    assert cli.main(["trend", "--history", str(history)]) == 0
    assert capsys.readouterr().out == (
        "specperf: trend: 1 full runs plotted of 3 in the history (listed, not plotted: "
        f"1 concurrency, 1 empty): {tmp_path / 'trend.html'}\n")
    page = (tmp_path / "trend.html").read_text()
    assert ('data-kind="concurrency" data-plotted="no"><td>r2</td><td>2026-01-02T02:17:00Z'
            '</td><td class="">concurrency</td><td>demo</td><td>http://box:30000</td><td>demo v3 '
            '(concurrency)'
            '</td>') in page
    assert cli.main(["trend", "--history", str(history), "--kind", "concurrency"]) == 0
    assert capsys.readouterr().out.startswith(
        "specperf: trend: 1 concurrency runs plotted of 3 in the history")
    page = (tmp_path / "trend.html").read_text()
    assert 'data-kind="concurrency" data-plotted="yes"' in page
    assert ("<p class=\"nothing\">Nothing to plot: no concurrency run in this history holds "
            "per-cell figures (a concurrency run's levels are in its own results.json and "
            "report.html).</p>") in page


def test_a_kind_the_history_does_not_hold_renders_an_empty_trend(tmp_path, capsys):
    history = tmp_path / "history.jsonl"
    history.write_text(json.dumps(_line("r1", "full", FULL)) + "\n")
    assert cli.main(["trend", "--history", str(history), "--kind", "gate"]) == 0
    assert capsys.readouterr().out == (
        "specperf: trend: 0 gate runs plotted of 1 in the history (listed, not plotted: "
        f"1 full): {tmp_path / 'trend.html'}\n")
    page = (tmp_path / "trend.html").read_text()
    assert "<svg" not in page and "Nothing to plot: no gate run in this history" in page
