"""examples/prometheus/specperf.rules.yml and the gauges it reads, checked by Prometheus's own
promtool (Debian's ``prometheus`` package; .ci/run installs it): the rules load, the
exposition text lints clean, and each alert fires on the series a run renders."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from specperf.views import prometheus
from test_prometheus import samples
from test_report import make_doc

RULES = Path(__file__).resolve().parents[1] / "examples" / "prometheus" / "specperf.rules.yml"
DAY_AND_THREE_HOURS_MIN = 27 * 60


def promtool(*args: str, stdin: str = "", cwd: Path | None = None
             ) -> subprocess.CompletedProcess[str]:
    """promtool run with ``args``; a missing promtool is a failure saying how to get it."""
    exe = shutil.which("promtool")
    if exe is None:
        pytest.fail("promtool is not installed: apt-get install -y prometheus (.ci/run does)")
    return subprocess.run([exe, *args], input=stdin, capture_output=True, text=True,
                          timeout=60, cwd=cwd)


def regressed() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(json.dumps(make_doc(commit=5.0)))
    return doc


def test_the_rules_file_loads_with_its_three_alerts():
    checked = promtool("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 3 rules found" in checked.stdout
    names = [r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    assert names == ["SpecperfRegression", "SpecperfNightlyMissing", "SpecperfInfrastructure"]


def test_the_exposition_text_lints_clean():
    for doc in (regressed(), json.loads(json.dumps(make_doc(errors={"t::b": "refused"})))):
        linted = promtool("check", "metrics", stdin=prometheus.render(doc))
        assert (linted.returncode, linted.stdout, linted.stderr) == (0, "", "")


def _series(doc: dict[str, Any], deployment: str) -> list[dict[str, str]]:
    """Every sample of the run's rendering as a promtool input series, constant for 28 h,
    its end time at the test's epoch (0) so the nightly check sees it age."""
    out = []
    for name, found in samples(prometheus.render(doc)).items():
        for labels, value in found:
            labels = {**labels, "deployment": deployment}
            text = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
            value = 0.0 if name == "specperf_run_end_timestamp_seconds" else value
            out.append({"series": f"{name}{{{text}}}", "values": f"{value}x1700"})
    return out


def test_each_alert_fires_on_what_a_run_renders(tmp_path):
    doc = regressed()
    doc["verdicts"][0]["factor"] = "avg commit"  # one names its factor, as a sweep's does
    broken = json.loads(json.dumps(make_doc(errors={"t::b": "refused"})))
    regression = []
    for verdict in doc["verdicts"]:
        case, factor = verdict["case_id"], verdict["factor"]
        labels = {"severity": "page", "deployment": "dep", "case": case,
                  "status": "regression", **({"factor": factor} if factor else {})}
        regression.append({"exp_labels": labels, "exp_annotations": {
            "summary": f"specperf: dep regressed in {case}",
            "description": f"The last specperf run of dep judged {case} a regression"
                           + (f" of {factor}" if factor else "") + ": open its report "
                           "(results.json beside it) for the attributed sentence."}})
    late = [{"exp_labels": {"severity": "ticket", "deployment": d}, "exp_annotations": {
        "summary": f"specperf: no run of {d} for over 26 hours",
        "description": f"The last specperf run of {d} ended 1d 3h 0m 0s ago: check the "
                       "nightly job's schedule and runner."}} for d in ("box", "dep")]
    infrastructure = [{"exp_labels": {"severity": "ticket", "deployment": "box",
                                      "decision": "infrastructure"}, "exp_annotations": {
        "summary": "specperf: the run of box could not measure",
        "description": "A test of the last specperf run of box errored (endpoint "
                       "unreachable, GPU lock, unstable figures, missing baseline): its "
                       "report's Errors section says which; nothing was judged from it."}}]
    tests = {"rule_files": [str(RULES)], "evaluation_interval": "1m", "tests": [{
        "interval": "1m",
        "input_series": _series(doc, "dep") + _series(broken, "box"),
        "alert_rule_test": [
            {"eval_time": "10m", "alertname": "SpecperfRegression", "exp_alerts": regression},
            {"eval_time": "10m", "alertname": "SpecperfNightlyMissing", "exp_alerts": []},
            {"eval_time": f"{DAY_AND_THREE_HOURS_MIN}m", "alertname": "SpecperfNightlyMissing",
             "exp_alerts": late},
            {"eval_time": "10m", "alertname": "SpecperfInfrastructure",
             "exp_alerts": infrastructure},
        ]}]}
    path = tmp_path / "specperf.rules.test.yml"
    path.write_text(yaml.safe_dump(tests))
    tested = promtool("test", "rules", str(path))
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout
