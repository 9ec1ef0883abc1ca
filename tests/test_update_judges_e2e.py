"""A baseline update judges first, end to end: real pytest sessions against a real simulator
whose step time is slowed, so the update that would take the regression on is refused, an
accepted one is written with its acceptance, and an update from a healthy server is written."""

from __future__ import annotations

import html
import json
from pathlib import Path

import httpx
import pytest

from specperf.cli import main
from specperf.settings.config import Settings
from specperf.settings.hints import accept_command, perf_tests_args

# Whole perf sessions against a simulator: the slow set (pytest -m slow).
pytestmark = pytest.mark.slow

ARGS = ("-m", "context_scaling", "--specperf-text-classes", "reasoning", "--specperf-contexts",
        "13", "--output-tokens", "64")
CASE = "reasoning-ctx13"


def test_an_update_against_a_regressed_server_writes_nothing_unless_accepted(
        perf_project, start_sim, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]):
    monkeypatch.delenv("GITHUB_RUN_ID", raising=False)
    sim = start_sim()
    project = perf_project()
    dirs = tmp_path / "b"
    where = ("--endpoint", sim.url, "--baseline-dir", str(dirs), "--deployment", "box",
             "--specperf-update-baselines")
    first = project.run(*ARGS, *where)  # the deployment's first: nothing to judge against
    assert first.ret == 0, first.stdout.str()
    assert json.loads((dirs / "box" / "v1.json").read_text(encoding="utf-8"))["lineage"] == {
        "previous": None, "moved": {}, "accepted": None}

    httpx.post(f"{sim.url}/_sim/faults", json={"step_time_mult": 1.15}).raise_for_status()
    refused = project.run(*ARGS, *where)
    out = refused.stdout.str()
    assert refused.ret == 1, out
    assert not (dirs / "box" / "v2.json").exists()
    line = next(x for x in out.splitlines() if "baseline NOT updated" in x)
    # A 15 % slower step on 5+ requests: a regression, or undetermined with its estimate
    # beyond the limit; either way the update must not take it on.
    assert any(line.startswith(f"specperf: baseline NOT updated: this run is worse than the "
                               f"current baseline in {CASE} ({word}: ")
               for word in ("regression", "undetermined, beyond the limit")), line
    assert "step_ms" in line, line
    command = line.split("accept it with `", 1)[1].rstrip("`.")
    assert command.endswith("--specperf-update-baselines --specperf-accept REASON")
    assert f"--specperf-endpoint {sim.url}" in command and "--specperf-deployment box" in command

    accepted = project.run(*ARGS, *where, "--specperf-accept", "the new drafter is slower")
    assert accepted.ret == 0, accepted.stdout.str()
    accepted.stdout.fnmatch_lines([
        f"*accepted although it regressed in {CASE} (*step_ms*): "
        "the new drafter is slower"])
    doc = json.loads((dirs / "box" / "v2.json").read_text(encoding="utf-8"))["lineage"]
    assert doc["previous"] == 1
    step = doc["moved"][CASE]["step_ms"]
    assert step["low"] < step["change"] < step["high"] and step["change"] > 0.05, step
    assert doc["accepted"]["reason"] == "the new drafter is slower"
    assert "@" in doc["accepted"]["who"]
    doc_who = doc["accepted"]["who"]
    assert [v["case"] for v in doc["accepted"]["verdicts"]] == [CASE]
    assert doc["accepted"]["verdicts"][0]["status"] in ("regression", "undetermined")
    assert "step_ms" in doc["accepted"]["verdicts"][0]["metrics"]

    httpx.post(f"{sim.url}/_sim/faults", json={"step_time_mult": 1.0}).raise_for_status()
    healthy = project.run(*ARGS, *where)  # faster than the accepted v2: improved, written
    assert healthy.ret == 0, healthy.stdout.str()
    doc = json.loads((dirs / "box" / "v3.json").read_text(encoding="utf-8"))["lineage"]
    assert doc["previous"] == 2 and doc["accepted"] is None
    assert doc["moved"][CASE]["step_ms"]["change"] < 0  # back to the healthy step time

    # The run judged against v2 names v2's reason: its record, report.html and the trend.
    reports = project.pytester.path / "reports"
    entry = json.loads((reports / "history.jsonl").read_text(encoding="utf-8").splitlines()[-1])
    why = f"accepted: the new drafter is slower ({doc_who})"
    assert entry["baseline"] == {"deployment": "box", "version": 2, "reason": why}
    record = json.loads((reports / entry["results"]).read_text(encoding="utf-8"))
    assert record["baseline"]["reason"] == {"kind": "accepted", "text": why,
                                            "reason": "the new drafter is slower",
                                            "who": doc_who}
    page = (reports / entry["run_id"] / "report.html").read_text(encoding="utf-8")
    assert f"box v2 (created {record['baseline']['created']}" in page
    assert f"{html.escape(why)})" in page
    capsys.readouterr()
    assert main(["trend", "--history", str(reports), "--kind", "custom"]) == 0
    trend = (reports / "trend.html").read_text(encoding="utf-8")
    assert f"baseline box v2 ({html.escape(why)})" in trend
    assert "baseline box v1 (the deployment&#39;s first version)" in trend

    # `specperf baselines` lists the three versions, oldest first, each with its reason.
    capsys.readouterr()  # the sessions' own output
    assert main(["baselines", "box", "--baseline-dir", str(dirs)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"box ({dirs / 'box'}): 3 versions, oldest first"
    assert lines[1].endswith("1 run; the deployment's first version"), lines
    assert lines[2].endswith(f"accepted: the new drafter is slower ({doc_who})"), lines
    assert main(["baselines", "box", "--baseline-dir", str(dirs), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["versions"]
    steps = [{m["metric"]: m["change"] for m in v["moved"]}.get("step_ms") for v in listed]
    assert steps[0] is None and steps[1] > 0.05 and steps[2] < 0, listed  # type: ignore[operator]
    assert lines[3].endswith("; written by an update that judged no regression"), lines


def test_the_accept_command_is_the_update_plus_the_reason():
    s = Settings(endpoint="http://h:1", deployment="box")
    assert accept_command(s, reason="a b") == " ".join([
        "pytest", *perf_tests_args(), "-m context_scaling --specperf-endpoint http://h:1",
        "--specperf-deployment box --specperf-update-baselines --specperf-accept 'a b'"])
