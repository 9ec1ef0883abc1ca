"""Real regressions on a real llama-server fail against the baseline taken before them, each
attributed to its cause. Both are far larger than the ~20 % run-to-run noise of 2 shared
cores, so the verdicts are certain; the tests assert the attribution, not the numbers."""

from __future__ import annotations

import re

import pytest

from specperf.judge.hints import ACCEPTANCE_HINT, STEP_HINT

from .helpers import run_suite
from .llama_shared import MAIN_CONTEXTS

pytestmark = pytest.mark.real_server

# The padding class only: the degenerate-output guard leaves it alone, while a random-weight
# model's greedy output on prose now and then falls into a loop that the guard rightly refuses
# to judge. The acceptance regression runs at the main job's contexts, against its baseline
# (conftest.main_job); the step-time one takes shorter contexts (less prefill, quicker runs).
ACCEPTANCE_CONTEXTS = (MAIN_CONTEXTS, "--specperf-text-classes=padding")
ACCEPTANCE_CASES = ("padding-ctx16", "padding-ctx500", "padding-ctx2000")
# 128 output tokens: the larger target's verify step is several times the tiny one's, so a
# short decode decides it (256 tokens took 107 s of the tier for one run).
CONTEXTS = ("--specperf-contexts=16,300,600", "--specperf-text-classes=padding",
            "--output-tokens=128")
CASES = ("padding-ctx16", "padding-ctx300", "padding-ctx600")
# These regressions are decided by their first requests (the exact acceptance, a step time
# several times the noise); more repeats would only refine a secondary figure near its limit
# (a worse draft's TTFT took one case to the default 20 repeats, 2 minutes of the tier). A case
# about to fail still takes twice the minimum repeats to confirm (measure/repeats.py, rule 4).
DECIDED = ("--specperf-max-repeats=10",)


def outcomes(text: str) -> dict[str, str]:
    """case id → PASSED / FAILED / ERROR, from the short summary (``-rA``)."""
    return {m[2]: m[1] for m in re.finditer(
        r"^(PASSED|FAILED|ERROR) test_context_scaling\.py::test_context_scaling\[(\S+)\]",
        text, re.M)}


def regressions(text: str) -> dict[str, str]:
    """case id → its verdict sentence, as pytest prints it under FAILURES (specperf's closing
    "regressions" block lists each failure only as a one-line headline)."""
    part = text.split(" FAILURES ", 1)[-1] if " FAILURES " in text else ""
    return {m[1]: m[2] for m in re.finditer(
        r"^_+ test_context_scaling\[(\S+-ctx\d+)\] _+\n(.*)$", part, re.M)}


def check_attributed(text: str, hint: str, other: str | None,
                     cases: tuple[str, ...] = CASES) -> None:
    """No case passes; at least two fail, each attributed to ``hint`` and not ``other``.
    A case may instead error as unstable: the suite refuses to judge a cell whose spread is
    too wide (a noisy draft's acceptance varies from prompt to prompt), never passes it."""
    seen, found = outcomes(text), regressions(text)
    assert set(seen) == set(cases) and "PASSED" not in seen.values(), seen
    assert all(seen[c] == "ERROR" for c in cases if c not in found), seen
    assert len(found) >= 2, text[-3000:]
    for case, sentence in found.items():
        assert hint in sentence, sentence
        assert other is None or other not in sentence, sentence
        print(f"{case}: {sentence}")


def baseline_then_run(project, before, after, tmp_path):
    """Write a baseline against ``before`` (a started llama-server), then run the suite
    against ``after`` (another) with that baseline: its result."""
    run_suite(project, before.url, tmp_path / "r1", tmp_path / "b",
              "--specperf-update-baselines", *CONTEXTS
              ).stdout.fnmatch_lines(["specperf: wrote baseline *"])
    return run_suite(project, after.url, tmp_path / "r2", tmp_path / "b", "-rA", *CONTEXTS,
                     *DECIDED)


def test_a_worse_draft_fails_every_case_as_an_acceptance_regression(
        perf_project, llama_pool, tiny, main_job, tmp_path):
    project = perf_project()
    # the main job's target and baseline (tiny draft), now served with a draft of the same
    # size whose weights are noisy
    worse = llama_pool.get(tiny.target, draft=tiny.noisy)
    result = run_suite(project, worse.url, tmp_path / "r2", main_job.baseline_dir, "-rA",
                       *ACCEPTANCE_CONTEXTS, *DECIDED)
    # The sentence leads with the exact acceptance (the same prompts as the baseline's): the
    # drafter is named before any statistics. A worse draft also changes what a verify step
    # costs (llama.cpp stops drafting at the first token under its p-min), so the statistical
    # part may find step time moved too; the attribution is the lead and the acceptance hint.
    text = result.stdout.str()
    # "acceptance regression": the statistics' hint ("…: check the drafter and the text") or,
    # when a loaded box leaves the statistics undetermined, exact acceptance's own ("… (drafter
    # or numerics: here the drafter)"); both name acceptance (CI once printed the second).
    check_attributed(text, "acceptance regression", None, ACCEPTANCE_CASES)
    for sentence in regressions(text).values():
        assert re.match(r"acceptance changed on \d+ of \d+ prompts .*: the output text is "
                        r"the same, so the drafter proposes differently", sentence), sentence
        assert "here the drafter" in sentence, sentence
    # The same prompts as the baseline's: one request per case names the prompts whose
    # verify steps changed, with no statistics needed.
    once = run_suite(project, worse.url, tmp_path / "r3", main_job.baseline_dir, "-rA",
                     "--specperf-repeats=1", "--specperf-max-repeats=1", *ACCEPTANCE_CONTEXTS)
    found = regressions(once.stdout.str())
    assert set(found) == set(ACCEPTANCE_CASES), once.stdout.str()[-3000:]
    for sentence in found.values():
        assert re.match(r"acceptance changed on 1 of 1 prompts \(verify steps \d+ → \d+ on "
                        r"prompt 1;", sentence), sentence


def test_a_larger_target_fails_every_case_as_a_step_time_regression(
        perf_project, llama_pool, tiny, large, tmp_path):
    project = perf_project()
    # Each target drafts for itself, so every draft is accepted on both sides (avg commit
    # is the draft length + 1) and only the cost of a verify step changes.
    result = baseline_then_run(project, llama_pool.get(tiny.target, draft=tiny.target),
                               llama_pool.get(large.target, draft=large.target), tmp_path)
    # A larger target processes its prompt slower too, and prefill is judged: every case names
    # step time (the diagnosis, or what to check after prefill where prefill's share of the
    # drop is the larger one, as at the longest context, where prefill's share is about half),
    # never acceptance.
    text = result.stdout.str()
    check_attributed(text, "check the kernels, attention backend and KV cache", ACCEPTANCE_HINT)
    sentences = regressions(text).values()
    assert any(STEP_HINT in s for s in sentences), text[-3000:]
    for sentence in sentences:
        assert STEP_HINT in sentence or "moved together" in sentence, sentence
