"""The /_sim/ fault API: each fault, reset, truth, and background traffic."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

GEN = {"text": "fault injection target", "sampling_params": {"max_new_tokens": 24,
                                                              "ignore_eos": True}}


@pytest.fixture(scope="module")
def faulty(start_sim: Callable[..., Any]) -> Any:
    """A simulator of its own: faults must not leak into other tests' simulator."""
    return start_sim(time_scale=0.01)


@pytest.fixture()
def sim(faulty: Any) -> Iterator[Any]:
    try:
        yield faulty
    finally:
        httpx.post(faulty.url + "/_sim/reset")


def _set(sim: Any, **fields: Any) -> httpx.Response:
    return httpx.post(sim.url + "/_sim/faults", json=fields)


def _generate(sim: Any, body: dict[str, Any] = GEN, timeout: float = 30.0) -> httpx.Response:
    return httpx.post(sim.url + "/generate", json=body, timeout=timeout)


def test_faults_get_defaults_and_bad_field(sim: Any) -> None:
    state = httpx.get(sim.url + "/_sim/faults").json()
    assert state["error_rate"] == 0.0 and state["background_requests"] == 0
    bad = _set(sim, nonsense=1)
    assert bad.status_code == 400
    assert "error_rate" in bad.json()["error"]["message"]  # lists the accepted names
    assert _set(sim, error_rate=2.0).status_code == 400


def test_error_rate_and_reset(sim: Any) -> None:
    assert _set(sim, error_rate=1.0, error_status=503).status_code == 200
    failed = _generate(sim)
    assert failed.status_code == 503 and "message" in failed.json()["error"]
    assert httpx.get(sim.url + "/health_generate").status_code == 503
    httpx.post(sim.url + "/_sim/reset")
    assert _generate(sim).status_code == 200


def test_hang(sim: Any) -> None:
    _set(sim, hang_s=0.5)
    with pytest.raises(httpx.ReadTimeout):
        _generate(sim, timeout=0.2)


def test_drop_non_streaming(sim: Any) -> None:
    _set(sim, drop_rate=1.0)
    with pytest.raises(httpx.RemoteProtocolError):
        _generate(sim)


def test_drop_streaming(sim: Any) -> None:
    _set(sim, drop_rate=1.0)
    body = dict(GEN, stream=True)
    with pytest.raises(httpx.RemoteProtocolError):
        _generate(sim, body)


def test_malformed(sim: Any) -> None:
    _set(sim, malformed_rate=1.0)
    response = _generate(sim)
    assert response.status_code == 200
    with pytest.raises(json.JSONDecodeError):
        json.loads(response.text)


def test_early_stop_despite_ignore_eos(sim: Any) -> None:
    _set(sim, early_stop_rate=1.0)
    body = {"text": "x", "sampling_params": {"max_new_tokens": 100, "ignore_eos": True}}
    meta = _generate(sim, body).json()["meta_info"]
    assert meta["finish_reason"]["type"] == "stop"
    assert 1 <= meta["completion_tokens"] <= 50


def test_extra_verify_steps_over_count_spec_verify_ct_consistently(sim: Any) -> None:
    honest = _generate(sim).json()["meta_info"]
    _set(sim, extra_verify_steps=30)
    meta = _generate(sim).json()["meta_info"]
    assert meta["spec_verify_ct"] >= 30 + 1
    assert meta["spec_accept_length"] == pytest.approx(24 / meta["spec_verify_ct"])
    histogram = meta["spec_correct_drafts_histogram"]
    assert sum(histogram) == meta["spec_verify_ct"]  # the extra steps drafted nothing
    assert set(honest) == set(meta)


def test_omit_spec_fields(sim: Any) -> None:
    _set(sim, omit_spec_fields=True)
    meta = _generate(sim).json()["meta_info"]
    assert not any(key.startswith("spec_") for key in meta)
    assert "completion_tokens" in meta


def _truth_of(sim: Any, request_id: str) -> dict[str, Any]:
    requests = httpx.get(sim.url + "/_sim/truth").json()["requests"]
    return next(r for r in requests if r["id"] == request_id)


def test_truth_matches_response(sim: Any) -> None:
    meta = _generate(sim).json()["meta_info"]
    truth = _truth_of(sim, meta["id"])
    assert len(truth["commits"]) == meta["spec_verify_ct"] == len(truth["step_ms"])
    assert sum(truth["commits"]) + 1 == meta["completion_tokens"]
    assert truth["background"] is False and truth["prefill_ms"] > 0
    whole = httpx.get(sim.url + "/_sim/truth").json()
    assert whole["time_scale"] == 0.01 and whole["profile"]["physics"]["a_ms"] > 0


def test_regression_multipliers(sim: Any) -> None:
    body = {"text": "Repeat after me. " * 40, "sampling_params": {"max_new_tokens": 200,
                                                                   "ignore_eos": True}}
    base = _truth_of(sim, _generate(sim, body).json()["meta_info"]["id"])
    _set(sim, step_time_mult=1.5, acceptance_mult=0.5, noise=0.0)
    slow = _truth_of(sim, _generate(sim, body).json()["meta_info"]["id"])
    base_step = sum(base["step_ms"]) / len(base["step_ms"])
    slow_step = sum(slow["step_ms"]) / len(slow["step_ms"])
    assert slow_step > 1.3 * base_step
    assert len(slow["commits"]) > 1.5 * len(base["commits"])


def test_background_requests_share_steps(sim: Any) -> None:
    _set(sim, background_requests=2)
    metrics = httpx.get(sim.url + "/metrics").text
    assert "sglang:num_running_reqs" in metrics
    meta = _generate(sim).json()["meta_info"]
    truth = httpx.get(sim.url + "/_sim/truth").json()["requests"]
    assert sum(1 for r in truth if r["background"]) >= 2
    assert _truth_of(sim, meta["id"])["background"] is False
    # The gauges are published, not live (SGLang 0.5.23: with prefill batches and every 40
    # decode steps): wait for a publication that shows both background requests.
    deadline = time.monotonic() + 60
    while _running(sim) < 2:
        assert time.monotonic() < deadline, "num_running_reqs never showed the 2 requests"
        time.sleep(0.05)
    httpx.post(sim.url + "/_sim/reset")
    deadline = time.monotonic() + 60  # re-published at idle
    while _running(sim) != 0:
        assert time.monotonic() < deadline, "num_running_reqs stayed above 0 after the reset"
        time.sleep(0.05)


def _running(sim: Any) -> float:
    for line in httpx.get(sim.url + "/metrics").text.splitlines():
        if line.startswith("sglang:num_running_reqs{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError("num_running_reqs missing")
