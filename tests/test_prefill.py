"""Prefill (time to first token) as a judged case metric: its own tolerance, its own
sentence, never blamed on acceptance or step time (the reconcile predicts it: test_reconcile.py)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import httpx
import pytest

from specperf.baselines.store import Baseline, CaseBaseline
from specperf.core.fingerprint import pinned_line
from specperf.core.limits import DEFAULT_TOLERANCES, DIRECTION
from specperf.core.stats import Summary
from specperf.judge.hints import PREFILL_HINT, STEP_HINT
from specperf.judge.verdict import PINNED_REASON, judge_case
from specperf.measure.repeats import decide_repeats
from specperf.measure.sample import Sample, sample_values
from specperf.servers.pinned import pinned_acceptance

TOL = dict(DEFAULT_TOLERANCES)
N = 600
COMMIT, STEP = 7.85, 144.0
CASE = "padding-ctx5553"


def tok_s(prefill_ms: float, commit: float = COMMIT, step: float = STEP) -> float:
    """tok/s of a request whose wall time is its prefill plus its verify steps."""
    return N / ((prefill_ms + (N - 1) / commit * step) / 1000.0)


def summaries(prefill: float | None, commit: float = COMMIT,
              step: float = STEP, mad: float = 0.0) -> dict[str, Summary]:
    out = {"tok_s": Summary(tok_s(prefill or 0.0, commit, step), mad, 5),
           "avg_commit": Summary(commit, mad, 5), "step_ms": Summary(step, mad, 5)}
    if prefill is not None:
        out["ttft_ms"] = Summary(prefill, mad, 5)
    return out


def baseline(prefill: float | None) -> CaseBaseline:
    return CaseBaseline("padding", 5553, N, summaries(prefill), {})


def test_prefill_is_a_metric_that_must_not_rise_with_its_own_tolerance() -> None:
    assert DIRECTION["ttft_ms"] == -1
    assert DEFAULT_TOLERANCES["ttft_ms"] == 0.25


def test_prefill_only_rise_fails_as_a_prefill_regression() -> None:
    verdict = judge_case(CASE, summaries(1000.0), baseline(500.0), TOL)
    assert verdict.status == "fail"
    assert verdict.fails() == (
        "prefill (TTFT) 500 → 1000 ms (+100.0%, limit +25%) while tok/s 52.2 → 50.0 (−4.2%) "
        f"stayed within its limit — {PREFILL_HINT}.")
    assert verdict.details["ttft_ms"]["change"] == pytest.approx(1.0)
    # Step time and acceptance did not move: nothing is blamed on them.
    assert verdict.details["step_ms"]["change"] == 0.0
    assert verdict.details["avg_commit"]["change"] == 0.0
    assert "acceptance regression" not in verdict.message
    assert "step-time regression" not in verdict.message


def test_a_tok_s_drop_prefill_causes_names_prefill() -> None:
    verdict = judge_case(CASE, summaries(2500.0), baseline(500.0), TOL)
    assert verdict.status == "fail"
    assert verdict.fails() == (
        "tok/s 52.2 → 44.5 (−14.8%, limit −10%): prefill (TTFT) 500 → 2500 ms (+400.0%) "
        "explains it; avg commit 7.85 → 7.85 (+0.0%, within noise); step time 144 → 144 ms "
        f"(+0.0%, within noise) — {PREFILL_HINT}.")
    assert verdict.attribution is not None
    assert verdict.attribution.share("acceptance") == pytest.approx(0.0)
    assert verdict.attribution.share("step") == pytest.approx(0.0)


def test_prefill_and_acceptance_moved_together_name_both() -> None:
    verdict = judge_case(CASE, summaries(2500.0, commit=6.6), baseline(500.0), TOL)
    assert verdict.status == "fail"
    assert verdict.fails() == (
        "tok/s 52.2 → 38.5 (−26.2%, limit −10%): avg commit 7.85 → 6.60 (−15.9%) and prefill "
        "(TTFT) 500 → 2500 ms (+400.0%) moved together (acceptance 47%, prefill 53% of the "
        f"drop) — {PREFILL_HINT}; then check the drafter and the text.")


def test_a_larger_step_share_than_prefills_is_diagnosed_as_step_time() -> None:
    # A larger target slows both (real llama.cpp tier): the largest share is the diagnosis,
    # prefill what to check next -- not a prefill regression first.
    verdict = judge_case(CASE, summaries(3000.0, step=220.0), baseline(500.0), TOL)
    message = verdict.fails()
    assert message is not None and "moved together (step time 64%, prefill 36% of" in message
    assert message.endswith(f"— {STEP_HINT}; then check prompt processing (the batch size, "
                            "e.g. llama.cpp -ub; chunked prefill; the prefix and attention "
                            "kernels).")


def test_prefill_rise_within_tolerance_passes_and_is_shown() -> None:
    verdict = judge_case(CASE, summaries(600.0), baseline(500.0), TOL)
    assert verdict.status == "pass"
    assert verdict.message == (
        "tok/s 52.2 → 51.8 (−0.9%, limit −10%); avg commit 7.85 → 7.85; step time 144 → 144 ms; "
        "prefill (TTFT) 500 → 600 ms — within tolerance.")


def test_a_rise_inside_the_floor_passes_and_its_spread_takes_no_repeats() -> None:
    # A 13-token prompt's prefill: 2 → 6 ms is +200 % but under the 10 ms floor.
    verdict = judge_case(CASE, summaries(6.0), baseline(2.0), TOL)
    assert verdict.status == "pass", verdict.message
    values = {"tok_s": [50.0, 50.1, 49.9], "ttft_ms": [2.0, 6.0, 9.0]}
    decided = decide_repeats(values, baseline(2.0), TOL, min_repeats=3, max_repeats=6)
    assert decided.action == "stop", decided.reason
    noisy = decide_repeats({**values, "ttft_ms": [20.0, 60.0, 90.0]}, baseline(2.0), TOL,
                           min_repeats=3, max_repeats=6)
    # above the floor it counts again: past its limit, more repeats confirm it (its spread
    # alone never makes the cell unstable: measure/repeats.py SPREAD_EXEMPT)
    assert noisy.action == "more" and "prefill (TTFT) is past its limit" in noisy.reason


def test_the_prefill_tolerance_is_set_like_any_other() -> None:
    verdict = judge_case(CASE, summaries(600.0), baseline(500.0), {**TOL, "ttft_ms": 0.1})
    assert verdict.status == "fail"
    assert verdict.message.startswith("prefill (TTFT) 500 → 600 ms (+20.0%, limit +10%)")


def test_a_baseline_without_prefill_loads_and_does_not_judge_it() -> None:
    verdict = judge_case(CASE, summaries(700.0), baseline(None), TOL)
    assert verdict.status == "pass"
    assert "ttft_ms" not in verdict.details
    assert verdict.message.endswith(
        "within tolerance; prefill (TTFT) not judged: not in the baseline — write a new "
        "version with --specperf-update-baselines to judge it.")


def test_an_old_baseline_file_without_prefill_reads() -> None:
    base = Baseline("dep", 1, "2026-01-01T00:00:00Z", "0.1", "x", {"model": "m"}, "run", True,
                    {CASE: baseline(None)}, {}, {})
    read = Baseline.from_json(base.to_json(), "v1.json")
    assert "ttft_ms" not in read.cases[CASE].metrics
    assert judge_case(CASE, summaries(700.0), read.cases[CASE], TOL).status == "pass"


def _sample(repeat: int, ttft_s: float | None, warmup: bool = False) -> Sample:
    steps = round((N - 1) / COMMIT)
    decode = steps * STEP / 1000.0
    return Sample(CASE, repeat, warmup, 5553, N, (ttft_s or 0.0) + decode, steps, decode,
                  ttft_s, None, 0, "response", "length")


def test_samples_carry_ttft_ms_and_old_samples_have_none() -> None:
    samples = [_sample(0, 0.9, warmup=True), _sample(1, 0.5), _sample(2, 0.52)]
    assert samples[1].ttft_ms == pytest.approx(500.0)
    assert samples[1].to_dict()["ttft_ms"] == pytest.approx(500.0)
    assert sample_values(samples[1:])["ttft_ms"] == pytest.approx([500.0, 520.0])
    assert "ttft_ms" not in sample_values([_sample(1, None)])


def _measurement(ttft_s: float) -> dict[str, object]:
    samples = [_sample(i, ttft_s * (1 + 0.002 * i)).to_dict() for i in range(5)]
    values = [s["ttft_ms"] for s in samples]
    tok = sorted(float(s["tok_s"]) for s in samples)[2]
    return {"case": {"id": CASE, "text_class": "padding", "context": 5553, "output_tokens": N},
            "summaries": {"tok_s": {"median": tok, "mad": 0.01, "n": 5},
                          "avg_commit": {"median": samples[0]["avg_commit"], "mad": 0.0, "n": 5},
                          "step_ms": {"median": STEP, "mad": 0.0, "n": 5},
                          "ttft_ms": {"median": sorted(values)[2], "mad": 1.0, "n": 5}},
            "samples": samples}


# -- end to end: a simulator whose prefill alone slows down ---------------------------------------


def _verdicts(xml_path: Path) -> list[dict[str, Any]]:
    """The verdicts a run recorded, read back from its JUnit XML user properties."""
    root = ElementTree.parse(xml_path).getroot()
    return [json.loads(str(p.get("value"))) for p in root.iter("property")
            if p.get("name") == "specperf_verdict"]


@pytest.mark.slow
def test_a_slower_prefill_fails_as_a_prefill_regression(perf_project, start_sim, tmp_path):
    sim = start_sim(time_scale=0.5)
    project = perf_project()
    args = ("-m", "context_scaling", "--endpoint", sim.url, "--baseline-dir",
            str(tmp_path / "baselines"), "--deployment", "prefill-dep", "--text-classes",
            "padding")
    project.run(*args, "--update-baselines").stdout.fnmatch_lines(
        ["specperf: wrote baseline */prefill-dep/v1.json"])
    httpx.post(f"{sim.url}/_sim/faults", json={"prefill_mult": 3.0}).raise_for_status()
    xml = tmp_path / "junit.xml"
    result = project.run(*args, "-rf", f"--junitxml={xml}")
    out = result.stdout.str()
    truth = httpx.get(f"{sim.url}/_sim/truth").json()["requests"]
    verdicts = {v["case_id"]: v for v in _verdicts(xml)}
    long = verdicts["padding-ctx1663"]
    # Ground truth: the last requests' prefill is 3x the profile's, and the verdict read it.
    slow = [r["prefill_ms"] for r in truth if r["prompt_tokens"] >= 1663 and not r["background"]]
    assert slow and long["details"]["ttft_ms"]["new"] == pytest.approx(
        statistics.median(slow), rel=0.1)
    assert long["details"]["ttft_ms"]["change"] == pytest.approx(2.0, rel=0.15)
    assert long["status"] == "fail", long
    assert PREFILL_HINT in long["message"], long["message"]
    assert "prefill (TTFT) " in long["message"] and " ms (+" in long["message"]
    for metric in ("step_ms", "avg_commit"):
        assert abs(long["details"][metric]["change"]) < DEFAULT_TOLERANCES[metric], long
    assert "acceptance regression" not in out and "step-time regression" not in out, out
    assert "unexplained by the model" not in out, out
    assert "TTFT ms" in out  # the closing table's prefill column
    # The sentence under FAILURES after the case's header; the closing block's line names the
    # factor.
    result.stdout.fnmatch_lines([
        "_*_ test_context_scaling[[]padding-ctx1663[]] _*_",
        "tok/s * → * (−*%, limit −10%): prefill (TTFT) * → * ms (+*%) explains it;*— "
        f"{PREFILL_HINT} (run-to-run ±3.0% assumed: no history yet)."], consecutive=True)
    result.stdout.fnmatch_lines(["  padding-ctx1663: tok/s * → * (−*%, limit −10%); also past "
                                 "their limits: prefill (TTFT) +*% — prefill regression"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


# -- pinned (synthetic) acceptance: step time and prefill judged only ----------------------------


def test_pinned_acceptance_judges_step_time_and_prefill_only() -> None:
    # Acceptance halved and tok/s with it: on a pinned server that is the dial, not a fault.
    verdict = judge_case(CASE, summaries(500.0, commit=COMMIT / 2), baseline(500.0), TOL,
                         pinned=True)
    assert verdict.status == "pass", verdict.message
    assert set(verdict.details) == {"step_ms", "ttft_ms"}
    assert verdict.message == (
        "step time 144 → 144 ms (+0.0%, limit +10%); prefill (TTFT) 500 → 500 ms (+0.0%, limit "
        f"+25%) — within tolerance; {PINNED_REASON}.")
    slower = judge_case(CASE, summaries(500.0, step=170.0), baseline(500.0), TOL, pinned=True)
    assert slower.fails() == (
        "step time 144 → 170 ms (+18.1%, limit +10%) — step-time regression: check the "
        f"kernels, attention backend and KV cache; {PINNED_REASON}.")


def test_the_header_says_acceptance_is_pinned() -> None:
    assert pinned_line({"acceptance_pinned": False}) == []
    assert pinned_line({}) == []
    assert pinned_line({"acceptance_pinned": "--spec-synth-len 2"}) == [
        "acceptance pinned (synthetic): step time and context fit judged only (the server runs "
        "with --spec-synth-len 2; prefill is judged too, avg commit, tok/s and exact acceptance "
        "are not)."]


LISTENER = ("import socket, sys; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); "
            "print(s.getsockname()[1], flush=True); sys.stdin.read()")


@pytest.mark.parametrize(("flags", "env", "expected"), [
    (["--spec-synth-len", "2"], {}, "--spec-synth-len 2"),
    (["--spec-synth-rates=0.9,0.5", "--api-key", "secret"], {}, "--spec-synth-rates 0.9,0.5"),
    (["--api-key", "secret"], {}, False),
    # llama.cpp takes each flag from LLAMA_ARG_* too; the command line wins over it
    ([], {"LLAMA_ARG_SPEC_SYNTH_RATES": "0.9,0.8", "LLAMA_API_KEY": "secret"},
     "--spec-synth-rates 0.9,0.8"),
    (["--spec-synth-len", "3"], {"LLAMA_ARG_SPEC_SYNTH_LEN": "5"}, "--spec-synth-len 3"),
])
def test_pinned_flags_are_read_from_the_listening_process(flags, env, expected) -> None:
    proc = subprocess.Popen([sys.executable, "-c", LISTENER, *flags], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, **env})
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        assert pinned_acceptance(f"http://127.0.0.1:{port}") == expected
    finally:
        proc.kill()
        proc.communicate()  # reaps it and closes its pipes
    # Another host's command line cannot be read: unknown, never "not pinned".
    assert pinned_acceptance("http://10.0.0.1:8080") is None


def test_a_wide_prefill_spread_never_makes_a_cell_unstable() -> None:
    # the simulator at time scale 0.05 spread padding-ctx13's TTFT to a relative MAD of 0.17
    values = {"tok_s": [100.0] * 8, "avg_commit": [7.0] * 8, "step_ms": [30.0] * 8,
              "ttft_ms": [20.0, 26.0, 14.0, 30.0, 12.0, 22.0, 18.0, 28.0]}
    decision = decide_repeats(values, None, TOL, min_repeats=3, max_repeats=8)
    assert decision.action == "stop", decision
