"""The simulator as a process: CLI contract, shutdown, determinism, log file, profile switches."""

from __future__ import annotations

import re
import signal
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
import pytest

from sim_fixtures import launch_sim
from specperf.sim.server import is_loopback

CURRENT_LINE = re.compile(
    r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d TP0\] Decode batch, #running-req: \d+, #token: \d+, "
    r"token usage: \d+\.\d\d, accept len: \d+\.\d\d, accept rate: \d\.\d\d, cuda graph: True, "
    r"gen throughput \(token/s\): \d+\.\d\d, #queue-req: \d+$"
)
LEGACY_LINE = re.compile(
    r"Decode batch\. #running-req: \d+, #token: \d+, token usage: \d+\.\d\d, "
    r"accept len: \d+\.\d\d, cuda graph: True, gen throughput \(token/s\): \d+\.\d\d, "
    r"#queue-req: \d+, $"  # SGLang 0.4.10 managers/scheduler_metrics_mixin.py
)
LONG = {"text": "Tell me a long story", "sampling_params": {"max_new_tokens": 600,
                                                             "ignore_eos": True}}


def _variant(tmp_path: Path, name: str, switches: str) -> Path:
    shipped = resources.files("specperf.sim") / "profiles" / "kimi-k26-ddtree.toml"
    text = shipped.read_text(encoding="utf-8").split("[switches]")[0]
    path = tmp_path / f"{name}.toml"
    path.write_text(text.replace('name = "kimi-k26-ddtree"', f'name = "{name}"')
                    + "[switches]\n" + switches, encoding="utf-8")
    return path


def test_unknown_profile_fails_clearly() -> None:
    with pytest.raises(pytest.fail.Exception, match="unknown profile"):
        launch_sim(profile="no-such-profile")


def test_loopback_detection() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.1.2.3")


def _sequence(url: str) -> list[tuple[list[int], int, list[int]]]:
    bodies = [
        {"text": "Determinism matters. " * 30, "sampling_params": {"max_new_tokens": 80,
                                                                  "ignore_eos": True}},
        {"text": "Varied prose about rivers, mountains and old maps",
         "sampling_params": {"max_new_tokens": 60, "ignore_eos": True}},
        {"input_ids": [1, 5, 6, 7, 5, 6, 7, 5, 6, 7], "sampling_params": {"max_new_tokens": 30,
                                                                         "ignore_eos": True}},
    ]
    out = []
    truth_ids = []
    for body in bodies:
        data = httpx.post(url + "/generate", json=body, timeout=30).json()
        out.append(data)
        truth_ids.append(data["meta_info"]["id"])
    truth = {r["id"]: r["commits"] for r in httpx.get(url + "/_sim/truth").json()["requests"]}
    return [(d["output_ids"], d["meta_info"]["spec_verify_ct"], truth[i])
            for d, i in zip(out, truth_ids, strict=True)]


def test_same_seed_same_outputs(start_sim: Callable[..., Any]) -> None:
    first = start_sim(time_scale=0.01, extra_args=["--seed", "7"])
    second = start_sim(time_scale=0.02, extra_args=["--seed", "7"])
    assert _sequence(first.url) == _sequence(second.url)
    other = start_sim(time_scale=0.01, extra_args=["--seed", "8"])
    assert _sequence(other.url) != _sequence(first.url)


def test_decode_log_current_format_and_sigterm_exits_zero(tmp_path: Path) -> None:
    # Its own process (not start_sim's): the test ends it, and the SIGTERM contract is checked
    # on a simulator that has served (health, a generation, a log file).
    log = tmp_path / "decode.log"
    sim = launch_sim(time_scale=0.005, log_file=log)
    try:
        assert httpx.get(sim.url + "/health").status_code == 200
        meta = httpx.post(sim.url + "/generate", json=LONG, timeout=30).json()["meta_info"]
        lines = log.read_text(encoding="utf-8").splitlines()
        assert len(lines) == meta["spec_verify_ct"] // 40
        assert lines and all(CURRENT_LINE.match(line) for line in lines), lines[:2]
        accept = re.search(r"accept len: ([\d.]+)", lines[0])
        assert accept is not None and 1.0 <= float(accept.group(1)) <= 16.0
        sim.terminate()  # SIGTERM, once
        assert sim.stop() == 0
    finally:
        sim.stop()


def test_legacy_variant(start_sim: Callable[..., Any], tmp_path: Path) -> None:
    switches = ('spec_fields = "legacy"\nserver_timings = false\nmetrics = false\n'
                'tokenize = false\nlog_format = "legacy"\n')
    log = tmp_path / "legacy.log"
    sim = start_sim(profile=str(_variant(tmp_path, "legacy-variant", switches)),
                    time_scale=0.005, log_file=log)
    meta = httpx.post(sim.url + "/generate", json=LONG, timeout=30).json()["meta_info"]
    # SGLang 0.5.11's spelling (fidelity item 12: the old mix matched no release).
    assert {"spec_verify_ct", "spec_accept_length", "spec_accept_histogram",
            "spec_accepted_drafts", "spec_proposed_drafts"} <= set(meta)
    assert "spec_correct_drafts_histogram" not in meta and "first_token_latency" not in meta
    assert sum(meta["spec_accept_histogram"]) == meta["spec_verify_ct"]
    assert "e2e_latency" in meta
    assert httpx.get(sim.url + "/metrics").status_code == 404
    assert httpx.post(sim.url + "/tokenize", json={"prompt": "x"}).status_code == 404
    assert httpx.get(sim.url + "/server_info").json()["enable_metrics"] is False
    lines = log.read_text(encoding="utf-8").splitlines()
    assert lines and all(LEGACY_LINE.search(line) for line in lines)


def test_absent_spec_fields_variant(start_sim: Callable[..., Any], tmp_path: Path) -> None:
    sim = start_sim(profile=str(_variant(tmp_path, "absent", 'spec_fields = "absent"\n')),
                    time_scale=0.005)
    body = {"text": "x y z", "sampling_params": {"max_new_tokens": 20, "ignore_eos": True}}
    meta = httpx.post(sim.url + "/generate", json=body, timeout=30).json()["meta_info"]
    assert not any(key.startswith("spec_") for key in meta)
    openai = {"prompt": "x", "max_tokens": 5, "return_spec_tokens_details": True}
    assert "sglext" not in httpx.post(sim.url + "/v1/completions", json=openai).json()
    # Counters still expose acceptance (the second of README's acceptance sources).
    assert "sglang:spec_verify_calls_total" in httpx.get(sim.url + "/metrics").text


def test_alt_profile_differs_and_sigint_exits_zero() -> None:
    # Its own process (not start_sim's): the test ends it with SIGINT (Ctrl-C) once served.
    sim = launch_sim(profile="alt-eagle3", time_scale=0.005)
    try:
        reply = httpx.get(sim.url + "/server_info")
        assert reply.json()["speculative_algorithm"] == "EAGLE3"
        assert "profile=alt-eagle3;" in reply.headers["x-specperf-simulator"]
        assert httpx.get(sim.url + "/model_info").json()["reasoning_parser"] is None
        meta = httpx.post(sim.url + "/generate", json=LONG, timeout=30).json()["meta_info"]
        assert max(i for i, n in enumerate(meta["spec_correct_drafts_histogram"]) if n) < 8
        sim.process.send_signal(signal.SIGINT)
        assert sim.process.wait(timeout=10) == 0
    finally:
        sim.stop()
