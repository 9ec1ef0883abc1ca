"""A persistent regression is one regression, end to end: real nightly sessions against a real
simulator whose step time rose, each night a night of its own (a short night window); the
second and third say it is the same regression, and a night whose acceptance dropped too names
a new one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

# Whole perf sessions against a simulator: the slow set (pytest -m slow).
pytestmark = pytest.mark.slow

ARGS = ("-m", "context_scaling", "--specperf-text-classes", "reasoning", "--specperf-contexts",
        "13", "--output-tokens", "64")
CASE = "reasoning-ctx13"


def _last_record(reports: Path) -> dict[str, Any]:
    line = (reports / "history.jsonl").read_text(encoding="utf-8").splitlines()[-1]
    doc: dict[str, Any] = json.loads(
        (reports / json.loads(line)["results"]).read_text(encoding="utf-8"))
    return doc


def test_the_same_regression_night_after_night_says_so_and_a_new_one_is_new(
        perf_project, start_sim, tmp_path: Path):
    sim = start_sim()
    project = perf_project()
    reports = tmp_path / "r"
    where = ("--endpoint", sim.url, "--baseline-dir", str(tmp_path / "b"), "--deployment", "box",
             "--specperf-report-dir", str(reports), "--specperf-night-window", "0.0001")
    assert project.run(*ARGS, *where, "--specperf-update-baselines").ret == 0
    httpx.post(f"{sim.url}/_sim/faults", json={"step_time_mult": 1.4}).raise_for_status()
    first = project.run(*ARGS, *where)
    assert first.ret == 1, first.stdout.str()
    assert _last_record(reports)["persists"] is None  # the first night: a new regression
    since = _last_record(reports)["created"][:10]
    for nights in (2, 3):
        again = project.run(*ARGS, *where)
        assert again.ret == 1
        persists = _last_record(reports)["persists"]
        assert persists is not None and (persists["nights"], persists["runs"]) == (nights, nights)
        again.stdout.fnmatch_lines([
            f"*the same step-time regression in {CASE} as on every night since {since} "
            f"({nights} nights, {nights} runs)*"])
    httpx.post(f"{sim.url}/_sim/faults", json={"step_time_mult": 1.4, "acceptance_mult": 0.7}
               ).raise_for_status()
    new = project.run(*ARGS, *where)
    assert new.ret == 1
    assert _last_record(reports)["persists"] is None, _last_record(reports)["persists"]
    assert "every night since" not in new.stdout.str()
    new.stdout.fnmatch_lines(["*acceptance and step time moved (1 regression)*"])
