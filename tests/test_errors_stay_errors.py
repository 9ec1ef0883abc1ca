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
                         "--text-classes", "padding", "--contexts", "13")
    # the case, its fit, the sweep (its cases measured in setup), two streamed paths
    result.assert_outcomes(errors=5)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*ERROR at setup of test_sweep?sweep?*", IGNORE_EOS])
    assert " failed" not in result.stdout.lines[-1]
    [path] = project.pytester.path.glob("reports/*/results.json")
    doc = json.loads(path.read_text())
    sweep = next(k for k in doc["outcomes"] if "test_sweep[sweep]" in k)
    assert doc["outcomes"][sweep] == "error"
    assert doc["errors"][sweep].startswith("IgnoreEosNotHonoured: padding-ctx13: asked for ")
    assert not doc["verdicts"]
