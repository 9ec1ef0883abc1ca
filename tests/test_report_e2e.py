"""Reports of real perf runs against a real simulator: files, schema, trend, secrets, Chromium.

One scenario per module (three pytest sessions against one simulator, sharing a report
directory): a clean run that writes baseline v1; a run with an injected acceptance
regression, a planted API key and pytest-html; a clean run under pytest-xdist.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from browser import chromium, needs_chromium
from perf_project import FAST, ROOT
from slowb_runs import BUSY_CLIENT_SPREAD, BUSY_CLIENT_TOK_S, once
from specperf import cli
from specperf.record import schema as record_schema

# Whole perf sessions against simulators: `pytest -m slow` (README: test commands).
pytestmark = pytest.mark.slow

KEY = "sk-planted-123"


@dataclass
class Run:
    """One finished pytest session of the scenario."""

    output: str
    code: int
    run_dir: Path

    @property
    def doc(self) -> dict:
        return json.loads((self.run_dir / "results.json").read_text())


@dataclass
class Scenario:
    reports: Path
    html: Path
    runs: list[Run]


def _run(project: Path, reports: Path, *args: str, env: dict[str, str] | None = None) -> Run:
    before = {p.name for p in reports.glob("2*")} if reports.exists() else set()
    full_env = {**os.environ, "SPECPERF_LOCK_DIR": str(project / "locks"),
                "SPECPERF_REPORT_DIR": str(reports), **(env or {})}
    proc = subprocess.run([sys.executable, "-m", "pytest", *FAST, *args], cwd=project,
                          env=full_env, capture_output=True, text=True, timeout=240)
    output = proc.stdout + proc.stderr
    new = sorted({p.name for p in reports.glob("2*")} - before)
    assert len(new) == 1, output
    return Run(output, proc.returncode, reports / new[0])


@pytest.fixture(scope="module")
def scenario(start_sim, tmp_path_factory) -> Scenario:
    """The three sessions, run once per test run (slowb_runs.once) and read by every test."""
    def produce(project: Path) -> dict:
        sim = start_sim(time_scale=0.5)
        (project / "pytest.ini").write_text("[pytest]\nfilterwarnings = error\n"
                                            "addopts = --strict-markers\n")
        for name in ("test_context_scaling.py", "test_text_classes.py"):
            shutil.copy(ROOT / "perf_tests" / name, project / name)
        reports, html = project / "reports", project / "pytest-html" / "index.html"
        args = ("-m", "context_scaling", "--endpoint", sim.url, "--baseline-dir",
                str(project / "baselines"), "--deployment", "test-dep")
        runs = [_run(project, reports, *args, "--specperf-update-baselines")]
        httpx.post(f"{sim.url}/_sim/faults", json={"acceptance_mult": 0.6}).raise_for_status()
        runs.append(_run(project, reports, *args, f"--html={html}", "--self-contained-html",
                         env={"SPECPERF_API_KEY_ENV": "MYKEY", "MYKEY": KEY}))
        httpx.post(f"{sim.url}/_sim/faults", json={"acceptance_mult": 1.0}).raise_for_status()
        runs.append(_run(project, reports, *args, "-n", "2", BUSY_CLIENT_TOK_S,
                         BUSY_CLIENT_SPREAD))
        return {"runs": [{"output": r.output, "code": r.code, "run_dir": r.run_dir.name}
                         for r in runs]}

    project, found = once(tmp_path_factory, "report-scenario", produce)
    reports = project / "reports"
    runs = [Run(r["output"], r["code"], reports / r["run_dir"]) for r in found["runs"]]
    return Scenario(reports, project / "pytest-html" / "index.html", runs)


def test_every_run_writes_results_history_and_page(scenario):
    history = (scenario.reports / "history.jsonl").read_text().splitlines()
    assert len(history) == 3
    for run, line in zip(scenario.runs, history, strict=True):
        assert (run.run_dir / "report.html").is_file()
        assert json.loads(line)["results"] == f"{run.run_dir.name}/results.json"
        assert re.search(rf"specperf: report .*{run.run_dir.name}/report.html", run.output)
    assert [r.code for r in scenario.runs] == [0, 1, 0]


def test_results_validate_against_the_schema(scenario):
    for run in scenario.runs:
        assert record_schema.validate(run.doc, record_schema.schema()) == []
        assert record_schema.load(run.run_dir / "results.json")["run_id"] == run.run_dir.name


def test_results_hold_every_sample_and_the_regression(scenario):
    first, regressed, _ = (r.doc for r in scenario.runs)
    assert first["baseline"] is None and first["lock_wait_s"] is not None
    assert regressed["baseline"]["deployment"] == "test-dep"
    assert regressed["baseline"]["version"] == 1
    for data in regressed["measurements"].values():
        assert len(data["samples"]) >= 4  # one warm-up and at least three repeats
        assert all(s["raw"] and s["tok_s"] > 0 for s in data["samples"])
    failing = [v for v in regressed["verdicts"] if v["status"] == "fail"]
    assert failing and all(v["attribution"]["acceptance"] >= 0.9 for v in failing
                           if v["attribution"])
    assert regressed["settings"]["api_key_env"] == "MYKEY"
    assert set(regressed["fits"]) == {"padding", "reasoning"}


def test_xdist_run_reports_once_from_the_controller(scenario):
    doc = scenario.runs[2].doc
    assert len(doc["measurements"]) == 4
    assert doc["baseline"]["version"] == 1  # read from disk: workers measured
    assert not [v for v in doc["verdicts"] if v["status"] == "fail"]


def test_trend_of_three_runs_has_three_points_per_cell(scenario, tmp_path, capsys):
    out = tmp_path / "trend.html"
    # The scenario's two contexts are a custom sweep (record/runkind.py), plotted as such.
    code = cli.main(["trend", "--history", str(scenario.reports / "history.jsonl"),
                     "--out", str(out), "--kind", "custom"])
    assert code == 0, capsys.readouterr().err
    page = out.read_text()
    rows = re.findall(r'data-cell="([^"]+)" data-points="(\d+)"', page)
    assert len(rows) == 3 * 4  # three metrics, four cells
    assert {points for _, points in rows} == {"3"}
    assert "before " + scenario.runs[1].run_dir.name + ": baseline test-dep v1" in page
    assert page.count('<figure class="plot"') == 3


def test_report_command_rerenders_a_results_file(scenario, tmp_path):
    out = tmp_path / "again.html"
    source = scenario.runs[1].run_dir / "results.json"
    assert cli.main(["report", str(source), "--out", str(out)]) == 0
    assert out.read_text() == (scenario.runs[1].run_dir / "report.html").read_text()


def test_pytest_html_gets_columns_and_per_case_extras(scenario):
    page = scenario.html.read_text()
    for header in ("tok/s", "step ms", "avg commit", "Δ tok/s vs baseline"):
        assert header in page
    assert "raw JSON" in page and "samples" in page


def test_the_planted_api_key_appears_nowhere(scenario):
    outputs = [run.output for run in scenario.runs]
    files = [p for p in scenario.reports.rglob("*") if p.is_file()] + [scenario.html]
    outputs += [p.read_text(errors="replace") for p in files]
    assert len(files) >= 7
    leaks = [i for i, text in enumerate(outputs) if KEY in text]
    assert leaks == []


@needs_chromium
def test_regression_report_in_headlesschromium(scenario, tmp_path):
    run = scenario.runs[1]
    url = (run.run_dir / "report.html").as_uri()
    screenshot = tmp_path / "report-top.png"  # tests write only under tmp
    chromium(f"--screenshot={screenshot}", "--window-size=1280,1300", url, tmp=tmp_path)
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    dom = chromium("--dump-dom", url, tmp=tmp_path).stdout
    rows = re.findall(r'<tr class="case" data-case="([^"]+)"', dom)
    assert sorted(rows) == sorted(run.doc["measurements"])
    figures = dom.split('<figure class="plot"')[1:]
    # acceptance per draft position, one per case (judge/positions.py), after the three plots
    shapes = [f for f in figures if f.startswith(' data-plot="positions"')]
    assert len(shapes) == len(run.doc["measurements"])
    assert all(">draft position</text>" in f and "<svg" in f for f in shapes)
    figures = [f for f in figures if f not in shapes]
    assert len(figures) == 3
    for fig in figures:
        body = fig.split("</figure>")[0]
        assert "<svg" in body
        labels = re.findall(r">([^<>]*(?:context|tok/s|step time|avg commit)[^<>]*)</text>",
                            body)
        assert len(labels) >= 2, labels  # x and y axis labels are real text
    failed = [v["case_id"] for v in run.doc["verdicts"] if v["status"] == "fail"]
    for case_id in failed:
        item = re.search(rf'<li class="verdict fail" data-case="{case_id}"[^>]*>(.*?)</li>', dom)
        assert item and "attribution: acceptance" in item.group(1)
