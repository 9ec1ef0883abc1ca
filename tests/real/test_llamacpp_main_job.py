"""The main job against a real llama-server with a draft model: baseline, then a passing run
that prints avg commit and step time for every case, and step time that rises with context.
Both tests read the same two runs (conftest.main_job: run once per session)."""

from __future__ import annotations

import re

import pytest

from .conftest import results_of
from .helpers import assert_skips_undetermined, fits, table_rows
from .llama_shared import MAIN_CASES

pytestmark = pytest.mark.real_server


def test_main_job_passes_against_its_baseline_and_prints_every_case(main_job):
    main_job.first.result.stdout.fnmatch_lines(["specperf: wrote baseline */tiny-llama/v1.json"])
    second = main_job.second.result
    out = second.stdout.str()
    # 6 context cases and 2 context fits, none failing. A CPU server on 2 shared cores moves
    # between back-to-back runs by more than the tier's limits allow for: its slope by a third
    # (3.8 → 5.1 ms per 1k once in CI), a case's step time (padding-ctx2000 once in CI), a
    # case's prefill by +32 % against what was then a 25 % limit (reasoning-ctx2000, with both
    # fits, in one run; prefill now takes the tier's timing limit, helpers.tier_ini). Each
    # then skips as undetermined with its sentence -- never fails (issue 13); at least half
    # of the eight verdicts still decide, and exact acceptance (below) always does. On a
    # failure the assertion prints the whole run: CI keeps no other trace of which check moved.
    outcomes = second.parseoutcomes()
    assert "failed" not in outcomes and "errors" not in outcomes, (outcomes, out)
    assert outcomes.get("passed", 0) >= 4 and \
        outcomes.get("passed", 0) + outcomes.get("skipped", 0) == 8, outcomes
    assert_skips_undetermined(out)
    assert re.search(rf"^specperf — {re.escape(main_job.second.url)}; llama\.cpp b\S+; "
                     r"acceptance from response;", out, re.M), out
    # Exact acceptance: the run repeats the baseline's prompts (cache_prompt false keeps the
    # cache out), and at temperature 0 every prompt takes the same verify steps again.
    assert re.search(r"^acceptance exact on 6 of 6 cases \(\d+ prompts compared: 6 cases "
                     r"identical, 0 changed\)", out, re.M), out
    rows = table_rows(out)
    assert set(rows) == MAIN_CASES
    for case, (tok_s, commit, step, decode) in rows.items():
        assert tok_s and commit and step and decode, f"{case} lacks a figure: {rows[case]}"
        # a speculative server commits more than one token per step, at most draft_n_max + 1
        assert 1.0 < commit <= 4.0, case
    data = results_of(main_job.second.report_dir)
    assert data["server"]["flavour"] == "llamacpp" and data["server"]["api"] == "llamacpp"
    assert data["server"]["fingerprint"]["speculative_algorithm"] == "draft"


@pytest.mark.parametrize("run", ["first", "second"])
def test_step_time_rises_with_context_on_the_real_server(main_job, run):
    # three contexts, so the residual of the line says something; the baseline run and the
    # run judged against it each show the rise
    out = getattr(main_job, run).result.stdout.str()
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
