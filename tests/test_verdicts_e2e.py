"""Baselines, attributed verdicts and the GPU lock, through real pytest sessions and simulators."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import httpx
import pytest

from perf_project import FAST
from slowb_runs import BUSY_CLIENT_SPREAD, BUSY_CLIENT_TOK_S, kept, once, perf_dir, ran, run_perf
from specperf.measure.lock import lock_path_for

# Whole perf sessions against simulators: `pytest -m slow` (README: test commands).
pytestmark = pytest.mark.slow

HOLDER = Path(__file__).with_name("lock_holder.py")
# Verdicts compare wall-clock figures with a baseline taken moments earlier; at 0.5 a
# simulated step sleeps 14+ ms, so a loaded 2-core box cannot fake a 10% regression.
SCALE = 0.5


@pytest.fixture(scope="module")
def sim(start_sim):
    """The module's simulator; every test starts it with no faults (``clean``)."""
    return start_sim(time_scale=SCALE)


@pytest.fixture(autouse=True)
def clean(sim):
    httpx.post(f"{sim.url}/_sim/reset").raise_for_status()


@pytest.fixture(scope="module")
def written(sim, tmp_path_factory) -> Path:
    """A v1 baseline written once per test run by a clean run (slowb_runs.once)."""
    def produce(folder: Path) -> dict:
        project = perf_dir(folder / "project")
        return kept(run_perf(project, "-m", "context_scaling", "--endpoint", sim.url,
                             "--baseline-dir", str(folder / "baselines"), "--deployment",
                             "test-dep", "--update-baselines", BUSY_CLIENT_SPREAD))

    folder, first = once(tmp_path_factory, "verdicts-v1", produce)
    ran(first).fnmatch_lines(["specperf: wrote baseline */test-dep/v1.json"])
    return folder / "baselines"


@pytest.fixture
def baselined(perf_project, sim, written, tmp_path):
    """The module's simulator, a project, and a copy of the v1 baseline a clean run wrote."""
    project = perf_project()
    base_dir = tmp_path / "baselines"
    shutil.copytree(written, base_dir)
    args = ("-m", "context_scaling", "--endpoint", sim.url, "--baseline-dir", str(base_dir),
            "--deployment", "test-dep")
    return sim, project, args, base_dir


def _inject(sim, **faults):
    httpx.post(f"{sim.url}/_sim/faults", json=faults).raise_for_status()


def test_clean_run_against_its_baseline_passes(baselined):
    sim, project, args, _ = baselined
    result = project.run(*args, "-rs", BUSY_CLIENT_TOK_S, BUSY_CLIENT_SPREAD)
    # The four cases pass. Two contexts 1650 tokens apart leave each slope an error that a
    # loaded box can widen past the tolerance band: a slope passes or skips as undetermined,
    # never fails (issue 13).
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) >= 4 and "failed" not in outcomes \
        and "errors" not in outcomes, outcomes
    assert outcomes.get("passed", 0) + outcomes.get("skipped", 0) == 6, outcomes
    skipped = [line for line in result.stdout.lines if line.startswith("SKIPPED")]
    assert all("-fit" in line or "per 1k context" in line for line in skipped), skipped
    assert all("neither a pass nor a fail" in line for line in skipped), skipped


def _verdicts(xml_path: Path) -> list[dict]:
    """The verdicts a run recorded, read back from its JUnit XML user properties."""
    root = ElementTree.parse(xml_path).getroot()
    return [json.loads(p.get("value")) for p in root.iter("property")
            if p.get("name") == "specperf_verdict"]


def test_acceptance_drop_fails_every_case_attributed_to_acceptance(baselined, tmp_path):
    sim, project, args, _ = baselined
    _inject(sim, acceptance_mult=0.6)
    xml = tmp_path / "junit.xml"
    result = project.run(*args, "-rf", f"--junitxml={xml}")
    out = result.stdout.str()
    failing = [v for v in _verdicts(xml) if v["status"] == "fail"
               and not v["case_id"].endswith("-fit")]
    # ctx13 commits are capped by the short output, so only some cases move past -10%.
    assert len(failing) >= 3, out
    for verdict in failing:
        assert verdict["attribution"]["acceptance"] >= 0.9, verdict
        assert ("— acceptance regression: check the drafter and the text (run-to-run ±3.0% "
                "assumed: no history yet)." in verdict["message"]), verdict["message"]
        assert f"{verdict['case_id']}" in out
    assert "step-time regression" not in out


def test_context_slope_regression_fails_high_context_and_names_the_slope(baselined):
    sim, project, args, _ = baselined
    # 1.8: ctx1663's step time +42 % and tok/s about −25 %, clearly past their limits (at 1.4
    # tok/s fell 10.2 %, on its −10 % limit); ctx13's step time moves 2 %.
    _inject(sim, slope_mult=1.8)
    # The simulator has no night-to-night noise: state its run-to-run noise, or the 3 % prior
    # leaves ctx1663's cases undetermined (the prior is tested in tests/test_sweep.py).
    result = project.run(*args, "-rf", "--specperf-run-noise=0.005")
    # The sentences under FAILURES, each on the line after its test's header.
    result.stdout.fnmatch_lines([
        "_*_ test_context_scaling[[]padding-ctx1663[]] _*_",
        "tok/s * → * (−*%, limit −10%): step time * → * ms (+*%) explains it; avg commit * → * "
        "(*, within noise) — step-time regression: check the kernels, attention backend and KV "
        "cache (run-to-run ±0.5% as stated: no history yet)."], consecutive=True)
    result.stdout.fnmatch_lines([
        "_*_ test_context_fit[[]padding[]] _*_",
        "padding: step time per 1k context * ms (+*%, limit +*%: the step-time tolerance 10% "
        "at context 1695, wider than the slope's 15%; run-to-run ±0.5% as stated: no history "
        "yet) — attention scaling regression: step time grows faster with context than in the "
        "baseline."], consecutive=True)
    outcomes = result.parseoutcomes()
    assert outcomes["failed"] == 4  # two 1663 cases and two fits; the ctx13 cases pass
    assert outcomes["passed"] == 2


def test_update_writes_v2_beside_v1_without_touching_it(baselined):
    sim, project, args, base_dir = baselined
    v1 = (base_dir / "test-dep" / "v1.json").read_bytes()
    result = project.run(*args, "--update-baselines")
    result.stdout.fnmatch_lines(["specperf: wrote baseline */test-dep/v2.json"])
    assert (base_dir / "test-dep" / "v1.json").read_bytes() == v1
    assert json.loads((base_dir / "test-dep" / "v2.json").read_text())["version"] == 2


@pytest.mark.parametrize(("damage", "expected"), [
    (lambda text: text[: len(text) // 2], "*BaselineError: baseline */test-dep/v1.json is not "
                                          "valid JSON*restore it from git*"),
    # whatever schema the suite writes today (2 since baselines carry their lineage)
    (lambda text: re.sub(r'"schema_version": \d+', '"schema_version": 99', text),
     "*BaselineError: baseline */test-dep/v1.json*schema_version*"),
])
def test_corrupt_or_wrong_schema_baseline_is_one_clear_error(baselined, damage, expected):
    sim, project, args, base_dir = baselined
    path = base_dir / "test-dep" / "v1.json"
    path.write_text(damage(path.read_text()))
    result = project.run(*args)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert result.parseoutcomes().get("errors") == 6
    result.stdout.fnmatch_lines([expected])
    assert "Traceback" not in result.stdout.str()


def _hold(lock: Path, seconds: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, str(HOLDER), str(lock), str(seconds)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    proc.stdout.close()
    assert line == "held"
    return proc


def test_second_session_waits_for_the_holder_then_runs(perf_project, sim):
    project = perf_project()
    # The holder lets go only once the session says it is waiting: no race with how long
    # a loaded box takes to start pytest.
    holder = _hold(lock_path_for(sim.url, project.lock_dir), 300)
    env = {**os.environ, "SPECPERF_LOCK_DIR": str(project.lock_dir), "PYTHONUNBUFFERED": "1"}
    run = subprocess.Popen([sys.executable, "-m", "pytest", *FAST, "-m", "context_scaling",
                            "--endpoint", sim.url, "--contexts=13", "--text-classes=padding"],
                           cwd=project.pytester.path, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    seen = []
    try:
        assert run.stdout is not None
        for line in run.stdout:
            seen.append(line.rstrip("\n"))
            if "waiting for the GPU lock" in line:
                break
    finally:
        holder.kill()
        holder.wait()
    rest, _ = run.communicate(timeout=240)
    lines = pytest.LineMatcher(seen + rest.splitlines())
    lines.fnmatch_lines([
        f"specperf: waiting for the GPU lock * held by *pid {holder.pid} since *; waited 0 s "
        "of 1800 s", "*2 skipped*"])
    assert run.returncode == 0


def test_lock_timeout_is_an_error_naming_the_holder(perf_project, sim):
    project = perf_project()
    holder = _hold(lock_path_for(sim.url, project.lock_dir), 30)
    try:
        result = project.run("-m", "context_scaling", "--endpoint", sim.url,
                             "--contexts=13", "--text-classes=padding", "--gpu-lock-timeout=1")
    finally:
        holder.kill()
        holder.wait()
    assert result.parseoutcomes().get("errors") == 2
    result.stdout.fnmatch_lines([f"GpuLockTimeout: GPU lock * held by *pid {holder.pid} since "
                                 "* for longer than the 1 s timeout.*"])


def test_a_killed_holder_frees_the_lock(perf_project, sim):
    project = perf_project()
    holder = _hold(lock_path_for(sim.url, project.lock_dir), 300)
    holder.kill()
    holder.wait()
    result = project.run("-m", "context_scaling", "--endpoint", sim.url, "--contexts=13",
                         "--text-classes=padding", "--gpu-lock-timeout=5")
    result.assert_outcomes(skipped=2)


def test_noisy_cells_error_as_unstable_instead_of_passing_or_failing(baselined):
    sim, project, args, _ = baselined
    _inject(sim, request_noise=0.3)
    result = project.run(*args, "--max-repeats=6")
    outcomes = result.parseoutcomes()
    assert outcomes.get("errors", 0) >= 3, result.stdout.str()
    assert outcomes.get("failed", 0) == 0
    result.stdout.fnmatch_lines([
        "UnstableMeasurement: *-ctx*: * spreads too widely: relative MAD * > 0.10* after 6 "
        "repeats (the bound): the cell cannot be judged*"])


def test_a_different_server_fingerprint_is_stated_first(baselined, start_sim):
    _, project, args, base_dir = baselined
    other = start_sim(profile="alt-eagle3", time_scale=SCALE)
    swapped = [other.url if a.startswith("http://") else a for a in args]
    result = project.run(*swapped)
    out = result.stdout.str()
    result.stdout.fnmatch_lines([  # right under the decision and what regressed
        "specperf: FAIL *",
        "FINGERPRINT DIFFERS FROM THE BASELINE: *",
        " context | class *",
    ])
    assert "FINGERPRINT DIFFERS FROM THE BASELINE: speculative algorithm: DDTREE → EAGLE3" in out
    assert "note: the server differs from the baseline's: draft model: specperf-sim/Kimi-K2.6-" \
           "DFlash-drafter → specperf-sim/Llama-3.3-70B-EAGLE3" in out
