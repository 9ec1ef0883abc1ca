"""Errors stay errors at every level: a test whose inputs errored is a pytest ERROR with the
original sentence — a case, its class's context fit, the sweep-level test (its cases are
measured and judged during setup), and a streaming path — never a failure."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[1]
IGNORE_EOS = ("IgnoreEosNotHonoured: padding-ctx13: asked for exactly 64 tokens with "
              "ignore_eos, got * (finish reason 'stop'): ignore_eos not honoured, so tok/s "
              "would be measured on a different length. Check that the server accepts "
              "ignore_eos on this route.")


@pytest.mark.slow  # a whole perf session against a simulator
def test_every_test_of_a_run_whose_cases_error_is_an_error(perf_project, start_sim):
    sim = start_sim()
    httpx.post(f"{sim.url}/_sim/faults", json={"early_stop_rate": 1.0}).raise_for_status()
    project = perf_project()
    for name in ("test_sweep.py", "test_streaming.py"):
        project.pytester.path.joinpath(name).write_text((ROOT / "perf_tests" / name).read_text())
    result = project.run("-m", "context_scaling or streaming", "--endpoint", sim.url,
                         "--specperf-text-classes", "padding", "--specperf-contexts", "13")
    # the case, its fit, the sweep (its cases measured in setup), two streamed paths
    result.assert_outcomes(errors=5)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    # The sweep meets its case's error again: shown in full once, then pointed at (the
    # record keeps it in full for each test, below).
    result.stdout.fnmatch_lines([IGNORE_EOS, "*ERROR at setup of test_sweep?sweep?*",
                                 "the same error as test_context_scaling?padding-ctx13? above."])
    assert " failed" not in result.stdout.lines[-1]
    [path] = project.pytester.path.glob("reports/*/results.json")
    doc = json.loads(path.read_text())
    sweep = next(k for k in doc["outcomes"] if "test_sweep[sweep]" in k)
    assert doc["outcomes"][sweep] == "error"
    assert doc["errors"][sweep].startswith("IgnoreEosNotHonoured: padding-ctx13: asked for ")
    assert not doc["verdicts"]


# A plugin module in the project: every path's server decode rate is missing, as from a
# server that returns no timings on its stream and serves no /metrics.
NO_SERVER_TIMINGS = '''
import dataclasses
from specperf.measure import paths

_figures = paths.PathRun.figures

def _without_timings(self, name):
    found = _figures(self, name)
    values = {k: v for k, v in found.values.items() if k != "decode_tok_s"}
    return dataclasses.replace(found, values=values)

paths.PathRun.figures = _without_timings
'''


@pytest.mark.slow  # a whole perf session against a simulator
def test_a_comparison_the_figures_cannot_make_is_an_error_not_a_failure(perf_project, start_sim):
    sim = start_sim()
    project = perf_project()
    project.pytester.path.joinpath("test_streaming.py").write_text(
        (ROOT / "perf_tests" / "test_streaming.py").read_text())
    project.pytester.path.joinpath("no_timings.py").write_text(NO_SERVER_TIMINGS)
    project.pytester.path.joinpath("test_context_scaling.py").unlink()
    result = project.run("-p", "no_timings", "-m", "streaming", "--endpoint", sim.url,
                         env={"PYTHONPATH": str(project.pytester.path)})
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*ERROR at setup of test_stream_vs_non_stream*",
                                 "UnmeasuredComparison: not measured: no server decode tok/s "
                                 "(server timings) on the native path*"])
    [path] = project.pytester.path.glob("reports/*/results.json")
    doc = json.loads(path.read_text())
    assert sorted(doc["outcomes"].values()) == ["error", "error"]
    assert {v["status"] for v in doc["verdicts"]} <= {"unmeasured"}
