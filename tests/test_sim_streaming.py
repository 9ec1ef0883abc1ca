"""Streams: one chunk per scheduler output on every route, usage, [DONE], a slow transport."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from slow_proxy import SlowProxy

PROMPT = "Distributed systems require careful reasoning about consistency and failure. " * 8


@pytest.fixture(scope="module")
def sim(start_sim: Callable[..., Any]) -> Any:
    """Steps of a few wall ms, so every chunk is read long before the next step."""
    return start_sim(time_scale=0.1)


def _events(response: httpx.Response) -> list[dict[str, Any]]:
    assert response.headers["content-type"].startswith("text/event-stream")
    events = response.text.split("\n\n")
    assert events[-2:] == ["data: [DONE]", ""]
    return [json.loads(e[len("data: "):]) for e in events[:-2]]


def _native(url: str, tokens: int) -> httpx.Response:
    body = {"text": PROMPT, "stream": True,
            "sampling_params": {"max_new_tokens": tokens, "ignore_eos": True}}
    return httpx.post(url + "/generate", json=body, timeout=60)


def test_native_one_chunk_per_verify_step(sim: Any) -> None:
    chunks = _events(_native(sim.url, 120))
    final = chunks[-1]["meta_info"]
    assert final["completion_tokens"] == 120 and final["finish_reason"]["type"] == "length"
    assert len(chunks) == 1 + final["spec_verify_ct"]  # the prefill's token, then each step
    sizes = [len(c["output_ids"]) for c in chunks]
    commits = [b - a for a, b in zip(sizes, sizes[1:], strict=False)]
    assert sizes[0] == 1 and all(c >= 1 for c in commits)
    histogram = final["spec_correct_drafts_histogram"]
    assert Counter(c - 1 for c in commits) == Counter(
        {drafts: steps for drafts, steps in enumerate(histogram) if steps})
    assert all(c["meta_info"]["finish_reason"] is None for c in chunks[:-1])


def test_completions_deltas_per_step_and_usage_last(sim: Any) -> None:
    body = {"prompt": PROMPT, "max_tokens": 90, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}, "return_spec_tokens_details": True}
    chunks = _events(httpx.post(sim.url + "/v1/completions", json=body, timeout=60))
    *texts, ext, last = chunks  # sglext has a chunk of its own (SGLang 0.5.23)
    steps = ext["sglext"]["spec_tokens_details"]["spec_verify_ct"]
    assert last["choices"] == [] and last["usage"]["completion_tokens"] == 90
    assert len(texts) == 1 + steps
    assert [c["choices"][0]["finish_reason"] for c in texts] == [None] * steps + ["length"]


def test_chat_chunks_per_step_without_parser(sim: Any) -> None:
    body = {"messages": [{"role": "user", "content": PROMPT}], "max_tokens": 90,
            "ignore_eos": True, "stream": True, "separate_reasoning": False,
            "stream_options": {"include_usage": True}, "return_spec_tokens_details": True}
    chunks = _events(httpx.post(sim.url + "/v1/chat/completions", json=body, timeout=60))
    role, *contents, finish, ext, last = chunks  # sglext chunk, then usage (SGLang 0.5.23)
    assert role["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all(set(c["choices"][0]["delta"]) == {"content"} for c in contents)
    assert len(contents) == 1 + ext["sglext"]["spec_tokens_details"]["spec_verify_ct"]
    assert finish["choices"][0] == {"index": 0, "delta": {}, "logprobs": None,
                                    "finish_reason": "length"}
    assert last["choices"] == [] and last["usage"]["completion_tokens"] == 90
    text = "".join(c["choices"][0]["delta"]["content"] for c in contents)
    assert text.startswith("<think>") and "</think>" in text  # raw: no reasoning parser ran


def test_no_usage_chunk_unless_asked(sim: Any) -> None:
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 20,
            "ignore_eos": True, "stream": True}
    chunks = _events(httpx.post(sim.url + "/v1/chat/completions", json=body, timeout=60))
    assert all(c["choices"] and "usage" not in c for c in chunks)


def test_slow_transport_delays_chunks_not_the_decode(sim: Any) -> None:
    _events(_native(sim.url, 200))  # a direct stream first: the proxy adds only its delay
    with SlowProxy(sim.url, delay_ms=20) as proxy:
        start = time.monotonic()
        slowed = _events(_native(proxy.url, 200))
        slowed_s = time.monotonic() - start
        assert proxy.relayed_pieces >= len(slowed)
    meta = slowed[-1]["meta_info"]
    # Each chunk waited 20 ms in the proxy: a lower bound no load can break (how the direct
    # stream's wall time compares depends on the box's load, so it is not asserted).
    assert slowed_s >= 0.02 * len(slowed)
    # The server decoded at its own pace: its step count is the ground truth's, and the slow
    # client is what the decode-time figure leaves out (server clock, sim/scheduler.py).
    truth = httpx.get(sim.url + "/_sim/truth").json()["requests"][-1]
    assert meta["spec_verify_ct"] == len(truth["step_ms"])
    assert truth["completion_tokens"] == 200 and truth["post_processing_ms"] == 0
