"""Under pytest-xdist the controller holds the session GPU lock; workers never overlap."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from specperf.measure.lock import GpuLock, lock_path_for

# Whole perf sessions against simulators: `pytest -m slow` (README: test commands).
pytestmark = pytest.mark.slow


def test_xdist_workers_share_one_endpoint_without_overlapping(perf_project, start_sim, tmp_path):
    sim = start_sim(time_scale=0.5)
    project = perf_project()
    result = project.run("-n", "2", "-m", "context_scaling", "--endpoint", sim.url,
                         "--baseline-dir", str(tmp_path))
    result.assert_outcomes(skipped=6)
    out = result.stdout.str()
    assert f"specperf — SIMULATED ({sim.url})" in out
    assert "padding" in out and "reasoning" in out
    # Ground truth: no two of the suite's requests ever ran on the server at the same time.
    truth = httpx.get(f"{sim.url}/_sim/truth").json()["requests"]
    spans = sorted((r["received_mono"], r["finished_mono"]) for r in truth)
    assert len(spans) >= 2 + 4 * 4  # two probes, then 4 cases of warm-up + 3 repeats
    for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
        assert start >= end, "two requests overlapped on the server"


def test_xdist_lock_is_held_by_the_controller(perf_project, start_sim, tmp_path):
    sim = start_sim(time_scale=0.5)
    project = perf_project()
    lock_dir = Path(project.lock_dir)
    session_lock = lock_path_for(sim.url, lock_dir)
    # Held by this test: a worker that takes the per-case lock waits for it and times out;
    # the session lock stays free for the controller, which takes it once.
    held = GpuLock(session_lock.with_name(session_lock.name + ".case"), timeout_s=0)
    held.acquire()
    try:
        result = project.run("-n", "2", "-m", "context_scaling", "--endpoint", sim.url,
                             "--specperf-contexts=13", "--baseline-dir", str(tmp_path),
                             "--specperf-gpu-lock-timeout", "1")
    finally:
        held.release()
    outcomes = result.parseoutcomes()
    assert outcomes.get("errors", 0) >= 1 and "passed" not in outcomes, outcomes
    result.stdout.fnmatch_lines([f"*GpuLockTimeout: GPU lock {held.path} held by*"])
    assert f"GPU lock {session_lock} held" not in result.stdout.str()
    # Released locks leave nothing behind.
    assert not list(lock_dir.glob("*.holder.json")), sorted(p.name for p in lock_dir.iterdir())


def test_update_baselines_refuses_to_run_split_over_workers(perf_project, tmp_path):
    result = perf_project().run("-n", "2", "-m", "context_scaling", "--specperf-update-baselines",
                                "--baseline-dir", str(tmp_path))
    assert result.ret == 4  # pytest's usage error
    result.stderr.fnmatch_lines(["*--specperf-update-baselines needs the whole sweep in one "
                                 "process: run it without -n*"])
    assert not any(tmp_path.iterdir())
