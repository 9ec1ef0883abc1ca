"""The gate's two phases around a deploy (issue 33): the running deployment measured just
before it as a same-night reference, the candidate judged against it after it.

End to end against real simulator processes: a deploy that changes nothing passes, a 5 % step
rise after the deploy (the simulator restarted on the same port, then its step-time fault set)
fails with exit 1, and a reference of another deployment is exit 2 with its sentence. The
stale, other-endpoint and missing references are checked without a run: they are refused
before any request.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx
import pytest

from sim_fixtures import SimProcess
from slowa_gate import SIM_SCALE
from specperf import cli
from specperf.cli import reference

ROOT = Path(__file__).resolve().parents[1]
GATE = ROOT / "ci" / "gate.sh"
PASS_THROUGH = ("--", "--specperf-output-tokens=200")
DEPLOYMENT = "gate-ref"
URL = "http://127.0.0.1:30000"


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECPERF_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["SPECPERF_LOCK_DIR"] = str(tmp / "locks")
    env["SPECPERF_REPORT_DIR"] = str(tmp / "reports")
    return env


def _gate(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """ci/gate.sh as the deploy pipeline runs it."""
    return subprocess.run(["bash", str(GATE), *args, *PASS_THROUGH], capture_output=True,
                          text=True, env=_env(tmp), timeout=600, check=False)


def _restart(start_sim: Callable[..., SimProcess], old: SimProcess, seed: int,
             **faults: float) -> SimProcess:
    """The "deploy": the server stops and a new one comes up on the same URL."""
    port = old.url.rsplit(":", 1)[1]
    old.stop()
    new = start_sim(time_scale=SIM_SCALE, extra_args=["--port", port, "--seed", str(seed)])
    assert new.url == old.url
    if faults:
        httpx.post(f"{new.url}/_sim/faults", json=faults).raise_for_status()
    return new


@pytest.fixture
def before_deploy(start_sim, tmp_path) -> tuple[SimProcess, Path]:
    """A running deployment and its same-night reference (phase 1)."""
    sim = start_sim(time_scale=SIM_SCALE)
    refs = tmp_path / "reference"
    saved = _gate(tmp_path, "--save-reference", str(refs), "--endpoint", sim.url,
                  "--deployment", DEPLOYMENT)
    assert saved.returncode == 0, saved.stdout + saved.stderr
    pytest.LineMatcher(saved.stdout.splitlines()).fnmatch_lines([
        f"specperf gate: reference saved in {refs}: deployment {DEPLOYMENT} v1, 4 cases at 200 "
        f"output tokens, measured *Z on {sim.url}. After the deploy: `specperf gate "
        f"--reference {refs} --endpoint {sim.url} -- --specperf-output-tokens=200`."])
    doc = json.loads((refs / "reference.json").read_text())
    assert (doc["deployment"], doc["version"], doc["endpoint"], doc["output_tokens"]) == (
        DEPLOYMENT, 1, sim.url, 200)
    assert doc["cases"] == ["padding-ctx13", "padding-ctx3333", "reasoning-ctx13",
                            "reasoning-ctx3333"]
    assert doc["fingerprint"]["model"]
    assert (refs / DEPLOYMENT / "v1.json").is_file()
    return sim, refs


@pytest.mark.slow  # two gate runs and a reference (README: test commands)
def test_a_deploy_that_changes_nothing_passes(start_sim, before_deploy, tmp_path):
    sim, refs = before_deploy
    sim = _restart(start_sim, sim, seed=7)
    result = _gate(tmp_path, "--reference", str(refs), "--endpoint", sim.url)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "--specperf-same-night" in out.splitlines()[0]
    pytest.LineMatcher(out.splitlines()).fnmatch_lines([
        f"specperf gate: 5 smoke cases against {sim.url}, judged against its same-night "
        f"reference (deployment {DEPLOYMENT} v1, 4 cases at 200 output tokens, measured *Z "
        f"on {sim.url})",
        "specperf gate: PASS (exit 0): all 5 smoke cases within their limits."])


@pytest.mark.slow  # two gate runs and a reference (README: test commands)
def test_a_5_percent_step_rise_after_the_deploy_fails_with_exit_1(start_sim, before_deploy,
                                                                 tmp_path):
    sim, refs = before_deploy
    sim = _restart(start_sim, sim, seed=7, step_time_mult=1.05)
    result = _gate(tmp_path, "--reference", str(refs), "--endpoint", sim.url)
    assert result.returncode == 1, result.stdout + result.stderr
    pytest.LineMatcher(result.stdout.splitlines()).fnmatch_lines([
        "  FAIL  smoke subset: *step time*",
        "specperf gate: REGRESSION (exit 1): * of 5 smoke cases regressed: block the deploy."])


@pytest.mark.slow  # a reference (README: test commands)
def test_a_reference_of_another_deployment_is_exit_2_before_any_request(before_deploy,
                                                                        tmp_path):
    sim, refs = before_deploy
    finished = _requests_finished(sim.url)
    result = _gate(tmp_path, "--reference", str(refs), "--endpoint", sim.url,
                   "--deployment", "other")
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.splitlines() == [
        f"specperf gate: the reference in {refs} is of deployment '{DEPLOYMENT}', not 'other': "
        f"measure one of 'other' just before its deploy with `specperf gate --save-reference "
        f"{refs} --endpoint {sim.url} --deployment other -- --specperf-output-tokens=200`."]
    assert _requests_finished(sim.url) == finished


def _requests_finished(url: str) -> float:
    text = httpx.get(f"{url}/metrics").text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("sglang:num_requests_total"))


# -- refused before any run: written references, the command in-process ---------------------------
def _write(directory: Path, *, age_h: float = 0.5, endpoint: str = URL) -> Path:
    created = datetime.now(timezone.utc) - timedelta(hours=age_h)
    ref = reference.Reference(directory, created.replace(microsecond=0), endpoint, DEPLOYMENT,
                              3, ("padding-ctx13", "padding-ctx3333", "reasoning-ctx13",
                                  "reasoning-ctx3333"), 600, {"model": "m"})
    directory.mkdir(parents=True, exist_ok=True)
    (directory / reference.REFERENCE_FILE).write_text(json.dumps(ref.to_dict()))
    return directory


def _refused(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert cli.main(["gate", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    return captured.err


def test_a_stale_reference_is_a_usage_error_naming_its_age(tmp_path, capsys):
    refs = _write(tmp_path / "r", age_h=5.2)
    err = _refused(capsys, "--reference", str(refs), "--endpoint", URL)
    created = json.loads((refs / "reference.json").read_text())["created"]
    assert err == (f"specperf gate: the reference in {refs} is 5.2 h old (measured {created}), "
                   "older than --reference-max-age 4 h: the night has moved on; measure a fresh "
                   f"one just before the deploy with `specperf gate --save-reference {refs} "
                   f"--endpoint {URL}`.\n")
    # A longer window accepts it: the check is the option's, not a constant.
    assert reference.mismatch(reference.load(refs), URL, None, 6.0,
                              reference.now_utc(), "fix") is None


def test_a_reference_of_another_endpoint_is_a_usage_error(tmp_path, capsys):
    refs = _write(tmp_path / "r", endpoint="http://10.0.0.9:30000")
    err = _refused(capsys, "--reference", str(refs), "--endpoint", URL + "/", "--deployment",
                   DEPLOYMENT)
    assert err == (f"specperf gate: the reference in {refs} was measured on "
                   f"http://10.0.0.9:30000, not on {URL}/: measure one on this endpoint just "
                   f"before its deploy with `specperf gate --save-reference {refs} --endpoint "
                   f"{URL}/ --deployment {DEPLOYMENT}`.\n")


def test_no_reference_is_a_usage_error_with_the_command_that_measures_one(tmp_path, capsys):
    refs = tmp_path / "none"
    err = _refused(capsys, "--reference", str(refs), "--endpoint", URL)
    assert err.startswith(f"specperf gate: no usable reference in {refs} (reference.json: ")
    assert err.endswith(f"measure one just before the deploy with `specperf gate "
                        f"--save-reference {refs} --endpoint {URL}`.\n")


@pytest.mark.parametrize(("args", "message"), [
    (["--save-reference", "a", "--reference", "b"],
     "--save-reference measures before the deploy and --reference judges after it: give one "
     "of them per call."),
    (["--reference", "b", "--baseline-dir", "c"],
     "--reference cannot be combined with --baseline-dir: a reference is one endpoint's "
     "deployment measured the same night, and its directory is its baseline directory."),
    (["--save-reference", "a", "--production", URL],
     "--save-reference cannot be combined with --production: a reference is one endpoint's "
     "deployment measured the same night, and its directory is its baseline directory."),
])
def test_a_reference_phase_refuses_options_of_other_modes(capsys, args, message):
    assert _refused(capsys, "--endpoint", URL, *args) == f"specperf gate: {message}\n"


def test_the_reference_subset_is_the_smoke_subsets_grid():
    from specperf.perf_tests.test_sweep import SMOKE_CASES

    assert {c for _, c in SMOKE_CASES} == set(reference.SUBSET_CONTEXTS)
    assert {t for t, _ in SMOKE_CASES} <= set(reference.SUBSET_CLASSES)


def test_phase_1_writes_tonights_run_alone_into_the_reference_directory(tmp_path):
    assert reference.measure_flags(tmp_path) == [
        "--specperf-baseline-dir", str(tmp_path), "--specperf-contexts=13,3333",
        "--specperf-text-classes=padding,reasoning", "--specperf-baseline-repeats=12",
        "--specperf-baseline-runs=1", "--specperf-update-baselines"]


def test_phase_2_judges_exactly_that_version_the_same_night(tmp_path):
    ref = reference.load(_write(tmp_path / "r"))
    assert reference.judge_flags(ref) == [
        "--specperf-baseline-dir", str(tmp_path / "r"), "--specperf-deployment", DEPLOYMENT,
        "--specperf-baseline-version", "3", "--specperf-require-baseline",
        "--specperf-same-night"]
