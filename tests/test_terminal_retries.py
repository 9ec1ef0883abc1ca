"""The terminal says when requests were sent again: live, on the request's own line, and in
the closing block, so a run through server errors does not read like a clean one."""

from __future__ import annotations

from specperf.measure.sample import Sample
from specperf.views import summary


def _sample(retries: int) -> Sample:
    return Sample(case_id="padding-ctx13", repeat=1, warmup=False, prompt_tokens=13,
                  completion_tokens=600, wall_s=4.0, verify_steps=127, decode_s=3.9,
                  ttft_s=0.002, server_accept_length=4.72, cached_tokens=0,
                  acceptance_source="response", finish_reason="length", retries=retries)


def test_a_retried_request_says_so_on_its_progress_line():
    assert summary.sample_line(_sample(2), 3) == (
        "padding-ctx13 repeat 2/3: 150.0 tok/s, avg commit 4.72, step 30.7 ms, sent 3 times "
        "(the server answered a transient error)")
    assert summary.sample_line(_sample(0), 3).endswith("step 30.7 ms")


def _doc(*samples: dict) -> dict:
    return {"measurements": {"padding-ctx13": {"samples": list(samples[:2])},
                             "reasoning-ctx13": {"samples": list(samples[2:])}}}


def test_the_closing_block_counts_retries_and_re_measured_attempts_per_case():
    doc = _doc({"retries": 2}, {"retries": 0, "raw": {"discarded_attempts": ["x"]}},
               {"retries": 1})
    assert summary.retry_lines(doc) == [
        "retries: 3 requests sent again after a transient server error (padding-ctx13 2, "
        "reasoning-ctx13 1); every figure above is from an attempt that completed cleanly.",
        "retries: 1 request measured again because the traffic guard saw a disturbed attempt "
        "(padding-ctx13 1); every figure above is from an attempt that completed cleanly."]
    assert summary.retry_lines(_doc({"retries": 0}, {}, {"retries": 0})) == []
