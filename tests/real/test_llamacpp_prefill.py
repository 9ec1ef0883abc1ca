"""Real llama-servers: a prefill regression, and a server whose acceptance is pinned.

A server with a smaller physical batch (``-ub 32``: the prompt is processed 32 tokens at a
time) fails as a prefill regression against the same model with the default batch, with step
time and acceptance unchanged. The two run side by side in the suite's A/B mode
(``--specperf-compare-endpoint``), their requests interleaved one by one: on a shared 2-core
machine the load moves by 2x within minutes, and a baseline taken before the restart once read
695 ms against a loaded run whose -ub 32 prefill fell from 1200 to 700 ms as the load lifted
(no cache: every answer had ``cache_n`` 0, and llama.cpp re-evaluates an identical prompt when
``cache_prompt`` is false). Interleaved, load drift lands on both arms alike.
Each target drafts for itself, so every draft is accepted on both sides (avg commit is the
draft length + 1) and the verify step is a 4-token batch either way: only prompt processing
changes. At 1500 tokens the default batch takes about 310 ms and -ub 32 about 690 ms on this
machine's quiet cores (2.2x; 1.45x at 800 tokens); at 40 tokens the rise stays under the 10 ms
floor a prefill rise must pass (measured 6.9 → 8.0 ms). 512 output tokens keep the request's
decode (about 0.9 s) long enough that tok/s falls about 25 %, inside its 40 % limit, so the
sentence is the prefill-only one; at 128 tokens tok/s fell 50 % and the sentence became
``tok/s … : prefill (TTFT) … explains it``, whichever side of 40 % the load put it.
"""

from __future__ import annotations

from typing import Any

import pytest

from specperf.core.limits import DEFAULT_TOLERANCES
from specperf.judge.hints import ACCEPTANCE_HINT, PREFILL_HINT, STEP_HINT
from specperf.judge.verdict import PINNED_REASON

from .conftest import results_of
from .helpers import run_suite, tier_ini

pytestmark = pytest.mark.real_server

CONTEXTS = ("--specperf-contexts=40,1500", "--specperf-text-classes=padding", "--output-tokens=512")
LONG = "padding-ctx1500"


def _verdict(doc: dict[str, Any], case_id: str) -> dict[str, Any]:
    found = [v for v in doc["verdicts"] if v["case_id"] == case_id]
    assert len(found) == 1, doc["verdicts"]
    return found[0]


def _ttft(doc: dict[str, Any], case_id: str) -> float:
    return float(doc["measurements"][case_id]["summaries"]["ttft_ms"]["median"])


# The prefill regression is judged against the default prefill limit (+25 %), not the tier's
# timing limit: an A/B run measures both servers the same minute, and -ub 32 moves TTFT +120 %.
DEFAULT_PREFILL = tier_ini(ttft=None)


def test_a_smaller_prompt_batch_fails_as_a_prefill_regression(
        perf_project, llama_pool, tiny, tmp_path):
    production = llama_pool.get(tiny.target, draft=tiny.target)
    candidate = llama_pool.get(tiny.target, draft=tiny.target, extra=("-ub", "32"))
    # At most 10 pairs a case (the tier's default is 20): the 1500-token case decides in 6,
    # and the 40-token case, which only must not fail, spent 20 pairs (40 s) undecided.
    result = run_suite(perf_project(), candidate.url, tmp_path / "r", tmp_path / "none", "-rA",
                       "--specperf-compare-endpoint", production.url, *CONTEXTS,
                       "--specperf-max-repeats=10", ini_text=DEFAULT_PREFILL)
    out = result.stdout.str()
    doc = results_of(tmp_path / "r")
    for case_id in sorted(doc["measurements"]):
        ttft = _verdict(doc, case_id)["details"]["ttft_ms"]
        each = [round(s["ttft_ms"]) for s in doc["measurements"][case_id]["samples"]]
        print(f"{case_id}: TTFT {ttft['base']:.1f} → {ttft['new']:.1f} ms; -ub 32 each {each}")
    verdict = _verdict(doc, LONG)
    print(f"{LONG}: {verdict['message']}")
    assert verdict["status"] == "fail", out[-3000:]
    assert verdict["message"].startswith("production → candidate: prefill (TTFT) "), verdict
    assert PREFILL_HINT in verdict["message"], verdict["message"]
    assert ACCEPTANCE_HINT not in out and STEP_HINT not in out, out[-3000:]
    # -ub 32 still holds a 40-token prompt in one batch: nothing to fail there. A loaded box
    # moves a 40-token case a lot between the two servers (production's TTFT 18 -> 12 ms, tok/s
    # +46 %): noted, or undetermined when a move on the bad side is not sure; never a failure.
    assert _verdict(doc, "padding-ctx40")["status"] in ("pass", "noted", "undetermined"), \
        doc["verdicts"]
    details = verdict["details"]
    assert details["ttft_ms"]["change"] > 2 * DEFAULT_TOLERANCES["ttft_ms"], details  # +120 %
    # The tier's own limits (helpers.TOLERANCES): step time 40 %, acceptance 15 %.
    assert abs(details["step_ms"]["change"]) < 0.4, details
    assert abs(details["avg_commit"]["change"]) < 0.15, details
    assert details["ttft_ms"]["limit"] == DEFAULT_TOLERANCES["ttft_ms"]
    # Tok/s predicted with each side's own prefill: the slowdown is explained, not flagged.
    assert "unexplained by the model" not in out, out[-3000:]
    # The sentence once, under FAILURES; the closing list one headline per case.
    result.stdout.fnmatch_lines(["production → candidate: prefill (TTFT) * ms (+*%, limit +25%) "
                                 "while tok/s * stayed within its limit*",
                                 f"  {LONG}: prefill (TTFT) * ms (+*%, limit +25%) — prefill "
                                 "regression"])
    assert not (tmp_path / "none").exists()  # A/B: production stands in, no baseline file


def test_pinned_acceptance_judges_step_time_only(perf_project, llama_pool, tiny, tmp_path):
    """With ``--spec-synth-len`` the acceptance is a dial: turned from 2 to 3 tokens per step,
    tok/s moves with it, yet nothing fails on acceptance: it is not judged, step time is."""
    project = perf_project()
    # --specperf-max-spread: the same kind of dialled server spread 0.30-0.35 (relative MAD) in step
    # time at ctx500 on a loaded box (test_llamacpp_positions) and errored as unstable; this
    # test asserts what is judged, not a pass.
    contexts = ("--specperf-contexts=40,1000", "--specperf-text-classes=padding",
                "--output-tokens=128", "--specperf-max-spread=0.6")
    before = llama_pool.get(tiny.target, draft=tiny.draft, extra=("--spec-synth-len", "2"))
    run_suite(project, before.url, tmp_path / "r1", tmp_path / "b", "--specperf-update-baselines",
              *contexts).stdout.fnmatch_lines(["specperf: wrote baseline *"])
    after = llama_pool.get(tiny.target, draft=tiny.draft, extra=("--spec-synth-len", "3"))
    result = run_suite(project, after.url, tmp_path / "r2", tmp_path / "b", "-rA", *contexts)
    result.stdout.fnmatch_lines([
        "acceptance pinned (synthetic): step time and context fit judged only (the server runs "
        "with --spec-synth-len 3;*"])
    doc = results_of(tmp_path / "r2")
    assert doc["fingerprint"]["acceptance_pinned"] == "--spec-synth-len 3"
    cases = [v for v in doc["verdicts"] if not v["case_id"].endswith("-fit")]
    assert len(cases) == 2, doc["verdicts"]
    for verdict in cases:
        print(f"{verdict['case_id']}: {verdict['message']}")
        assert PINNED_REASON in verdict["message"], verdict
        assert set(verdict["details"]) <= {"step_ms", "ttft_ms"}, verdict
        assert "step_ms" in verdict["details"], verdict
        assert ACCEPTANCE_HINT not in verdict["message"], verdict
    commits = {cid: m["summaries"]["avg_commit"]["median"]
               for cid, m in doc["measurements"].items()}
    base = {cid: m["summaries"]["avg_commit"]["median"]
            for cid, m in results_of(tmp_path / "r1")["measurements"].items()}
    print(f"avg commit {base} → {commits}")
    assert all(commits[c] > base[c] * 1.15 for c in commits), (base, commits)  # the dial moved
