"""Reproducible prompts, exact acceptance and the request digest: the pieces, then the
simulator they rely on (a real process on loopback)."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from specperf.baselines.store import Baseline, CaseBaseline
from specperf.core.stats import Summary
from specperf.core.verdict import Scope, Verdict
from specperf.judge import exact
from specperf.measure.determinism import PromptRecord
from specperf.measure.sample import Measurement, Sample
from specperf.plan import digest, nonce, reuse
from specperf.plan.workload import Case, Prompt, TextClass
from specperf.servers import routes


# -- nonces -------------------------------------------------------------------------------------
def test_derived_nonce_repeats_per_seed_case_and_repeat_and_keeps_the_random_shape():
    first = nonce.derived_nonce("dep/v1", "padding-ctx13", 0)
    assert first == nonce.derived_nonce("dep/v1", "padding-ctx13", 0)
    others = {nonce.derived_nonce("dep/v2", "padding-ctx13", 0),
              nonce.derived_nonce("dep/v1", "padding-ctx1663", 0),
              nonce.derived_nonce("dep/v1", "padding-ctx13", 1)}
    assert first not in others and len(others) == 3
    shape = re.compile(r"^run \d{12}: $")
    assert shape.match(first) and shape.match(nonce.new_nonce())


class _Poster:
    def __init__(self, status: int) -> None:
        self.status = status
        self.calls: list[str] = []

    def post_status(self, path: str, *, timeout_s: float | None = None) -> int:
        self.calls.append(path)
        return self.status


def test_plan_flushes_where_the_server_can_and_falls_back_to_random_nonces_where_not():
    flushing = reuse.plan_for(_Poster(200), "sglang", "s")
    assert (flushing.policy, flushing.reproducible) == ("flush", True)
    busy = _Poster(400)  # /flush_cache exists; it refuses while requests run
    plan = reuse.plan_for(busy, "sglang", "s")
    assert plan.policy == "flush"
    value, kept = plan.nonce(busy, "padding-ctx13", 2)
    assert not kept and value != nonce.derived_nonce("s", "padding-ctx13", 2)
    none = reuse.plan_for(_Poster(404), "openai", "s")
    assert (none.policy, none.reproducible) == ("none", False)
    assert none.reason == ("the server has no /flush_cache (HTTP 404) and no per-request cache "
                           "switch, so prompts carry random nonces and exact acceptance is "
                           "unavailable")


def test_a_server_kind_that_turns_the_cache_off_per_request_never_flushes():
    poster = _Poster(404)
    plan = reuse.plan_for(poster, "llamacpp", "s")
    assert plan.policy == "per-request"
    assert plan.nonce(poster, "reasoning-ctx13", -1) == (
        nonce.derived_nonce("s", "reasoning-ctx13", 0), True)  # a warm-up re-sends prompt 0
    assert poster.calls == []


# -- exact comparison ---------------------------------------------------------------------------
CASE = Case("reasoning", 3333, 600)


def _sample(repeat: int, steps: int, *, warmup: bool = False, output: str = "out",
            prompt: str | None = None, tokens: int = 600) -> Sample:
    k = max(repeat, 0)
    return Sample(CASE.id, repeat, warmup, 3333, tokens, 10.0, steps, 9.0, 1.0, None, 0,
                  "response", "length",
                  raw={"prompt_k": k, "reproducible": True,
                       "prompt_digest": prompt or f"p{k}", "output_digest": f"{output}{k}"})


def _measured(*samples: Sample) -> Measurement:
    return Measurement(CASE, samples, "server-timings", "response")


BASE = {0: PromptRecord(68, "p0", "out0"), 1: PromptRecord(70, "p1", "out1"),
        2: PromptRecord(69, "p2", "out2")}


def test_identical_steps_on_every_prompt_is_unchanged():
    run = _measured(_sample(-1, 68, warmup=True), _sample(0, 68), _sample(1, 70), _sample(2, 69))
    result = exact.compare(run, BASE, True, "")
    assert (result.status, result.message) == (
        "unchanged", "exact acceptance: identical verify steps on 3 of 3 prompts.")


STATS = "tok/s 30.0 → 29.0 (−3.3%, limit −10%) — within tolerance."


def test_a_short_warm_up_checks_no_determinism_yet_identical_steps_still_settle_acceptance():
    # The gate warms its 600-token case at 128 tokens (--specperf-warmup-output-tokens): the
    # warm-up re-sends prompt 0 but not the whole request, so it is no determinism pair.
    from specperf.measure.determinism import deterministic
    warm = _sample(-1, 20, warmup=True, tokens=128, output="short")
    same = _measured(warm, _sample(0, 68), _sample(1, 70), _sample(2, 69))
    assert deterministic(same.samples) is None
    result = exact.compare(same, BASE, None, "")
    assert (result.status, result.message) == (
        "unchanged", "exact acceptance: identical verify steps on 3 of 3 prompts.")
    moved = exact.compare(_measured(warm, _sample(0, 68), _sample(1, 79), _sample(2, 69)),
                          BASE, None, "")
    assert moved.status == "unavailable"
    assert moved.message == (
        "exact acceptance unavailable: the verify steps changed on 1 of 3 prompts and the "
        "server is not shown deterministic here: no warm-up re-sent a whole measured request "
        "(a shorter warm-up: --specperf-warmup-output-tokens), so determinism is unchecked; "
        "acceptance is judged by statistics.")
    # A warm-up as long as the request that disagrees still says the server varies.
    varied = _measured(_sample(-1, 69, warmup=True), _sample(0, 68), _sample(1, 70))
    assert exact.compare(varied, BASE, None, "").status == "unavailable"


def test_a_one_prompt_change_inside_the_tolerance_is_noted_and_passes():
    run = _measured(_sample(-1, 68, warmup=True), _sample(0, 68), _sample(1, 71), _sample(2, 69))
    result = exact.compare(run, BASE, True, "")
    assert (result.cause, result.steps_delta) == ("drafter", 1)
    verdict = exact.combine(Verdict(CASE.id, "pass", STATS, scope=Scope.CASE), result)
    assert verdict.status == "noted" and verdict.fails() is None
    assert verdict.message == (
        "acceptance changed on 1 of 3 prompts (verify steps 70 → 71 on prompt 2; 207 → 208 in "
        "all): the output text is the same, so the drafter proposes differently — check the "
        "draft model and its settings. Avg commit −0.5% on these prompts, inside the 10% "
        "acceptance tolerance: noted, not a regression. Statistics: " + STATS)


def test_an_exact_change_inside_the_tolerance_beside_a_step_regression_is_not_called_none():
    """The case regressed on step time: the exact part says acceptance is not what regressed,
    never "not a regression" before a sentence that ends in one."""
    run = _measured(_sample(-1, 68, warmup=True), _sample(0, 68), _sample(1, 71), _sample(2, 69))
    result = exact.compare(run, BASE, True, "")
    slower = ("tok/s 30.0 → 20.0 (−33.3%, limit −10%): step time 30 → 45 ms (+50.0%) explains "
              "it — step-time regression: check the kernels, attention backend and KV cache.")
    verdict = exact.combine(Verdict(CASE.id, "fail", slower, scope=Scope.CASE), result)
    assert verdict.status == "fail"
    assert "not a regression" not in verdict.message
    assert ("Avg commit −0.5% on these prompts, inside the 10% acceptance tolerance: noted; "
            "acceptance is not what regressed. Statistics: " + slower) in verdict.message


def test_more_steps_beyond_the_tolerance_fail_naming_drafter_or_numerics():
    run = _measured(_sample(-1, 68, warmup=True), _sample(0, 68), _sample(1, 79), _sample(2, 92))
    result = exact.compare(run, BASE, True, "")
    verdict = exact.combine(Verdict(CASE.id, "pass", STATS, scope=Scope.CASE), result)
    assert verdict.status == "fail"
    assert verdict.fails() == (
        "acceptance changed on 2 of 3 prompts (verify steps 70 → 79 on prompt 2, 69 → 92 on "
        "prompt 3; 207 → 239 in all): the output text is the same, so the drafter proposes "
        "differently — check the draft model and its settings. Avg commit −13.4% on these "
        "prompts, beyond the 10% acceptance tolerance — acceptance regression (drafter or "
        "numerics: here the drafter). Statistics: " + STATS)
    # The tolerance in force decides: the same change inside a 15 % tolerance is noted.
    assert exact.combine(Verdict(CASE.id, "pass", STATS,
                                 scope=Scope.CASE), result, tolerance=0.15).status == \
        "noted"


def test_identical_mode_fails_on_one_changed_prompt():
    run = _measured(_sample(-1, 68, warmup=True), _sample(0, 68), _sample(1, 71), _sample(2, 69))
    result = exact.compare(run, BASE, True, "")
    verdict = exact.combine(Verdict(CASE.id, "pass", STATS,
                                    scope=Scope.CASE), result, mode="identical")
    assert verdict.fails() == (
        "acceptance changed on 1 of 3 prompts (verify steps 70 → 71 on prompt 2; 207 → 208 in "
        "all): the output text is the same, so the drafter proposes differently — check the "
        "draft model and its settings. In acceptance_mode = identical any changed prompt fails: "
        "this deploy must not touch decoding. Statistics: " + STATS)


def test_a_changed_output_is_the_numerics_and_a_small_change_is_noted_not_improved():
    run = _measured(_sample(-1, 68, warmup=True), _sample(0, 66, output="new"),
                    _sample(1, 70), _sample(2, 69))
    run = _measured(_sample(-1, 66, warmup=True, output="new"), *run.samples[1:])
    result = exact.compare(run, BASE, True, "")
    assert result.message == (
        "acceptance changed on 1 of 3 prompts (verify steps 68 → 66 on prompt 1; 207 → 205 in "
        "all): the output text changed on 1 of them, so the target's greedy output moved — "
        "numerics (kernels, precision, attention backend) or the target model; acceptance "
        "moved with the text.")
    # One prompt two steps fewer (+1.0 % avg commit) is a finding, not an improvement.
    assert exact.combine(Verdict(CASE.id, "pass", "ok.",
                                 scope=Scope.CASE), result).status == "noted"


def test_a_server_that_does_not_repeat_itself_falls_back_to_statistics():
    run = _measured(_sample(-1, 67, warmup=True), _sample(0, 68), _sample(1, 79))
    result = exact.compare(run, BASE, True, "")
    assert result.status == "unavailable"
    assert result.message == (
        "exact acceptance unavailable: the server is not shown deterministic here: the same "
        "prompt took 67 verify steps in the warm-up and 68 in repeat 1; acceptance is judged "
        "by statistics.")
    verdict = Verdict(CASE.id, "pass", "ok.", scope=Scope.CASE)
    assert exact.combine(verdict, result).status == "pass"


def test_random_nonces_say_why_exact_acceptance_is_unavailable():
    plain = Sample(CASE.id, 0, False, 3333, 600, 10.0, 68, 9.0, 1.0, None, 0, "response",
                   "length")
    result = exact.compare(_measured(plain), BASE, True, "no /flush_cache here")
    assert result.message == ("exact acceptance unavailable: no /flush_cache here; acceptance "
                              "is judged by statistics.")


def test_changed_prompts_are_never_compared():
    run = _measured(_sample(-1, 68, warmup=True, prompt="x"), _sample(0, 68, prompt="x"))
    assert exact.compare(run, BASE, True, "").message.startswith(
        "exact acceptance unavailable: this run's prompts differ from the baseline's")


def test_baseline_keeps_prompt_records_seed_and_digest_through_json():
    case = CaseBaseline("reasoning", 3333, 600, {"avg_commit": Summary(2.9, 0.01, 3)}, {},
                        dict(BASE), True)
    request = {"route": "/generate", "sampling": {"temperature": 0}}
    base = Baseline("dep", 1, "2026-01-01T00:00:00Z", "0", "abc", {}, "p", True,
                    {case.id: case}, {}, {}, "dep/v1", request)
    again = Baseline.from_json(base.to_json(), "v1.json")
    assert again == base


# -- request digest -----------------------------------------------------------------------------
def _digest(**changes: Any) -> dict[str, Any]:
    classes = {"padding": TextClass("padding", "repeat", text="pad. ")}
    found = digest.request_digest(_empty("sglang"), 600, None, classes)
    found.update(changes)
    return found


def test_digest_names_another_temperature_and_output_length_in_one_sentence():
    old = _digest()
    new = _digest(output_tokens=300,
                  sampling={**old["sampling"], "temperature": 0.7, "max_new_tokens": 300})
    changes = digest.differences(old, new)
    assert changes == ["output length 600 → 300 tokens", "temperature 0 → 0.7"]
    assert digest.refusal("dep v3", changes) == (
        "this run's requests differ from those of baseline dep v3 (output length 600 → 300 "
        "tokens; temperature 0 → 0.7): a client-side change is no server regression, so the "
        "run refuses to compare — measure with the baseline's settings, or write a new version "
        "with --specperf-update-baselines.")


def test_digest_sees_a_changed_text_class_source_and_route():
    old = _digest()
    other = {"padding": TextClass("padding", "repeat", text="other. ")}
    new = digest.request_digest(_empty("openai"), 600, None, other)
    assert digest.differences(old, new)[0] == "route /generate → /v1/completions"
    assert "the source of text class 'padding'" in digest.differences(old, new)
    assert digest.differences(old, _digest()) == []


# -- the simulator: deterministic at temperature 0 ----------------------------------------------
def _generate(url: str, text: str, temperature: float | None = 0) -> dict[str, Any]:
    params: dict[str, Any] = {"max_new_tokens": 200, "ignore_eos": True}
    if temperature is not None:
        params["temperature"] = temperature
    httpx.post(f"{url}/flush_cache").raise_for_status()
    reply = httpx.post(f"{url}/generate", json={"text": text, "sampling_params": params},
                       timeout=60)
    reply.raise_for_status()
    data: dict[str, Any] = reply.json()
    return data


PROSE = " ".join(f"word{i % 97} river{i % 13}" for i in range(400))


def test_sim_repeats_a_greedy_prompt_exactly_and_a_lower_acceptance_keeps_its_text(start_sim):
    sim = start_sim(time_scale=0.01)
    first, second = _generate(sim.url, PROSE), _generate(sim.url, PROSE)
    assert first["meta_info"]["spec_verify_ct"] == second["meta_info"]["spec_verify_ct"]
    assert first["output_ids"] == second["output_ids"]
    httpx.post(f"{sim.url}/_sim/faults", json={"acceptance_mult": 0.97}).raise_for_status()
    lower = _generate(sim.url, PROSE)
    # Lossless: the drafter decides how many steps the same text takes, never the text.
    assert lower["output_ids"] == first["output_ids"]
    assert lower["meta_info"]["spec_verify_ct"] > first["meta_info"]["spec_verify_ct"]
    truth = httpx.get(f"{sim.url}/_sim/truth").json()["requests"]
    assert [len(t["commits"]) for t in truth[-3:]] == [
        r["meta_info"]["spec_verify_ct"] for r in (first, second, lower)]


def test_sim_sampled_requests_are_not_seeded_by_their_prompt(start_sim):
    sim = start_sim(time_scale=0.01)
    outputs = {tuple(_generate(sim.url, PROSE, temperature=None)["output_ids"])
               for _ in range(2)}
    assert len(outputs) == 2


def test_sim_flush_keeps_a_repeated_prompt_out_of_the_prefix_cache(start_sim):
    sim = start_sim(time_scale=0.01)
    _generate(sim.url, PROSE)
    flushed = _generate(sim.url, PROSE)["meta_info"]["cached_tokens"]
    reply = httpx.post(f"{sim.url}/generate", json={"text": PROSE, "sampling_params": {
        "max_new_tokens": 8, "ignore_eos": True, "temperature": 0}}).json()
    assert (flushed, reply["meta_info"]["cached_tokens"]) == (0, reply["meta_info"][
        "prompt_tokens"] - 1)


@pytest.mark.parametrize("status", [200])
def test_client_post_status_reads_flush_cache(start_sim, status):
    from specperf.servers.client import Client
    sim = start_sim(time_scale=0.01)
    with_client = Client(sim.url)
    try:
        assert with_client.post_status("/flush_cache") == status
        assert with_client.post_status("/no_such_route") == 404
    finally:
        with_client.close()


def test_the_summary_names_one_reason_once_with_its_cases():
    why = "exact acceptance unavailable: the baseline records no per-prompt verify steps"
    verdicts = [{"case_id": c, "exact": {"status": "unavailable", "message": why}}
                for c in ("padding-ctx13", "reasoning-ctx13")]
    verdicts.append({"case_id": "padding-ctx3333",
                     "exact": {"status": "unchanged", "compared": 3, "message": ""}})
    assert exact.summary_lines(verdicts) == [
        "acceptance exact on 1 of 3 cases (3 prompts compared: 1 cases identical, 0 changed); "
        "step time judged by statistics (medians of repeats, tolerance).",
        f"  2 cases (padding-ctx13, reasoning-ctx13): {why}"]


def _empty(api: str) -> tuple[str, dict[str, Any]]:
    return routes.request_body(api, Prompt("", None, 0), 600, None, "digest")
