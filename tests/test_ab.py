"""A/B mode: a candidate endpoint judged against production, interleaved, no baseline file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from slowa_runs import Project, load, once, save
from specperf.measure.lock import GpuLock, lock_path_for

# Whole perf sessions against simulators: `pytest -m slow` (README: test commands).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
SCALE = 0.5  # see test_verdicts_e2e: wall-clock comparisons need room on a loaded box
ARGS = ("-m", "context_scaling", "--contexts=13,3333", "--output-tokens=200")


def _pair(start_sim, **candidate_faults):
    production = start_sim(time_scale=SCALE)
    candidate = start_sim(time_scale=SCALE)
    if candidate_faults:
        httpx.post(f"{candidate.url}/_sim/faults", json=candidate_faults).raise_for_status()
    return candidate, production


@pytest.fixture(scope="module")
def identical(start_sim, tmp_path_factory) -> Path:
    """Once per session: an A/B run of two identical simulators, no baseline directory."""
    def produce(root: Path) -> None:
        candidate, production = _pair(start_sim)
        result = Project(root / "project", root / "locks").run(
            *ARGS, "--endpoint", candidate.url, "--compare-endpoint", production.url,
            "--baseline-dir", str(root / "none"))
        save(result, root / "run.json")
    return once(tmp_path_factory, "ab-identical", produce)


def test_identical_endpoints_pass_without_any_baseline(identical):
    load(identical / "run.json").assert_outcomes(passed=6)
    assert not (identical / "none").exists()


def test_a_slower_candidate_fails_on_step_time(perf_project, start_sim):
    # 30 % slower steps: tok/s falls well past the 10 % limit, so the minimum repeats decide
    # (a change near the limit would only add repeats until the verdict is clear).
    # 64 tokens: a 3333-token request still lasts ~21 verify steps of ~50 ms; interleaved, a
    # loaded box's stalls land on both arms alike.
    candidate, production = _pair(start_sim, step_time_mult=1.3)
    result = perf_project().run(*ARGS, "--output-tokens=64", "--endpoint", candidate.url,
                                "--compare-endpoint", production.url)
    assert result.parseoutcomes().get("failed", 0) >= 2, result.stdout.str()
    result.stdout.fnmatch_lines([
        "production → candidate: *step time * ms (+[23]?.?%*) explains it*step-time "
        "regression*"])
    assert "acceptance regression" not in result.stdout.str()


def test_both_endpoints_are_locked_in_a_fixed_order(perf_project, start_sim, identical):
    # The shared identical A/B run took both endpoints' locks: each removed its own file.
    assert list((identical / "locks").glob("gpu-*")) == []
    candidate, production = _pair(start_sim)
    project = perf_project()
    # 64 tokens: this run is about the locks; one context, so no fit to compare.
    result = project.run(*ARGS, "--contexts=13", "--output-tokens=64", "--endpoint",
                         candidate.url, "--compare-endpoint", production.url)
    result.assert_outcomes(passed=2, skipped=2)  # one context: no fit to compare
    assert list(project.lock_dir.glob("gpu-*")) == []  # each lock removed its own file
    # Production's lock is taken too: while another run holds it, the A/B run waits on it.
    held = lock_path_for(production.url, project.lock_dir)
    assert held.name == f"gpu-localhost-{production.url.rsplit(':', 1)[1]}.lock"  # canonical
    with GpuLock(held):
        blocked = project.run(*ARGS, "--contexts=13", "--endpoint", candidate.url,
                              "--compare-endpoint", production.url, "--gpu-lock-timeout=0.5")
    assert f"GPU lock {held} held by" in blocked.stdout.str()


def test_compare_endpoint_without_a_candidate_is_a_usage_error(perf_project):
    result = perf_project().run(*ARGS, "--compare-endpoint", "http://127.0.0.1:9")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--compare-endpoint = http://127.0.0.1:9 needs a candidate: "
                                 "set --specperf-endpoint to the candidate's URL as "
                                 "well."])


def _gate(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECPERF_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["SPECPERF_LOCK_DIR"] = str(tmp_path / "locks")
    env["SPECPERF_REPORT_DIR"] = str(tmp_path / "reports")
    return subprocess.run(["bash", str(ROOT / "ci" / "gate.sh"), *args], capture_output=True,
                          text=True, timeout=300, env=env, check=False)


def test_gate_ab_acceptance_regression_blocks_and_unreachable_is_infrastructure(start_sim,
                                                                                tmp_path):
    # 64 tokens: a 40 % acceptance drop is decided by the minimum repeats (200 tokens cost
    # 2.5 minutes of the slow tier for the same verdict).
    candidate, production = _pair(start_sim, acceptance_mult=0.6)
    blocked = _gate(tmp_path, "--candidate", candidate.url, "--production", production.url, "--",
                    "--output-tokens=64")
    assert blocked.returncode == 1, blocked.stdout + blocked.stderr
    # The gate's answer names the factor and what to check; the verdicts' sentences, read
    # production → candidate, are in pytest's output, kept beside the report.
    flat = " ".join(blocked.stdout.split())
    assert "specperf gate: REGRESSION (exit 1): acceptance regressed in " in flat, blocked.stdout
    assert "check the drafter and the text" in flat, blocked.stdout
    [kept] = [line for line in blocked.stdout.splitlines() if "pytest's output" in line]
    log = Path(kept.rsplit(": ", 1)[1]).read_text()
    assert "production → candidate: tok/s" in log
    assert "acceptance regression: check the drafter and the text." in log
    down = _gate(tmp_path, "--candidate", "http://127.0.0.1:9", "--production", production.url,
                 "--", "--output-tokens=64")
    assert down.returncode == 3, down.stdout + down.stderr
