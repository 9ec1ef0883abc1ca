"""Every run leaves a record that says what kind of run it was; baselines are required where
it matters; advice is a command that works; missing data is never a pass.

Real pytest sessions (pytester subprocesses) against real simulator processes.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from slowb_runs import BUSY_CLIENT_SPREAD
from specperf import cli
from specperf.record import trend as record_trend
from specperf.record.files import history_entry
from specperf.views import trend

# At 0.5 a request of these 64-token cases lasts 0.1-0.5 s of wall time, long against the
# scheduling delays of a loaded 2-core box, so no cell errors as unstable.
SCALE = 0.5


def _finished_requests(url: str) -> float:
    text = httpx.get(f"{url}/metrics").text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("sglang:num_requests_total"))


def _only_record(project_dir: Path) -> tuple[dict, list[dict]]:
    docs = sorted(project_dir.glob("reports/*/results.json"))
    assert len(docs) == 1, docs
    assert docs[0].with_name("report.html").is_file()
    history = (project_dir / "reports" / "history.jsonl").read_text().splitlines()
    return json.loads(docs[0].read_text()), [json.loads(line) for line in history]


@pytest.mark.slow  # a whole perf session or gate run (README: test commands)
def test_a_run_where_every_request_errored_leaves_an_outage_record(perf_project, clean_sim):
    sim = clean_sim
    httpx.post(f"{sim.url}/_sim/faults", json={"error_rate": 1.0, "error_status": 503})
    project = perf_project()
    result = project.run("-m", "context_scaling", "--endpoint", sim.url)
    result.assert_outcomes(errors=6)
    doc, history = _only_record(project.pytester.path)
    # FAST's two contexts are a custom sweep, not the default matrix: labelled as such.
    assert doc["run"] == {"kind": "custom", "interrupted": False, "outage": True, "cases": 6,
                          "measured": 0, "errored": 6, "not_run": 0, "stopped_by": "outage",
                          "scope": "contexts 13, 1663",
                          "label": "custom sweep (contexts 13, 1663), OUTAGE (nothing was "
                                   "measured: 6 of 6 perf tests errored)"}
    assert doc["measurements"] == {} and len(doc["errors"]) == 6
    assert history[0]["outage"] is True and history[0]["label"] == sim.url
    assert "answered HTTP 503" in history[0]["errors"][0]
    page = (next(project.pytester.path.glob("reports/*/report.html"))).read_text()
    assert 'data-kind="partial">custom sweep (contexts 13, 1663), OUTAGE' in page
    result.stdout.fnmatch_lines(["specperf: report reports/*/report.html (this run: custom "
                                 "sweep (contexts 13, 1663), OUTAGE (nothing was measured: 6 of "
                                 "6 perf tests errored))"])


@pytest.mark.slow  # a whole perf session or gate run (README: test commands)
def test_nightly_command_without_a_baseline_errors_before_any_request(perf_project, clean_sim,
                                                                       tmp_path):
    sim = clean_sim
    project = perf_project()
    base = tmp_path / "baselines"
    before = _finished_requests(sim.url)
    result = project.run("-m", "context_scaling", "--endpoint", sim.url, "--baseline-dir",
                         str(base), "--specperf-require-baseline")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(errors=6)
    result.stdout.fnmatch_lines([
        "BaselineError: --specperf-require-baseline: no baseline for deployment "
        f"'sim-kimi-k26-ddtree' in {base}, so no case can be judged: create one with `pytest "
        f"--pyargs specperf.perf_tests -m context_scaling --specperf-endpoint {sim.url} "
        "--specperf-deployment "
        f"sim-kimi-k26-ddtree --specperf-baseline-dir "
        f"{base} --specperf-output-tokens 64 --specperf-update-baselines`."])
    assert _finished_requests(sim.url) == before
    doc, _ = _only_record(project.pytester.path)
    # Nothing was measured, and not because the box was down: the record says why.
    assert (doc["run"]["stopped_by"], doc["run"]["outage"]) == ("no-baseline", False)


@pytest.mark.slow  # a whole perf session or gate run (README: test commands)
def test_a_baseline_missing_some_cases_names_them_before_any_request(perf_project, clean_sim,
                                                                      tmp_path):
    sim = clean_sim
    project = perf_project()
    args = ("--endpoint", sim.url, "--baseline-dir", str(tmp_path / "b"), "--deployment", "d")
    first = project.run("-m", "context_scaling", "--specperf-contexts=13", *args,
                        "--specperf-update-baselines")
    first.stdout.fnmatch_lines(["specperf: wrote baseline */d/v1.json"])
    before = _finished_requests(sim.url)
    result = project.run("-m", "context_scaling", *args, "--specperf-require-baseline")
    result.stdout.fnmatch_lines([
        "BaselineError: --specperf-require-baseline: baseline d v1 has no padding-ctx1663, "
        "reasoning-ctx1663 at 64 output tokens and no padding, reasoning context fit: write a "
        "new version with `pytest --pyargs specperf.perf_tests -m context_scaling "
        "--specperf-endpoint * "
        "--specperf-deployment d "
        "--specperf-baseline-dir * --specperf-output-tokens 64 --specperf-update-baselines`."])
    assert _finished_requests(sim.url) == before


@pytest.mark.slow  # a whole perf session or gate run (README: test commands)
def test_a_corrupt_baseline_is_replaced_by_update_baselines_and_kept(perf_project, clean_sim,
                                                                      tmp_path):
    sim = clean_sim
    project = perf_project()
    folder = tmp_path / "b" / "d"
    folder.mkdir(parents=True)
    (folder / "v1.json").write_text('{"schema_version": 1, "cases": {')  # truncated
    args = ("-m", "context_scaling", "--endpoint", sim.url, "--baseline-dir",
            str(tmp_path / "b"), "--deployment", "d")
    broken = project.run(*args)
    broken.stdout.fnmatch_lines([
        f"BaselineError: baseline {folder / 'v1.json'} is not valid JSON (*): restore it from "
        "git, or write a new version (this file is kept) with `pytest --pyargs "
        f"specperf.perf_tests -m context_scaling --specperf-endpoint {sim.url} "
        "--specperf-deployment d "
        f"--specperf-baseline-dir {tmp_path / 'b'} "
        "--specperf-output-tokens 64 --specperf-update-baselines`."])
    fixed = project.run(*args, "--specperf-update-baselines")
    assert fixed.ret == 0, fixed.stdout.str()
    fixed.stdout.fnmatch_lines([f"specperf: wrote baseline {folder / 'v2.json'}",
                                "  it replaces an unreadable version, kept as it was: baseline "
                                f"{folder / 'v1.json'} is not valid JSON (*)."])
    assert (folder / "v1.json").read_text() == '{"schema_version": 1, "cases": {'
    # The new version loads: nothing errors (pass or fail is the verdicts' business).
    loaded = project.run(*args, "--specperf-require-baseline", BUSY_CLIENT_SPREAD)
    assert loaded.parseoutcomes().get("errors", 0) == 0, loaded.stdout.str()


@pytest.mark.slow  # a whole perf session or gate run (README: test commands)
def test_update_baselines_that_wrote_nothing_exits_non_zero(perf_project, clean_sim, tmp_path):
    sim = clean_sim
    project = perf_project()
    result = project.run("-m", "context_scaling", "-k", "padding-ctx13", "--endpoint", sim.url,
                         "--baseline-dir", str(tmp_path / "b"), "--specperf-update-baselines")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "specperf: baseline NOT updated: 3 planned cases were not measured (padding-ctx1663, "
        "reasoning-ctx13, reasoning-ctx1663…); run the full sweep: `pytest --pyargs "
        f"specperf.perf_tests -m context_scaling --specperf-endpoint {sim.url} "
        "--specperf-baseline-dir "
        f"{tmp_path / 'b'} --specperf-output-tokens "
        "64 --specperf-update-baselines`."])
    assert not (tmp_path / "b").exists()
    doc, _ = _only_record(project.pytester.path)
    assert doc["run"]["kind"] == "subset"


# -- the trend: like with like ----------------------------------------------------------------
def _entry(run_id: str, kind: str, *, tok: float | None = 50.0, **run: object) -> dict:
    cells = {} if tok is None else {"padding-ctx13": {"tok_s": tok, "step_ms": 30.0,
                                                      "avg_commit": 4.7}}
    doc = {"run_id": run_id, "created": f"2026-01-0{run_id[-1]}T02:17:00Z", "server": {},
           "settings": {"endpoint": "http://box:30000"}, "suite_version": "0.1.0",
           "git_revision": "abc", "fingerprint": {}, "baseline": None, "fits": {},
           "verdicts": [], "measurements": {},
           "errors": {"t::x": "EndpointUnreachable: box down"} if run.get("outage") else {},
           "run": {"kind": kind, "interrupted": False, "outage": False, **run,
                   "label": f"label of {run_id}"}}
    entry = history_entry(doc, f"{run_id}/results.json")
    entry["cells"] = cells
    return entry


def test_trend_plots_full_sweeps_and_lists_gate_outage_and_interrupted_runs(tmp_path, capsys):
    entries = [_entry("r1", "full", tok=50.0), _entry("r2", "gate", tok=20.0),
               _entry("r3", "full", tok=None, outage=True),
               _entry("r4", "full", tok=10.0, interrupted=True), _entry("r5", "full", tok=49.0)]
    built = record_trend.build(entries)
    assert [r["run_id"] for r in built.runs] == ["r1", "r5"]
    assert built.series("tok_s") == {"padding-ctx13": [50.0, 49.0]}
    assert trend.describe(built) == ("2 full runs plotted of 5 in the history (listed, not "
                                     "plotted: 1 gate, 1 interrupted, 1 outage)")
    history = tmp_path / "history.jsonl"
    history.write_text("".join(json.dumps(e) + "\n" for e in entries))
    assert cli.main(["trend", "--history", str(history)]) == 0
    assert capsys.readouterr().out == (
        "specperf: trend: 2 full runs plotted of 5 in the history (listed, not plotted: 1 gate, "
        f"1 interrupted, 1 outage): {tmp_path / 'trend.html'}\n")
    page = (tmp_path / "trend.html").read_text()
    assert page.count('data-plotted="no"') == 3
    assert 'data-kind="outage" data-plotted="no"><td>r3</td>' in page
    assert "EndpointUnreachable: box down" in page
    assert cli.main(["trend", "--history", str(history), "--kind", "gate"]) == 0
    assert "1 gate runs plotted of 5" in capsys.readouterr().out
