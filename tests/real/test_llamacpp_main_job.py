"""The main job against a real llama-server with a draft model: baseline, then a passing run
that prints avg commit and step time for every case, and step time that rises with context."""

from __future__ import annotations

import re

import pytest

from .conftest import results_of
from .helpers import fits, run_suite, table_rows

pytestmark = pytest.mark.real_server

CASES = {"padding-ctx16", "padding-ctx2000", "reasoning-ctx16", "reasoning-ctx2000"}


def test_main_job_passes_against_its_baseline_and_prints_every_case(
        perf_project, start_llama, tiny, tmp_path):
    server = start_llama(tiny.target, draft=tiny.draft)
    project = perf_project()
    first = run_suite(project, server.url, tmp_path / "r1", tmp_path / "b",
                      "--update-baselines")
    first.stdout.fnmatch_lines(["specperf: wrote baseline */tiny-llama/v1.json"])
    second = run_suite(project, server.url, tmp_path / "r2", tmp_path / "b", "-rA")
    out = second.stdout.str()
    # 4 context cases and the padding-vs-prose check pass. A CPU server on 2 shared cores can
    # move its slope by a third between runs (3.8 → 5.1 ms per 1k once in CI); each slope
    # then passes or skips as undetermined with its sentence -- never fails (issue 13).
    outcomes = second.parseoutcomes()
    assert "failed" not in outcomes and "errors" not in outcomes, outcomes
    assert outcomes.get("passed", 0) >= 4 and \
        outcomes.get("passed", 0) + outcomes.get("skipped", 0) == 6, outcomes
    skipped = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    assert all("per 1k context" in line and "neither a pass nor a fail" in line
               for line in skipped), skipped
    assert re.search(rf"^specperf — {re.escape(server.url)}; llama\.cpp b\S+; acceptance from "
                     r"response;", out, re.M), out
    # Exact acceptance: the run repeats the baseline's prompts (cache_prompt false keeps the
    # cache out), and at temperature 0 every prompt takes the same verify steps again.
    assert re.search(r"^acceptance exact on 4 of 4 cases \(\d+ prompts compared: 4 cases "
                     r"identical, 0 changed\)", out, re.M), out
    rows = table_rows(out)
    assert set(rows) == CASES
    for case, (tok_s, commit, step, decode) in rows.items():
        assert tok_s and commit and step and decode, f"{case} lacks a figure: {rows[case]}"
        # a speculative server commits more than one token per step, at most draft_n_max + 1
        assert 1.0 < commit <= 4.0, case
    data = results_of(tmp_path / "r2")
    assert data["server"]["flavour"] == "llamacpp" and data["server"]["api"] == "llamacpp"
    assert data["server"]["fingerprint"]["speculative_algorithm"] == "draft"


def test_step_time_rises_with_context_on_the_real_server(perf_project, start_llama, tiny,
                                                         tmp_path):
    server = start_llama(tiny.target, draft=tiny.draft)
    # three contexts, so the residual of the line says something
    result = run_suite(perf_project(), server.url, tmp_path / "r", tmp_path / "b",
                       "--contexts=16,1000,2000")
    out = result.stdout.str()
    found = fits(out)
    assert set(found) == {"padding", "reasoning"}, out[-2000:]
    rows = table_rows(out)
    for name, (_a, slope_per_1k, residual) in found.items():
        short, long = rows[f"{name}-ctx16"][2], rows[f"{name}-ctx2000"][2]
        assert short is not None and long is not None
        # the rise is far beyond the ~20 % run-to-run noise of 2 shared cores
        assert slope_per_1k > 0 and long > 1.3 * short, (name, short, long)
        print(f"fit {name}: +{slope_per_1k:.2f} ms per 1k context, residual {residual:.2f} ms; "
              f"step {short:.2f} ms at 16 → {long:.2f} ms at 2000")
