"""Real perf sessions writing the dashboards' outputs (docs/dashboards.md): the Prometheus
textfile, the Pushgateway push and the GitHub job summary with its annotations."""

from __future__ import annotations

import shutil

import httpx
import pytest

from slowb_runs import BUSY_CLIENT_SPREAD, perf_dir, run_perf
from specperf.record import readers
from specperf.record import schema as record_schema
from specperf.views import prometheus, screen
from specperf.views.decision import decide
from test_prometheus import gateway, samples  # noqa: F401  (gateway: the recording server)
from test_verdicts_e2e import sim, written  # noqa: F401  (the simulator, its v1 baseline)

# Whole perf sessions against simulators: `pytest -m slow` (README: test commands).
pytestmark = pytest.mark.slow


def test_an_embedded_run_writes_the_textfile_and_summary_and_a_dead_gateway_is_exit_3(
        tmp_path):
    project = perf_dir(tmp_path / "project")
    textfile = tmp_path / "textfile" / "specperf.prom"
    step_summary = tmp_path / "step_summary.md"
    step_summary.write_text("earlier step\n")
    dead = "http://127.0.0.1:9"  # the discard port: nothing listens on loopback
    result = run_perf(project, "-m", "context_scaling", "-k", "padding and ctx13",
                      "--baseline-dir", str(tmp_path / "none"),
                      f"--specperf-prometheus-textfile={textfile}",
                      env={"SPECPERF_REPORT_DIR": str(tmp_path / "reports"),
                           "SPECPERF_PUSHGATEWAY": dead,
                           "GITHUB_STEP_SUMMARY": str(step_summary)})
    assert result.code == 3, result.output
    (run_dir,) = (tmp_path / "reports").glob("2*")
    doc = record_schema.load(run_dir / "results.json")  # the rest of the run is kept
    assert (run_dir / "report.html").exists()
    lines = result.output.splitlines()
    assert f"specperf: Prometheus textfile {textfile}" in lines
    (down,) = [line for line in lines if line.startswith("specperf: NOT published: ")]
    assert down.startswith(f"specperf: NOT published: the Pushgateway {dead} did not take "
                           "the run's metrics (")
    found = samples(textfile.read_text())
    # No baseline: the case is measured, not judged, so the run could not decide.
    assert found["specperf_decision"] == [({"deployment": "sim-kimi-k26-ddtree",
                                            "decision": "undetermined"}, 4)]
    (measured,) = doc["measurements"].values()
    medians = {lab["metric"]: v for lab, v in found["specperf_case_median"]}
    assert medians == {m: readers.median(measured, m) for m in prometheus.MEDIANS}
    assert found["specperf_run_end_timestamp_seconds"][0][1] == prometheus.end_time(doc)
    appended = step_summary.read_text().splitlines()
    assert appended[0] == "earlier step"  # appended, never replaced
    assert appended[1].startswith("## specperf: ")
    assert appended[3] == f"**{screen.decision_line(doc).removeprefix('specperf: ')}**"
    assert appended[-1] == f"Report: `{run_dir / 'report.html'}` (results.json beside it)."
    assert f"| `{measured['case']['id']}` | not judged | " in step_summary.read_text()
    assert not any(line.startswith("::error") for line in lines)



def test_a_regressed_run_pushes_its_verdicts_and_annotates_each_regression(
        sim, written, gateway, perf_project, tmp_path):  # noqa: F811  (fixtures)
    url, received = gateway
    httpx.post(f"{sim.url}/_sim/reset").raise_for_status()
    httpx.post(f"{sim.url}/_sim/faults", json={"acceptance_mult": 0.6}).raise_for_status()
    base_dir = tmp_path / "baselines"
    shutil.copytree(written, base_dir)
    step_summary = tmp_path / "step_summary.md"
    result = perf_project().run(
        "-m", "context_scaling", "--endpoint", sim.url, "--baseline-dir", str(base_dir),
        "--deployment", "test-dep", f"--specperf-pushgateway={url}", BUSY_CLIENT_SPREAD,
        env={"SPECPERF_REPORT_DIR": str(tmp_path / "reports"),
             "GITHUB_STEP_SUMMARY": str(step_summary)})
    (run_dir,) = (tmp_path / "reports").glob("2*")
    doc = record_schema.load(run_dir / "results.json")
    regressions = [v for v in doc["verdicts"] if v["status"] == "fail"]
    assert len(regressions) >= 3, result.stdout.str()  # ctx13's commits are capped: not all
    lines = result.stdout.lines
    assert f"specperf: pushed to {url} (job specperf, deployment test-dep)" in lines
    ((method, path, body),) = received
    assert (method, path) == ("PUT", "/metrics/job/specperf/deployment/test-dep")
    pushed = samples(body)
    assert pushed == samples(prometheus.render(doc))
    counts = {lab["status"]: v for lab, v in pushed["specperf_verdicts"]}
    assert counts["regression"] == len(regressions)
    annotated = [line for line in lines if line.startswith("::error title=specperf regression")]
    assert annotated == [f"::error title=specperf regression%3A {v['case_id']}::"
                         + v["message"].replace("%", "%25") for v in regressions]
    summary = step_summary.read_text().splitlines()
    assert summary[2] == f"**{screen.decision_line(doc).removeprefix('specperf: ')}**"
    assert summary[2].startswith("**FAIL \u2014 acceptance") and decide(doc).word == "FAIL"
    assert [line for line in summary if line.startswith("- :x: ")] == [
        f"- :x: {line}" for line in screen.cause_lines(doc["verdicts"],
                                                        len(doc["measurements"]))]
