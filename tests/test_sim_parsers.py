"""The simulator's Kimi K2 parser path: raw markers, reasoning/content split, tool calls, costs."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

USER = [{"role": "user", "content": "What is the weather like?"}]
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object",
                   "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                                  "unit": {"type": "string", "enum": ["celsius", "kelvin"]},
                                  "verbose": {"type": "boolean"}},
                   "required": ["city", "days", "unit"]}}}
CLOCK = {"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]}}}
MARKERS = ("<think>", "</think>", "<|tool_calls_section_begin|>", "<|tool_call_begin|>")


@pytest.fixture(scope="module")
def kimi(start_sim: Callable[..., Any]) -> Iterator[Any]:
    """A default-profile simulator of this module's own (the cost faults must not leak)."""
    sim = start_sim(time_scale=0.05)
    try:
        yield sim
    finally:
        httpx.post(sim.url + "/_sim/reset")


@pytest.fixture(scope="module")
def plain(start_sim: Callable[..., Any]) -> Any:
    """The alt-eagle3 profile: no reasoning parser, no tool-call parser."""
    return start_sim(profile="alt-eagle3", time_scale=0.05)


def _chat(sim: Any, **fields: Any) -> httpx.Response:
    body = {"messages": USER, "max_tokens": 80, "ignore_eos": True, **fields}
    return httpx.post(sim.url + "/v1/chat/completions", json=body, timeout=30)


def _token(sim: Any, text: str) -> int:
    body = {"prompt": text, "add_special_tokens": False}
    tokens = httpx.post(sim.url + "/tokenize", json=body).json()["tokens"]
    assert len(tokens) == 1, f"{text!r} is not one token"
    return int(tokens[0])


def _events(text: str) -> list[dict[str, Any]]:
    events = [e[len("data: "):] for e in text.split("\n\n") if e]
    assert events[-1] == "[DONE]"
    return [json.loads(e) for e in events[:-1]]


def test_native_raw_text_has_think_markers_at_the_split(kimi: Any) -> None:
    body = {"text": "Tell me a story", "sampling_params": {"max_new_tokens": 50,
                                                            "ignore_eos": True}}
    data = httpx.post(kimi.url + "/generate", json=body, timeout=30).json()
    assert data["meta_info"]["completion_tokens"] == 50 == len(data["output_ids"])
    assert data["text"].startswith("<think>") and data["text"].count("</think>") == 1
    ids = data["output_ids"]
    assert ids[0] == _token(kimi, "<think>") and ids[30] == _token(kimi, "</think>")  # 50*6//10


def test_model_info_reports_the_profile_parsers(kimi: Any, plain: Any) -> None:
    info = httpx.get(kimi.url + "/model_info").json()
    assert info["reasoning_parser"] == "kimi_k2" and info["tool_call_parser"] == "kimi_k2"
    off = httpx.get(plain.url + "/model_info").json()
    assert off["reasoning_parser"] is None and off["tool_call_parser"] is None


def test_chat_separates_reasoning_from_content(kimi: Any) -> None:
    data = _chat(kimi).json()
    message = data["choices"][0]["message"]
    assert message["reasoning_content"] and message["content"]
    assert not any(m in message["reasoning_content"] + message["content"] for m in MARKERS)
    assert message["tool_calls"] is None and data["choices"][0]["finish_reason"] == "length"
    assert data["usage"]["completion_tokens"] == 80


def test_chat_reasoning_switches(kimi: Any) -> None:
    raw = _chat(kimi, separate_reasoning=False).json()["choices"][0]["message"]
    assert raw["reasoning_content"] is None and raw["content"].startswith("<think>")
    no_think = _chat(kimi, chat_template_kwargs={"thinking": False}).json()
    message = no_think["choices"][0]["message"]
    assert message["reasoning_content"] is None and "<think>" not in message["content"]


def test_chat_stream_reasoning_then_content(kimi: Any) -> None:
    chunks = _events(_chat(kimi, stream=True).text)
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert deltas[0] == {"role": "assistant", "content": ""}
    kinds = [next(iter(d)) for d in deltas[1:-1]]
    assert kinds == sorted(kinds, key=lambda k: k != "reasoning_content")  # reasoning first
    reasoning = "".join(d.get("reasoning_content", "") for d in deltas)
    content = "".join(d.get("content", "") for d in deltas)
    assert reasoning and content and not any(m in reasoning + content for m in MARKERS)
    assert deltas[-1] == {} and chunks[-1]["choices"][0]["finish_reason"] == "length"


def test_tool_call_parsed_with_json_arguments(kimi: Any) -> None:
    data = _chat(kimi, tools=[WEATHER, CLOCK], max_tokens=120).json()
    choice = data["choices"][0]
    (call,) = choice["message"]["tool_calls"]
    assert call["id"] == "functions.get_weather:0" and call["type"] == "function"
    assert call["index"] == 0 and call["function"]["name"] == "get_weather"
    arguments = json.loads(call["function"]["arguments"])
    assert arguments == {"city": "sim", "days": 1, "unit": "celsius"}
    assert choice["finish_reason"] == "length"  # ignore_eos: the budget ended the turn
    assert "<|tool" not in choice["message"]["content"] and choice["message"]["reasoning_content"]
    assert data["usage"]["completion_tokens"] == 120


def test_tool_call_without_ignore_eos_finishes_tool_calls(kimi: Any) -> None:
    data = _chat(kimi, tools=[WEATHER], ignore_eos=False).json()
    assert data["choices"][0]["finish_reason"] == "tool_calls"
    assert data["choices"][0]["matched_stop"] is None
    assert data["usage"]["completion_tokens"] == 79  # the model stopped after the section


def test_tool_choice_variants(kimi: Any) -> None:
    named = {"type": "function", "function": {"name": "get_time"}}
    call = _chat(kimi, tools=[WEATHER, CLOCK], tool_choice=named).json()
    assert call["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_time"
    none = _chat(kimi, tools=[WEATHER], tool_choice="none").json()
    assert none["choices"][0]["message"]["tool_calls"] is None
    missing = {"type": "function", "function": {"name": "nope"}}
    bad = _chat(kimi, tools=[WEATHER], tool_choice=missing)
    assert bad.status_code == 400 and "Tool 'nope' not found" in bad.json()["message"]
    assert _chat(kimi, tool_choice="required").status_code == 400


def test_tool_call_stream_deltas(kimi: Any) -> None:
    chunks = _events(_chat(kimi, tools=[WEATHER], max_tokens=120, stream=True).text)
    calls = [c["choices"][0]["delta"]["tool_calls"][0] for c in chunks
             if c["choices"] and "tool_calls" in c["choices"][0]["delta"]]
    assert calls[0]["id"] == "functions.get_weather:0"
    assert calls[0]["function"] == {"name": "get_weather", "arguments": ""}
    assert all(c["id"] is None and c["function"]["name"] is None for c in calls[1:])
    arguments = json.loads("".join(c["function"]["arguments"] for c in calls))
    assert set(arguments) == {"city", "days", "unit"}


def test_parsers_off_profile(plain: Any) -> None:
    body = {"text": "Tell me a story", "sampling_params": {"max_new_tokens": 30,
                                                            "ignore_eos": True}}
    assert "<think>" not in httpx.post(plain.url + "/generate", json=body).json()["text"]
    message = _chat(plain, tools=[WEATHER]).json()["choices"][0]["message"]
    assert message["reasoning_content"] is None and message["tool_calls"] is None
    assert message["content"] and not any(m in message["content"] for m in MARKERS)


def test_return_meta_info_on_chat(kimi: Any) -> None:
    choice = _chat(kimi, return_meta_info=True).json()["choices"][0]
    meta = choice["meta_info"]
    assert meta["completion_tokens"] == 80 and meta["spec_verify_ct"] > 0
    assert "first_token_latency" in meta and "decode_throughput" in meta
    assert _chat(kimi, return_meta_info=True, stream=True).status_code == 400


def _truth(sim: Any) -> dict[str, Any]:
    """The simulator's ground truth of its last request."""
    last: dict[str, Any] = httpx.get(sim.url + "/_sim/truth").json()["requests"][-1]
    return last


def test_parser_response_cost_delays_client_not_server(kimi: Any) -> None:
    httpx.post(kimi.url + "/_sim/faults", json={"parser_response_ms": 400})
    try:
        meta = _chat(kimi, return_meta_info=True).json()["choices"][0]["meta_info"]
        parsed = _truth(kimi)
        _chat(kimi, separate_reasoning=False)  # no parser engaged: no cost
        unparsed = _truth(kimi)
    finally:
        httpx.post(kimi.url + "/_sim/reset")
    assert parsed["post_processing_ms"] == 400 and unparsed["post_processing_ms"] == 0
    # The server's own timing is its receive-to-finish interval (the simulator's clock), so
    # the 400 ms of post-processing it recorded apart is not in it.
    assert meta["e2e_latency"] == pytest.approx(parsed["finished_mono"] - parsed["received_mono"])


def test_parser_chunk_cost_slows_the_stream_not_the_decode(kimi: Any) -> None:
    httpx.post(kimi.url + "/_sim/faults", json={"parser_chunk_ms": 30})
    try:
        chunks = _events(_chat(kimi, stream=True, return_spec_tokens_details=True).text)
        truth = _truth(kimi)
    finally:
        httpx.post(kimi.url + "/_sim/reset")
    steps = chunks[-1]["sglext"]["spec_tokens_details"]["spec_verify_ct"]
    assert truth["post_processing_ms"] >= 30 * (1 + steps)  # every output parsed in turn


def test_a_stalled_stream_parser_never_holds_the_decode_back(kimi: Any) -> None:
    """The parser's cost is paid on the HTTP side: with the stream stalled in its first
    chunk's parsing, the scheduler still finishes the request (an observable state, waited on
    with a deadline) while the client holds at most the role chunk and one parsed delta."""
    httpx.post(kimi.url + "/_sim/faults", json={"parser_chunk_ms": 60_000})
    body = {"messages": USER, "max_tokens": 80, "ignore_eos": True, "stream": True}
    try:
        with httpx.stream("POST", kimi.url + "/v1/chat/completions", json=body,
                          timeout=30) as reply:
            received = 0
            lines = reply.iter_lines()
            while received < 1:
                received += next(lines).startswith("data: ")
            deadline = time.monotonic() + 20
            while _truth(kimi)["finish_reason"] is None:
                assert time.monotonic() < deadline, "the decode waited for the parser"
                time.sleep(0.02)
            finished = _truth(kimi)
    finally:
        httpx.post(kimi.url + "/_sim/reset")
    assert finished["completion_tokens"] == 80 and len(finished["commits"]) > 2
    assert finished["post_processing_ms"] <= 60_000  # still in the first output's parsing
