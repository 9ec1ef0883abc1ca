"""Fit uncertainty end to end: real pytest sessions against a real simulator with a baseline.

A slope over contexts 7 tokens apart is undetermined: the fit test skips naming the context to
add, never passes or fails. With step_time_mult 1.3 the case says step time explains the drop
and no "unexplained by the model" line contradicts it.
"""

from __future__ import annotations

import shlex

import httpx
import pytest

from slowb_runs import BUSY_CLIENT_SPREAD, BUSY_CLIENT_TOK_S, kept, once, perf_dir, run_perf

# Whole perf sessions against simulators: the slow set (pytest -m slow).
pytestmark = pytest.mark.slow

ARGS = ("-m", "context_scaling", "--text-classes", "reasoning", "-rs")


@pytest.fixture(scope="module")
def sim(start_sim):
    # Real time: a 64-token ctx13 request lasts ~0.4 s, long against a loaded box's scheduling
    # delays (at 0.25 its tok/s spread 0.20 over 8 repeats at load 10 and the baseline errored).
    return start_sim(time_scale=1.0)


@pytest.fixture(scope="module")
def written(sim, tmp_path_factory):
    """The baseline dir a clean run wrote, once per test run (slowb_runs.once)."""
    def produce(folder):
        project = perf_dir(folder / "project")
        return kept(run_perf(project, *ARGS, "--endpoint", sim.url, "--contexts", "13,20,1663",
                             "--update-baselines", "--baseline-dir", str(folder / "b"),
                             BUSY_CLIENT_SPREAD))

    folder, first = once(tmp_path_factory, "fit-baseline", produce)
    assert first["code"] == 0, first["output"]
    return folder / "b"


@pytest.fixture
def with_baseline(perf_project, sim, written):
    httpx.post(f"{sim.url}/_sim/reset").raise_for_status()
    return perf_project(), sim, ("--endpoint", sim.url, "--baseline-dir", str(written))


def test_close_contexts_skip_the_slope_check_naming_the_context_to_add(with_baseline):
    project, _, where = with_baseline
    result = project.run(*ARGS, *where, "--contexts", "13,20", BUSY_CLIENT_TOK_S,
                         BUSY_CLIENT_SPREAD)
    out = result.stdout.str()
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines([
        "SKIPPED [[]1[]] *: reasoning: step time per 1k context * ± * → * ± * ms (*, limit "
        "+*%: the step-time tolerance 10% at context *, wider than the slope's 15%; "
        "run-to-run ±3.0% assumed: no history yet): "
        "contexts 13,20 lie too close together to determine the slope (±* ms per 1k "
        "against a * ms band), so it is neither a pass nor a fail — add a longer context: "
        "pytest * -m context_scaling --specperf-endpoint * --specperf-baseline-dir * "
        "--specperf-text-classes reasoning --specperf-contexts 13,20,*"])
    assert "attention scaling regression" not in out
    # The advice acts on the run's own server and baselines: followed as printed, it must
    # not measure the embedded simulator against the default baseline directory.
    line = next(x for x in out.splitlines() if x.startswith("SKIPPED") and "add a longer" in x)
    advice = shlex.split(line.split("add a longer context: ", 1)[1])
    assert advice[advice.index("--specperf-endpoint") + 1] == where[1]
    assert advice[advice.index("--specperf-baseline-dir") + 1] == where[3]
    # pytest finds the perf tests as printed: this project has no perf_tests/ folder.
    assert advice[1:3] == ["--pyargs", "specperf.perf_tests"]


def test_a_step_time_regression_is_not_also_called_unexplained(with_baseline):
    project, sim, where = with_baseline
    httpx.post(f"{sim.url}/_sim/faults", json={"step_time_mult": 1.3}).raise_for_status()
    # The simulator has no night-to-night noise: state its run-to-run noise, or the 3 % prior
    # leaves ctx1663's −20 % tok/s undetermined (the prior is tested in tests/test_sweep.py).
    result = project.run(*ARGS, *where, "--contexts", "13,1663", "--specperf-run-noise=0.005")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out
    # The sentence under FAILURES, the line after the case's header.
    result.stdout.fnmatch_lines([
        "_*_ test_context_scaling[[]reasoning-ctx1663[]] _*_",
        "tok/s * → * (−*%, limit −10%): step time * → * ms (+*%) explains it; avg commit * → * "
        "(*, within noise) — step-time regression: check the kernels, attention backend and KV "
        "cache (run-to-run ±0.5% as stated: no history yet)."], consecutive=True)
    assert "unexplained by the model" not in out
    assert "neither acceptance nor" not in out
