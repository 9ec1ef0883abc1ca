"""Every simulator route against the shapes real servers send (real process, loopback)."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

META_ALWAYS = {"id", "finish_reason", "prompt_tokens", "completion_tokens", "cached_tokens",
               "e2e_latency"}
META_TIMINGS = {"first_token_latency", "decode_throughput", "queue_time", "request_received_ts",
                "request_finished_ts"}
SPEC_CURRENT = {"spec_verify_ct", "spec_accept_length", "spec_accept_rate",
                "spec_num_correct_drafts", "spec_num_proposed_drafts",
                "spec_correct_drafts_histogram"}
SENTENCE = "Distributed systems require careful reasoning about consistency and failure. "


def _post(url: str, path: str, body: dict[str, Any], timeout: float = 30.0) -> httpx.Response:
    return httpx.post(url + path, json=body, timeout=timeout)


def _sse_events(text: str) -> list[str]:
    assert text.endswith("data: [DONE]\n\n")
    events = text.split("\n\n")
    assert events[-1] == ""
    assert all(e.startswith("data: ") for e in events[:-1])
    return [e[len("data: "):] for e in events[:-1]]


def test_generate_shape_and_spec_fields(sim_server: Any) -> None:
    params = {"max_new_tokens": 64, "ignore_eos": True, "temperature": 0}
    body = {"text": (SENTENCE * 20).strip(), "sampling_params": params}
    response = _post(sim_server.url, "/generate", body)
    assert response.status_code == 200
    data = response.json()
    assert set(data) == {"text", "output_ids", "meta_info"}
    meta = data["meta_info"]
    assert META_ALWAYS | META_TIMINGS | SPEC_CURRENT <= set(meta)
    assert meta["finish_reason"] == {"type": "length", "length": 64}
    assert meta["completion_tokens"] == 64 == len(data["output_ids"])
    steps = meta["spec_verify_ct"]
    assert sum(meta["spec_correct_drafts_histogram"]) == steps
    assert abs(meta["spec_accept_length"] - 64 / steps) < 1e-9
    assert meta["spec_num_correct_drafts"] == 63 - steps
    assert meta["e2e_latency"] > 0 and meta["first_token_latency"] <= meta["e2e_latency"]
    assert "Distributed" in data["text"]  # repeated padding keeps repeating


def test_generate_input_ids_and_detokenize_agree(sim_server: Any) -> None:
    ids = httpx.post(sim_server.url + "/tokenize", json={"prompt": "a b c d"}).json()["tokens"]
    body = {"input_ids": ids, "sampling_params": {"max_new_tokens": 12, "ignore_eos": True}}
    data = _post(sim_server.url, "/generate", body).json()
    assert data["meta_info"]["prompt_tokens"] == len(ids)
    text = _post(sim_server.url, "/detokenize", {"tokens": data["output_ids"]}).json()["text"]
    assert text == data["text"]


def test_generate_stream_sse(sim_server: Any) -> None:
    body = {"text": "Stream me something", "stream": True,
            "sampling_params": {"max_new_tokens": 40, "ignore_eos": True}}
    response = _post(sim_server.url, "/generate", body)
    assert response.headers["content-type"].startswith("text/event-stream")
    chunks = [json.loads(e) for e in _sse_events(response.text)[:-1]]
    assert len(chunks) >= 2
    texts = [c["text"] for c in chunks]
    assert all(b.startswith(a) for a, b in zip(texts, texts[1:], strict=False))  # cumulative text
    assert all(c["meta_info"]["finish_reason"] is None for c in chunks[:-1])
    final = chunks[-1]["meta_info"]
    assert final["completion_tokens"] == 40 and final["finish_reason"]["type"] == "length"
    assert "e2e_latency" in final and "spec_verify_ct" in final
    assert sum(final["spec_correct_drafts_histogram"]) == final["spec_verify_ct"]


def test_completions_with_spec_details(sim_server: Any) -> None:
    body = {"model": "kimi-k2.6", "prompt": "Hello there", "max_tokens": 20, "ignore_eos": True,
            "temperature": 0, "return_spec_tokens_details": True}
    data = _post(sim_server.url, "/v1/completions", body).json()
    assert data["object"] == "text_completion" and data["model"] == "kimi-k2.6"
    assert {"id", "created", "choices", "usage", "sglext"} <= set(data)
    choice = data["choices"][0]
    assert choice["index"] == 0 and choice["finish_reason"] == "length"
    assert isinstance(choice["text"], str)
    usage = data["usage"]
    assert usage["completion_tokens"] == 20
    assert usage["total_tokens"] == usage["prompt_tokens"] + 20
    assert "cached_tokens" in usage["prompt_tokens_details"]
    details = data["sglext"]["spec_tokens_details"]
    assert {"spec_verify_ct", "spec_accept_length", "spec_num_correct_drafts",
            "spec_num_proposed_drafts", "spec_correct_drafts_histogram"} <= set(details)


def test_completions_without_spec_details_has_no_sglext(sim_server: Any) -> None:
    body = {"prompt": "Hello", "max_tokens": 5, "ignore_eos": True}
    assert "sglext" not in _post(sim_server.url, "/v1/completions", body).json()


def test_completions_stream_usage_chunk(sim_server: Any) -> None:
    body = {"prompt": "Hello", "max_tokens": 30, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}, "return_spec_tokens_details": True}
    events = _sse_events(_post(sim_server.url, "/v1/completions", body).text)
    chunks = [json.loads(e) for e in events[:-1]]
    assert events[-1] == "[DONE]"
    # SGLang 0.5.23 serving_completions.py: sglext in a chunk of its own (usage null),
    # then the usage chunk without sglext.
    ext, last = chunks[-2], chunks[-1]
    assert ext["choices"] == [] and ext["usage"] is None
    assert "spec_verify_ct" in ext["sglext"]["spec_tokens_details"]
    assert last["choices"] == [] and last["usage"]["completion_tokens"] == 30
    assert "sglext" not in last
    assert chunks[-3]["choices"][0]["finish_reason"] == "length"
    assert "".join(c["choices"][0]["text"] for c in chunks[:-2])


def test_chat_completions(sim_server: Any) -> None:
    body = {"messages": [{"role": "user", "content": "Say something"}],
            "max_completion_tokens": 16, "ignore_eos": True}
    data = _post(sim_server.url, "/v1/chat/completions", body).json()
    assert data["object"] == "chat.completion"
    message = data["choices"][0]["message"]
    assert message["role"] == "assistant" and isinstance(message["content"], str)
    assert data["usage"]["completion_tokens"] == 16
    stream = dict(body, stream=True)
    chunks = [json.loads(e) for e in
              _sse_events(_post(sim_server.url, "/v1/chat/completions", stream).text)[:-1]]
    assert chunks[0]["object"] == "chat.completion.chunk"
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"


def test_tokenize_rule_and_aliases(sim_server: Any) -> None:
    text = "Hello, world!  Two spaces "
    for path in ("/tokenize", "/v1/tokenize"):
        data = _post(sim_server.url, path, {"prompt": text, "add_special_tokens": True}).json()
        assert set(data) == {"tokens", "count", "max_model_len"}
        assert data["tokens"][0] == 1 and data["count"] == len(data["tokens"])
        # <bos> Hello , _world ! __Two _spaces _
        assert data["count"] == 8 and data["max_model_len"] == 262144
    plain = _post(sim_server.url, "/tokenize", {"prompt": text, "add_special_tokens": False})
    assert plain.json()["count"] == 7
    for path in ("/detokenize", "/v1/detokenize"):
        back = _post(sim_server.url, path, {"tokens": plain.json()["tokens"]}).json()
        assert back == {"text": text}
    unknown = _post(sim_server.url, "/detokenize", {"tokens": [999]})
    assert unknown.status_code == 400


def test_server_info_and_model_info(sim_server: Any) -> None:
    for path in ("/server_info", "/get_server_info"):
        info = httpx.get(sim_server.url + path).json()
        for key in ("model_path", "served_model_name", "speculative_algorithm",
                    "speculative_draft_model_path", "speculative_num_steps",
                    "speculative_eagle_topk", "speculative_num_draft_tokens",
                    "speculative_dflash_block_size", "speculative_ddtree_budget", "page_size",
                    "attention_backend", "decode_attention_backend", "tp_size",
                    "enable_metrics", "decode_log_interval", "context_length", "version"):
            assert key in info, key
        assert info["speculative_algorithm"] == "DDTREE" and info["page_size"] == 1
        # Real SGLang has no simulator keys: the simulator names itself in a header only.
        assert not any(key.startswith("sim_") for key in info)
        assert "avg_spec_accept_length" in info["internal_states"][0]
    for path in ("/model_info", "/get_model_info"):
        model = httpx.get(sim_server.url + path).json()
        assert {"model_path", "served_model_name", "tokenizer_path", "is_generation",
                "reasoning_parser", "tool_call_parser"} <= set(model)
        assert model["is_generation"] is True


def test_health_routes(sim_server: Any) -> None:
    assert httpx.get(sim_server.url + "/health").status_code == 200
    assert httpx.get(sim_server.url + "/health_generate", timeout=30).status_code == 200


def _scrape(url: str) -> dict[str, float]:
    totals: dict[str, float] = {}
    text = httpx.get(url + "/metrics").text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
    return totals


def test_metrics_names_and_exact_deltas(sim_server: Any) -> None:
    before = _scrape(sim_server.url)
    for name in ("sglang:spec_verify_calls_total", "sglang:generation_tokens_total",
                 "sglang:prompt_tokens_total", "sglang:num_requests_total",
                 "sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:gen_throughput",
                 "sglang:spec_accept_length", "sglang:spec_accept_rate",
                 "sglang:time_to_first_token_seconds_count",
                 "sglang:e2e_request_latency_seconds_count",
                 "sglang:inter_token_latency_seconds_count"):
        assert name in before, name
    body = {"text": SENTENCE * 5, "sampling_params": {"max_new_tokens": 50, "ignore_eos": True}}
    meta = _post(sim_server.url, "/generate", body).json()["meta_info"]
    after = _scrape(sim_server.url)
    delta = {k: after[k] - before.get(k, 0.0) for k in after}
    assert delta["sglang:spec_verify_calls_total"] == meta["spec_verify_ct"]
    assert delta["sglang:generation_tokens_total"] == 50
    assert delta["sglang:num_requests_total"] == 1
    assert delta["sglang:prompt_tokens_total"] == meta["prompt_tokens"]
    assert after["sglang:num_running_reqs"] == 0 and after["sglang:num_queue_reqs"] == 0


def test_bad_input_and_server_survives(sim_server: Any) -> None:
    bad = httpx.post(sim_server.url + "/generate", content=b"{not json",
                     headers={"content-type": "application/json"})
    assert bad.status_code == 400
    assert bad.json()["error"]["type"] == "BadRequestError"
    assert httpx.get(sim_server.url + "/no_such_route").status_code == 404
    too_long = {"text": "x", "sampling_params": {"max_new_tokens": 300_000}}
    response = _post(sim_server.url, "/generate", too_long)
    assert response.status_code == 400 and "context length" in response.json()["error"]["message"]
    assert _post(sim_server.url, "/generate", {"sampling_params": {}}).status_code == 400
    negative = {"text": "x", "sampling_params": {"max_new_tokens": -1}}
    assert _post(sim_server.url, "/generate", negative).status_code == 400
    assert _post(sim_server.url, "/v1/chat/completions", {"messages": "hi"}).status_code == 400
    ok = {"text": "still alive", "sampling_params": {"max_new_tokens": 3}}
    assert _post(sim_server.url, "/generate", ok).status_code == 200


def test_flush_cache_and_cached_tokens(sim_server: Any) -> None:
    body = {"text": "Cache me if you can " * 10, "sampling_params": {"max_new_tokens": 4}}
    _post(sim_server.url, "/generate", body)
    again = _post(sim_server.url, "/generate", body).json()["meta_info"]
    assert again["cached_tokens"] == again["prompt_tokens"] - 1
    flushed = httpx.post(sim_server.url + "/flush_cache")
    assert flushed.status_code == 200 and flushed.text.startswith("Cache flushed.")
    assert _post(sim_server.url, "/generate", body).json()["meta_info"]["cached_tokens"] == 0


def test_flush_cache_refused_while_running(sim_server: Any) -> None:
    # Steps 25 times slower (the shared simulator at 0.02 then runs like one at 0.5): the
    # request runs ~3 s of wall time, so a loaded box cannot finish it between "running" and
    # the flush (at the shared simulator's own speed it lasts 0.1 s).
    httpx.post(sim_server.url + "/_sim/faults", json={"step_time_mult": 25.0}).raise_for_status()
    body = {"text": "long one", "sampling_params": {"max_new_tokens": 1000, "ignore_eos": True}}
    worker = threading.Thread(target=_post, args=(sim_server.url, "/generate", body))
    worker.start()
    try:
        deadline = time.monotonic() + 5
        while _scrape(sim_server.url)["sglang:num_running_reqs"] < 1:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert httpx.post(sim_server.url + "/flush_cache").status_code == 400
    finally:
        worker.join()
        httpx.post(sim_server.url + "/_sim/reset").raise_for_status()
    assert httpx.post(sim_server.url + "/flush_cache").status_code == 200
