"""Acceptance per draft position and along the output, end to end: whole perf sessions
against simulators, checked against the simulator's ground truth (``/_sim/truth``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from slowb_runs import kept, once, perf_dir, ran, run_perf
from specperf.servers.positions import commit_along, conditional_rates, mean_by_index

pytestmark = pytest.mark.slow

ONE_CASE = ("-m", "context_scaling", "--specperf-text-classes", "reasoning", "--specperf-contexts",
            "1663", "--output-tokens", "600")
# vLLM started with --per-request-spec-decode-metrics detailed: per_step_accepted per request.
DETAILED = ('name = "vllm-detailed"\ninherit = "vllm-0.33"\n[flags]\n'
            'per_request_spec_decode_metrics = "detailed"\n')


def results(report_dir: Path) -> dict[str, Any]:
    found = sorted(report_dir.glob("*/results.json"))
    assert len(found) == 1, found
    data: dict[str, Any] = json.loads(found[0].read_text())
    return data


def truth_commits(sim: Any) -> list[list[int]]:
    """Every finished non-background request's commits per verify step, in arrival order."""
    requests = httpx.get(f"{sim.url}/_sim/truth", timeout=30).json()["requests"]
    return [r["commits"] for r in requests
            if not r["background"] and r["completion_tokens"] == 600]


def truth_positions(commits: list[list[int]], depth: int | None = None
                    ) -> list[float | None]:
    """The mean conditional rate per draft position the simulator's commits give: a step
    committing c tokens accepted c − 1 drafts, so positions 0 .. c − 2 (``depth``: positions
    counted, else up to the deepest accepted, at least one)."""
    rates = []
    for steps in commits:
        positions = depth or max(max(steps) - 1, 1)
        accepted = [sum(1 for c in steps if c - 1 > i) for i in range(positions)]
        rates.append(conditional_rates(accepted, len(steps)))
    return mean_by_index(rates)


# The run is what is tested, not its timing: at time scale 0.05 a loaded box's scheduling
# jitter is magnified 20x, and the cell's TTFT once spread 0.34 (relative MAD) over 8 repeats
# at load 10, past the default 0.10, so the run errored as unstable and drew no report.
SPREAD = "--specperf-max-spread=0.6"


def late_fall(start_sim: Any, factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A baseline, then a run whose acceptance fell after output token 300: run once per test
    run (slowb_runs.once) for this module and the report's browser test; its folder holds
    ``r2`` (the second run's report dir) and the result the second run's output and the
    simulator's commits of the requests it made."""
    def produce(folder: Path) -> dict[str, Any]:
        profile = folder / "detailed.toml"
        profile.write_text(DETAILED)
        sim = start_sim(profile=str(profile), time_scale=0.05)
        project = perf_dir(folder / "project")
        args = (*ONE_CASE, "--endpoint", sim.url, "--baseline-dir", str(folder / "b"),
                "--deployment", "along", SPREAD)
        run_perf(project, *args, "--specperf-update-baselines", "--specperf-report-dir",
                 str(folder / "r1")).fnmatch_lines(["specperf: wrote baseline *"])
        httpx.post(f"{sim.url}/_sim/faults", json={"late_accept_mult": 0.4, "late_after": 300},
                   timeout=30).raise_for_status()
        before = len(truth_commits(sim))
        second = run_perf(project, *args, "-rA", "--specperf-report-dir", str(folder / "r2"))
        return {"run": kept(second), "commits": truth_commits(sim)[before:]}

    return once(factory, "late-fall", produce)


@pytest.fixture(scope="module")
def fallen(start_sim, tmp_path_factory):
    return late_fall(start_sim, tmp_path_factory)


def test_late_output_acceptance_fall_is_located_along_the_output(fallen):
    folder, found = fallen
    out = ran(found["run"]).output
    doc = results(folder / "r2")
    shape = doc["acceptance_shapes"]["reasoning-ctx1663"]
    # the curve is what the simulator committed: the mean of each measured request's curve
    samples = doc["measurements"]["reasoning-ctx1663"]["samples"]
    measured = [s for s in samples if not s["warmup"]]
    commits = found["commits"][-len(measured):]
    assert shape["along"] == pytest.approx(mean_by_index(commit_along(c) for c in commits),
                                           abs=1e-3)
    assert shape["along_from"] == "per_step_accepted" and len(shape["along"]) == 6
    early, late = shape["along"][:3], shape["along"][3:]
    base_late = shape["base_along"][3:]
    assert all(n < 0.75 * b for n, b in zip(late, base_late, strict=True)), shape
    # positions come from the response's dense acceptance_histogram (k + 1 entries)
    assert shape["positions_from"] == "acceptance_histogram"
    k = measured[0]["raw"]["num_spec_tokens"]
    assert shape["positions"] == pytest.approx(truth_positions(commits, k), abs=1e-9)
    sentence = next(line for line in out.splitlines()
                    if "Acceptance along the output changed shape" in line)
    print(sentence)
    assert "late-output avg commit fell (tokens 300–600:" in sentence
    assert "while tokens 0–300 held" in sentence
    assert early == pytest.approx(shape["base_along"][:3], rel=0.15)
    report = next((folder / "r2").glob("*/report.html")).read_text()
    assert 'data-plot="along"' in report and 'data-plot="positions"' in report


def test_sglang_positions_come_from_the_accept_histogram(perf_project, start_sim, tmp_path):
    sim = start_sim(time_scale=0.05)
    project = perf_project()
    result = project.run(*ONE_CASE, "--endpoint", sim.url, "--baseline-dir",
                         str(tmp_path / "b"), "--deployment", "pos", "--specperf-update-baselines",
                         "--specperf-report-dir", str(tmp_path / "r"))
    result.stdout.fnmatch_lines(["specperf: wrote baseline *"])
    doc = results(tmp_path / "r")
    shape = doc["acceptance_shapes"]["reasoning-ctx1663"]
    measured = [s for s in doc["measurements"]["reasoning-ctx1663"]["samples"]
                if not s["warmup"]]
    commits = truth_commits(sim)[-len(measured):]
    assert shape["positions_from"] == "accept histogram"
    assert shape["positions"] == pytest.approx(truth_positions(commits), abs=1e-9)
    assert shape["along"] == [] and shape["along_from"] == ""
    report = next((tmp_path / "r").glob("*/report.html")).read_text()
    assert "acceptance along the output not reported by this server" in report
    base = json.loads(next((tmp_path / "b").rglob("v1.json")).read_text())
    assert base["cases"]["reasoning-ctx1663"]["acceptance_positions"] == pytest.approx(
        shape["positions"], abs=1e-4)
