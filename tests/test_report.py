"""The report's pieces on synthetic runs: document, schema, escaping, secrets, trend, commands.

Plus one real pytester run of the perf tests against the embedded simulator.
"""

from __future__ import annotations

import json
import re

import pytest

from slowb_runs import embedded_main_job
from specperf import cli
from specperf.baselines.store import Baseline
from specperf.core.limits import DEFAULT_TOLERANCES
from specperf.core.model import fit_context
from specperf.judge.verdict import judge_case
from specperf.measure.sample import Measurement, Sample
from specperf.plan.workload import Case
from specperf.record import files as record_files
from specperf.record import results
from specperf.record import schema as record_schema
from specperf.record import scrub as record_scrub
from specperf.record import trend as record_trend
from specperf.views import page, trend

FINGERPRINT = {"model": "kimi-k2.6", "draft_model": "drafter-a", "speculative_algorithm": "DDTREE"}
HOSTILE = '<script>alert("x")</script>'


def fake(text_class: str, context: int, tok_s: float, commit: float, step_ms: float,
         output: int = 600) -> Measurement:
    """A measurement whose every sample reads exactly these medians."""
    case = Case(text_class, context, output)
    steps = round((output - 1) / commit)
    samples = tuple(
        Sample(case.id, i, i < 0, context, output, output / tok_s, steps, steps * step_ms / 1e3,
               0.05, output / steps, 0, "response", "length", 0, {"e2e_s": output / tok_s})
        for i in range(-1, 3))
    return Measurement(case, samples, "server-timings", "response")


def _fits(ms: list[Measurement]) -> dict:
    out = {}
    for name in {m.case.text_class for m in ms}:
        pts = [(m.mean_context, m.summary("step_ms").median) for m in ms
               if m.case.text_class == name]
        out[name] = fit_context(pts)
    return out


def make_doc(*, base_commit: float = 7.8, commit: float = 7.8, server: dict | None = None,
             errors: dict | None = None, fingerprint: dict | None = None,
             run_id: str = "20250101-000000-aaaa", output: int = 600) -> dict:
    """A results document of two classes at two contexts, compared with a v1 baseline."""
    old = [fake(c, x, 60.0, base_commit, 100 + x / 100) for c in ("padding", "reasoning")
           for x in (13, 3333)]
    new = [fake(c, x, 60.0 * commit / base_commit, commit, 100 + x / 100, output)
           for c in ("padding", "reasoning") for x in (13, 3333)]
    base = Baseline.from_run("dep", FINGERPRINT, old, _fits(old), version=1, suite_version="0",
                             git_revision="abc", provenance="test", simulated=False)
    verdicts = [judge_case(m.case.id, m.summaries(), base.cases[m.case.id],
                           DEFAULT_TOLERANCES).to_dict() for m in new
                if output == 600]
    settings = {"endpoint": "http://gpu:30000", "contexts": [13, 3333], "output_tokens": 600,
                "text_classes": ["padding", "reasoning"], "repeats": 3, "api_key_env": "MYKEY"}
    run = results.RunInfo(run_id, "2025-01-01T00:00:00Z", 12.5, 0.25, settings, "0.1.0", "abc")
    server = server or {"url": "http://gpu:30000", "label": "http://gpu:30000", "simulated": False,
                        "model": "kimi-k2.6", "fingerprint": fingerprint or FINGERPRINT,
                        "notes": []}
    return results.build(run, server=server, measurements={m.case.id: m.to_dict() for m in new},
                         verdicts=verdicts, outcomes={"t::a": "passed"},
                         errors=errors or {}, baseline=base)


def test_document_validates_and_the_schema_catches_defects():
    doc = make_doc()
    schema = record_schema.schema()
    assert record_schema.validate(doc, schema) == []
    broken = json.loads(json.dumps(doc))
    del broken["measurements"]
    broken["verdicts"][0]["status"] = "meh"
    broken["measurements_typo"] = 1
    broken["fits"]["padding"]["a_ms"] = "fast"
    problems = record_schema.validate(broken, schema)
    assert "$: 'measurements' is a required property" in problems
    assert ("$: Additional properties are not allowed ('measurements_typo' was unexpected)"
            in problems)
    assert any(p.startswith("$.verdicts[0].status: 'meh' is not one of") for p in problems)
    assert "$.fits.padding.a_ms: 'fast' is not of type 'number'" in problems


def test_results_file_round_trips_and_history_gets_one_line(tmp_path):
    doc = make_doc(commit=5.0)
    path, _ = record_files.write(doc, tmp_path)
    assert record_schema.load(path) == json.loads(json.dumps(doc))
    (line,) = (tmp_path / "history.jsonl").read_text().splitlines()
    entry = json.loads(line)
    assert entry["cells"]["padding-ctx3333"]["avg_commit"] == pytest.approx(599 / 120)
    assert entry["baseline"] == {"deployment": "dep", "version": 1}
    assert entry["failed"] == sorted(doc["measurements"])


def test_the_page_shows_the_diagnosis_first_and_every_case(tmp_path):
    html = page.render(make_doc(commit=5.0))
    assert html.index('id="regressions"') < html.index('id="cases"')
    assert len(re.findall(r'<tr class="case" ', html)) == 4
    assert html.count('<figure class="plot"') == 3
    assert "attribution: acceptance 100%" in html
    assert "http://gpu:30000" in html and "SIMULATED" not in html


def test_a_baseline_at_another_output_length_is_not_compared():
    doc = make_doc(output=64)
    assert doc["reconcile"] == []
    html = page.render(doc)
    cases = html.split('id="cases"')[1].split("</table>")[0]
    assert "Δ tok/s" in cases and "%" not in cases  # no baseline column filled
    assert "predicted tok/s" not in html


def test_server_strings_are_escaped():
    server = {"url": "http://gpu:30000", "label": "x", "simulated": False, "model": HOSTILE,
              "fingerprint": {**FINGERPRINT, "draft_model": HOSTILE}, "notes": [HOSTILE]}
    doc = make_doc(server=server, errors={"t.py::test[padding-ctx13]": f"500: {HOSTILE}"})
    html = page.render(doc)
    assert "<script>" not in html
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html
    assert "draft model: drafter-a" in html  # the fingerprint difference is named


def test_secrets_and_credential_headers_are_scrubbed():
    doc = {"errors": {"n": "401 with Authorization: Bearer sk-live-9 and key sk-live-9",
                      "m": '{"authorization": "Bearer tok-1", "x": 1}'}, "k": ["sk-live-9"]}
    clean = json.dumps(record_scrub.scrub(doc, ["sk-live-9"]))
    assert "sk-live-9" not in clean and "tok-1" not in clean
    assert "Authorization: [redacted]" in clean


def _entry(run_id: str, version: int, drafter: str, tok: float) -> dict:
    return {"run_id": run_id, "created": run_id, "baseline": {"deployment": "dep",
                                                              "version": version},
            "fingerprint": {**FINGERPRINT, "draft_model": drafter},
            "cells": {"padding-ctx13": {"tok_s": tok, "step_ms": 30.0, "avg_commit": 4.7}}}


def test_trend_marks_baseline_versions_and_fingerprint_changes():
    runs = [_entry("r1", 1, "a", 100), _entry("r2", 1, "a", 101), _entry("r3", 1, "b", 80),
            _entry("r4", 2, "b", 80)]
    built = record_trend.build(runs)
    assert built.boundaries == [(0, "baseline dep v1"), (2, "fingerprint: draft model: a \u2192 b"),
                                (3, "baseline dep v2")]
    assert built.series("tok_s") == {"padding-ctx13": [100, 101, 80, 80]}
    html = trend.render(built)
    assert "before r3: fingerprint: draft model: a \u2192 b" in html
    assert html.count("<svg") == 3


def test_commands_say_what_is_wrong_with_their_input(tmp_path, capsys):
    bad = tmp_path / "results.json"
    bad.write_text('{"schema": "specperf-results"}')
    assert cli.main(["report", str(bad)]) == 2
    assert "is not a specperf results file" in capsys.readouterr().err
    history = tmp_path / "history.jsonl"
    # A line cut short by a crash is skipped and said (the one history reader); the rest of
    # the history is still drawn.
    history.write_text(json.dumps(_entry("r1", 1, "a", 1)) + "\n{oops\n")
    assert cli.main(["trend", "--history", str(history)]) == 0
    assert (f"specperf trend: {history} line 2 is not a whole run (cut short?): skipped; the "
            "other 1 runs are read.") in capsys.readouterr().err
    assert cli.main(["trend", "--history", str(tmp_path / "none.jsonl")]) == 2
    assert "none.jsonl holds no runs: perf runs append to reports/history.jsonl; pass " \
        "--history." in capsys.readouterr().err
    history.write_text("\n")
    assert cli.main(["trend", "--history", str(history)]) == 2
    assert "holds no runs" in capsys.readouterr().err


@pytest.mark.slow  # a whole perf session or gate run (README: test commands)
def test_a_perf_run_writes_its_report_and_says_where(tmp_path_factory):
    # the main job's session (slowb_runs.embedded_main_job, shared with test_main_job)
    folder, result = embedded_main_job(tmp_path_factory)
    reports = folder / "reports"
    result.fnmatch_lines(["specperf: report */report.html (this run: *)"])
    (run_dir,) = reports.glob("2*")
    doc = record_schema.load(run_dir / "results.json")
    assert doc["server"]["simulated"] and len(doc["measurements"]) == 4
    assert len((reports / "history.jsonl").read_text().splitlines()) == 1
    html = (run_dir / "report.html").read_text()
    assert "SIMULATED" in html and "<svg" in html and "<link" not in html


@pytest.mark.slow  # a whole perf session or gate run (README: test commands)
def test_a_run_without_measurements_writes_nothing(perf_project, tmp_path):
    reports = tmp_path / "reports"
    result = perf_project().run("-k", "no_such_test", env={"SPECPERF_REPORT_DIR": str(reports)})
    assert "specperf: report" not in result.stdout.str()
    assert not reports.exists()
