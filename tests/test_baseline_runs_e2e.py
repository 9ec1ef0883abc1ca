"""A baseline from several runs, end to end: real pytest sessions against a real simulator, the
report history they leave, and the file ``--specperf-baseline-runs`` writes from it."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import httpx
import pytest

# Whole perf sessions against a simulator: the slow set (pytest -m slow).
pytestmark = pytest.mark.slow

ARGS = ("-m", "context_scaling", "--specperf-text-classes", "reasoning", "--specperf-contexts",
        "13", "--output-tokens", "64")


def _slots(doc: dict[str, Any], metric: str) -> dict[int, float]:
    samples = doc["measurements"]["reasoning-ctx13"]["samples"]
    return {s["repeat"]: s[metric] for s in samples if not s["warmup"]}


def test_a_baseline_from_two_runs_holds_each_request_slots_median(perf_project, start_sim,
                                                                   tmp_path: Path):
    sim = start_sim()
    project = perf_project()
    where = ("--endpoint", sim.url, "--baseline-dir", str(tmp_path / "b"),
             "--specperf-report-dir", str(tmp_path / "r"))
    first = project.run(*ARGS, *where, "--deployment", "box")
    assert first.ret == 0, first.stdout.str()
    other = project.run(*ARGS, *where, "--deployment", "other")  # never merged into box's
    assert other.ret == 0, other.stdout.str()
    second = project.run(*ARGS, *where, "--deployment", "box", "--specperf-update-baselines",
                         "--specperf-baseline-runs", "3")
    assert second.ret == 0, second.stdout.str()
    history = [json.loads(line) for line in
               (tmp_path / "r" / "history.jsonl").read_text(encoding="utf-8").splitlines()]
    ids = [entry["run_id"] for entry in history]
    second.stdout.fnmatch_lines([
        f"*merged from 2 of the 3 runs asked for ({ids[2]}, {ids[0]}): {tmp_path / 'r'} holds "
        "no more runs of box with this fingerprint that measured every case."])
    base = json.loads((tmp_path / "b" / "box" / "v1.json").read_text(encoding="utf-8"))
    assert base["runs"] == [ids[2], ids[0]]
    docs = [json.loads((tmp_path / "r" / e["results"]).read_text(encoding="utf-8"))
            for e in history]
    for metric in ("tok_s", "step_ms", "avg_commit"):
        runs = [_slots(docs[2], metric), _slots(docs[0], metric)]
        slots = sorted(set(runs[0]) | set(runs[1]))
        want = [statistics.median(r[k] for r in runs if k in r) for k in slots]
        got = base["cases"]["reasoning-ctx13"]["metrics"][metric]
        assert got["values"] == pytest.approx(want), metric
        assert got["median"] == pytest.approx(statistics.median(want)), metric
        assert got["n"] == len(slots) >= 5  # at least the baseline run's 5 (PerfProject)


def test_a_run_that_regressed_is_left_out_of_the_merge_and_named(perf_project, start_sim,
                                                                 tmp_path: Path):
    sim = start_sim()
    project = perf_project()
    where = ("--endpoint", sim.url, "--baseline-dir", str(tmp_path / "b"),
             "--specperf-report-dir", str(tmp_path / "r"), "--deployment", "box")
    assert project.run(*ARGS, *where, "--specperf-update-baselines").ret == 0
    assert project.run(*ARGS, *where).ret == 0
    httpx.post(f"{sim.url}/_sim/faults", json={"step_time_mult": 1.4}).raise_for_status()
    slow = project.run(*ARGS, *where)
    assert slow.ret == 1, slow.stdout.str()
    httpx.post(f"{sim.url}/_sim/faults", json={"step_time_mult": 1.0}).raise_for_status()
    update = project.run(*ARGS, *where, "--specperf-update-baselines",
                         "--specperf-baseline-runs", "4")
    assert update.ret == 0, update.stdout.str()
    ids = [json.loads(line)["run_id"] for line in
           (tmp_path / "r" / "history.jsonl").read_text(encoding="utf-8").splitlines()]
    update.stdout.fnmatch_lines([
        f"*merged from 3 of the 4 runs asked for ({ids[3]}, {ids[1]}, {ids[0]}): "
        f"{tmp_path / 'r'} holds no more runs of box with this fingerprint that measured "
        "every case, besides the 1 left out.",
        f"  left out 1 run that regressed: {ids[2]} (step time in reasoning-ctx13); a "
        "regressed run enters a merge only when the update accepts that regression."])
    base = json.loads((tmp_path / "b" / "box" / "v2.json").read_text(encoding="utf-8"))
    assert base["runs"] == [ids[3], ids[1], ids[0]]
