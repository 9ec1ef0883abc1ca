"""One test per known difference between a real release and the simulator: the real shape (from the
released sources named in each test) and what the suite does with it."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import httpx
import pytest

from specperf.servers import acceptance, routes
from specperf.servers.client import Client, StreamEvent
from specperf.servers.probe import ServerTokenizer
from specperf.servers.serverkind import Detected, detect, release_notes, timings_note

TEXT = {"text": "Distributed systems require careful reasoning. " * 20,
        "sampling_params": {"max_new_tokens": 40, "ignore_eos": True, "temperature": 0}}
OPENAI = {"prompt": "Distributed systems require careful reasoning. " * 20, "max_tokens": 40,
          "ignore_eos": True, "temperature": 0, "return_spec_tokens_details": True}


@pytest.fixture
def client() -> Any:
    """A factory of specperf Clients, all closed at teardown."""
    made: list[Client] = []

    def make(url: str) -> Client:
        made.append(Client(url))
        return made[-1]

    yield make
    for c in made:
        c.close()


@pytest.fixture(scope="module")
def vllm(start_sim: Any) -> Any:
    """The vLLM 0.33 profile, shared by the module's tests that only read or generate."""
    return start_sim(profile="vllm-0.33", time_scale=0.005)


@pytest.fixture(scope="module")
def sglang_0523(start_sim: Any) -> Any:
    """The SGLang 0.5.23 profile, shared by the module's tests that only read or generate."""
    return start_sim(profile="sglang-0.5.23", time_scale=0.005)


@pytest.fixture(scope="module")
def sglang_flags(start_sim: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """SGLang 0.5.23 without --enable-cache-report, with SGLANG_LOG_FORWARD_ITERS=1 (each
    flag is read by one test; neither touches what the other test reads)."""
    folder = tmp_path_factory.mktemp("sglang-flags")
    path = folder / "flags.toml"
    path.write_text('name = "flags"\ninherit = "sglang-0.5.23"\n[flags]\n'
                    'enable_cache_report = false\nlog_forward_iters = true\n')
    return start_sim(profile=str(path), time_scale=0.005, log_file=folder / "decode.log")


@pytest.fixture(scope="module")
def vllm_flags(start_sim: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """vLLM 0.33 in dev mode, without the per-request metrics flags (each read by one test;
    neither touches what the other test reads)."""
    path = tmp_path_factory.mktemp("vllm-flags") / "flags.toml"
    path.write_text('name = "flags"\ninherit = "vllm-0.33"\n[flags]\ndev_mode = true\n'
                    'enable_per_request_metrics = false\nper_request_spec_decode_metrics = '
                    '"none"\n')
    return start_sim(profile=str(path), time_scale=0.005)


def _events(response: httpx.Response) -> list[StreamEvent]:
    import json
    lines = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
    return [StreamEvent(json.loads(x), 0.01 * i) for i, x in enumerate(lines) if x != "[DONE]"]


def test_item2_vllm_detokenize_answers_prompt(client: Any, vllm: Any) -> None:
    # vllm/entrypoints/serve/tokenize/protocol.py DetokenizeResponse: prompt, not text.
    sim = vllm
    ids = httpx.post(sim.url + "/tokenize", json={"prompt": "hello world"}).json()["tokens"]
    assert set(httpx.post(sim.url + "/detokenize", json={"tokens": ids}).json()) == {"prompt"}
    tokenizer = ServerTokenizer(client(sim.url), "/tokenize")
    assert tokenizer.detokenize(ids) == "hello world"


def test_item3_sglang_stream_keeps_steps_from_the_separate_sglext_chunk(sim_server: Any) -> None:
    # SGLang 0.5.23 serving_completions.py ~444-476: sglext alone (choices [], usage null).
    body = {**OPENAI, "stream": True, "stream_options": {"include_usage": True}}
    events = _events(httpx.post(sim_server.url + "/v1/completions", json=body, timeout=60))
    ext = events[-2].data
    assert ext["choices"] == [] and ext["usage"] is None and "sglext" in ext
    assert "sglext" not in events[-1].data
    streamed = routes.parse_stream("openai", events)
    assert streamed.completion.verify_steps == \
        ext["sglext"]["spec_tokens_details"]["spec_verify_ct"] > 0


def test_item4_first_token_latency_needs_0_5_21_and_enable_metrics(start_sim: Any) -> None:
    # observability/req_time_stats.py: first_token_latency only from 0.5.21, under
    # --enable-metrics (tokenizer_manager.py).
    old = start_sim(profile="sglang-0.5.19", time_scale=0.005)
    meta = httpx.post(old.url + "/generate", json=TEXT, timeout=60).json()["meta_info"]
    assert "first_token_latency" not in meta and "decode_throughput" in meta
    assert routes.parse("sglang", {"meta_info": meta, "text": ""}).ttft_s is None
    detected = Detected("sglang", "0.5.19", server_info={"enable_metrics": True})
    assert timings_note(detected, "sglang") == (
        "no server timings: SGLang 0.5.19 has no meta_info.first_token_latency (SGLang added it "
        "in 0.5.21, with --enable-metrics); decode time is estimated with the two-point method.")
    off = Detected("sglang", "0.5.23", server_info={"enable_metrics": False})
    assert timings_note(off, "sglang") == (
        "no server timings: start SGLang 0.5.23 with --enable-metrics (meta_info."
        "first_token_latency needs it); decode time is estimated with the two-point method.")


def test_item5_cached_tokens_need_enable_cache_report(sglang_flags: Any) -> None:
    # entrypoints/openai/usage_processor.py: prompt_tokens_details only with the flag.
    sim = sglang_flags
    usage = httpx.post(sim.url + "/v1/completions", json=OPENAI, timeout=60).json()["usage"]
    assert "prompt_tokens_details" not in usage
    comp = routes.parse("openai", httpx.post(sim.url + "/v1/completions", json=OPENAI,
                                             timeout=60).json())
    assert comp.cached_tokens is None
    notes = release_notes(Detected("sglang", "0.5.23"), comp, None, "openai", ())
    assert notes[-1] == ("no usage.prompt_tokens_details.cached_tokens: the prefix-cache check "
                         "is off on this route; start SGLang with --enable-cache-report.")


def test_item6_version_gaps_spec_fields_and_model_info(client: Any, start_sim: Any) -> None:
    # 0.5.14 tokenizer_manager.py: current names plus aliases; no sglext (protocol.py has no
    # return_spec_tokens_details); /model_info without parsers (http_server.py).
    sim = start_sim(profile="sglang-0.5.14", time_scale=0.005)
    meta = httpx.post(sim.url + "/generate", json=TEXT, timeout=60).json()["meta_info"]
    assert meta["spec_accept_histogram"] == meta["spec_correct_drafts_histogram"]
    assert meta["spec_accepted_drafts"] == meta["spec_num_correct_drafts"]
    body = httpx.post(sim.url + "/v1/completions", json=OPENAI, timeout=60).json()
    assert "sglext" not in body and routes.parse("openai", body).verify_steps is None
    assert "reasoning_parser" not in httpx.get(sim.url + "/model_info").json()
    assert httpx.get(sim.url + "/server_info").json()["reasoning_parser"] == "kimi_k2"
    detected = detect(client(sim.url))
    assert (detected.kind, detected.release) == ("sglang", "0.5.14")
    comp = routes.parse("openai", body)
    snap = acceptance.MetricsSnapshot(1.0, 1.0, 1.0, 0.0, 0.0)
    assert release_notes(detected, comp, snap, "openai", ())[1] == (
        "no per-request step count: SGLang 0.5.14 has no sglext.spec_tokens_details on the "
        "OpenAI routes (added in 0.5.19); acceptance comes from the /metrics counters; "
        "--specperf-api sglang reads meta_info.spec_verify_ct.")


def test_item6_no_verify_counter_means_no_metrics_source() -> None:
    snap = acceptance.parse_metrics("sglang:num_requests_total 3\nsglang:num_running_reqs 0\n")
    comp = routes.parse("sglang", {"meta_info": {"prompt_tokens": 1, "completion_tokens": 2,
                                                 "finish_reason": {"type": "length"}}})
    notes = release_notes(Detected("sglang", "0.5.11"), comp, snap, "sglang", ())
    assert ("/metrics has no sglang:spec_verify_calls_total (SGLang added it in 0.5.14): the "
            "metrics acceptance source is unavailable; use --specperf-acceptance-source response "
            "or log.") in notes


def test_item7_vllm_names_the_thinking_reasoning(vllm: Any) -> None:
    # vllm/entrypoints/openai/chat_completion/protocol.py: message.reasoning.
    sim = vllm
    chat = {"messages": [{"role": "user", "content": "think"}], "max_tokens": 60,
            "ignore_eos": True}
    body = httpx.post(sim.url + "/v1/chat/completions", json=chat, timeout=60).json()
    message = body["choices"][0]["message"]
    assert "reasoning" in message and "reasoning_content" not in message
    assert routes.parse("openai-chat", body).reasoning == message["reasoning"]
    events = _events(httpx.post(sim.url + "/v1/chat/completions", timeout=60, json={
        **chat, "stream": True, "stream_options": {"include_usage": True}}))
    deltas = [e.data["choices"][0]["delta"] for e in events if e.data.get("choices")]
    streamed = "".join(d.get("reasoning", "") for d in deltas)
    assert streamed and not any("reasoning_content" in d for d in deltas)
    assert routes.parse_stream("openai-chat", events).completion.reasoning == streamed


def test_item8_vllm_dev_mode_server_info_is_not_sglang(client: Any, vllm_flags: Any) -> None:
    # vllm/entrypoints/serve/dev/server_info/api_router.py: vllm_config, vllm_env, ...
    sim = vllm_flags
    assert {"vllm_config", "vllm_env"} <= set(httpx.get(sim.url + "/server_info").json())
    assert httpx.post(sim.url + "/generate", json=TEXT).status_code == 404
    detected = detect(client(sim.url))
    assert (detected.kind, detected.release, detected.dev_mode) == ("vllm", "0.33.0", True)


def test_item9_context_length_null_falls_back_to_tokenize(client: Any, sglang_0523: Any
                                                          ) -> None:
    sim = sglang_0523
    assert httpx.get(sim.url + "/server_info").json()["context_length"] is None
    assert ServerTokenizer(client(sim.url), "/tokenize").max_model_len() == 262144


def test_item10_vllm_steps_and_decode_time_only_with_their_flags(vllm: Any, vllm_flags: Any
                                                                 ) -> None:
    # generate/base/serving.py: generation_time_ms with --enable-per-request-metrics;
    # speculative_decoding with --per-request-spec-decode-metrics.
    sim = vllm
    body = httpx.post(sim.url + "/v1/completions", json=OPENAI, timeout=60).json()
    sd = body["metrics"]["speculative_decoding"]
    comp = routes.parse("openai", body)
    assert comp.verify_steps == sd["num_spec_steps"] == sum(sd["acceptance_histogram"])
    assert comp.e2e_s is not None and comp.ttft_s is not None
    assert comp.e2e_s - comp.ttft_s == pytest.approx(body["metrics"]["generation_time_ms"] / 1e3)
    plain = vllm_flags  # both flags off
    body = httpx.post(plain.url + "/v1/completions", json=OPENAI, timeout=60).json()
    assert "metrics" not in body and routes.parse("openai", body).verify_steps is None


def test_item11_empty_histogram_is_not_zero_steps() -> None:
    # openai/utils.py spec_tokens_details_from_meta_info: absent histogram -> [], absent
    # spec_verify_ct -> 0 (a DDTree fork may send neither).
    body = {"choices": [{"text": "x", "finish_reason": "length"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 9},
            "sglext": {"spec_tokens_details": {"spec_verify_ct": 3,
                                               "spec_correct_drafts_histogram": []}}}
    comp = routes.parse("openai", body)
    assert comp.histogram_sum is None and comp.verify_steps == 3
    body["sglext"]["spec_tokens_details"]["spec_verify_ct"] = 0
    assert routes.parse("openai", body).verify_steps is None


def test_item12_simulator_matches_a_release(sglang_0523: Any) -> None:
    sim = sglang_0523
    before = acceptance.parse_metrics(httpx.get(sim.url + "/metrics").text).requests or 0.0
    meta = httpx.post(sim.url + "/generate", json=TEXT, timeout=60).json()["meta_info"]
    histogram = meta["spec_correct_drafts_histogram"]  # grows with use (schedule_batch.py)
    assert histogram[-1] > 0 and sum(histogram) == meta["spec_verify_ct"]
    assert "spec_accept_histogram" not in meta  # aliases gone in 0.5.23
    # detokenize honours skip_special_tokens (entrypoints/openai/protocol.py).
    kept = httpx.post(sim.url + "/detokenize", json={"tokens": [1, 1000 + 0],
                                                     "skip_special_tokens": False})
    skipped = httpx.post(sim.url + "/detokenize", json={"tokens": [1]})
    assert skipped.json() == {"text": ""} and kept.status_code in (200, 400)
    assert httpx.post(sim.url + "/detokenize", json={
        "tokens": [1], "skip_special_tokens": False}).json() == {"text": "<bos>"}
    # Request, prompt and generation counters split by is_streaming (observability/
    # metrics_collector.py ~1855-1945); the suite's counters sum over the split.
    text = httpx.get(sim.url + "/metrics").text
    for name in ("num_requests_total", "prompt_tokens_total", "generation_tokens_total"):
        assert re.search(rf'^sglang:{name}{{[^}}]*is_streaming="false"[^}}]*}} [1-9]', text,
                         re.M), name
    # The shared simulator may have served the module's other tests: this request's share.
    assert acceptance.parse_metrics(text).requests == before + 1


def test_item13_forward_iters_log_line_is_parsed() -> None:
    # managers/scheduler_components/metrics_reporter.py with SGLANG_LOG_FORWARD_ITERS=1.
    line = ("[2026-11-29 10:00:00 TP0] Decode batch [1234], #running-req: 1, #token: 10234, "
            "token usage: 0.01, accept len: 4.50, accept rate: 0.23, cuda graph: True, gen "
            "throughput (token/s): 604.01, #queue-req: 0")
    [window] = acceptance.parse_decode_log([line])
    assert window.accept_len == 4.5 and window.ts == datetime(2026, 11, 29, 10, 0, 0)


def test_item13_simulator_writes_forward_iters(sglang_flags: Any) -> None:
    sim, log = sglang_flags, sglang_flags.log_file
    long = {**TEXT, "sampling_params": {**TEXT["sampling_params"], "max_new_tokens": 600}}
    httpx.post(sim.url + "/generate", json=long, timeout=60)
    lines = log.read_text().splitlines()
    assert lines and all("Decode batch [" in line for line in lines)
    assert len(acceptance.parse_decode_log(lines)) == len(lines)
