"""The guard's abstract fields: each server family's per-iteration counter and what one
request of ours adds to it; a server kind without a finish counter still gets the exact check.
"""

from __future__ import annotations

import pytest

from specperf.measure import guard
from specperf.servers import acceptance
from specperf.servers.acceptance import MetricsSnapshot, parse_metrics

VLLM = """\
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="m"} 1200.0
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="m"} 3400.0
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 7.0
vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 2.0
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 0.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 0.0
"""
SGLANG = """\
# TYPE sglang:realtime_tokens_total counter
sglang:realtime_tokens_total{mode="prefill_compute",model_name="m"} 900.0
sglang:realtime_tokens_total{mode="prefill_cache",model_name="m"} 100.0
sglang:realtime_tokens_total{mode="decode",model_name="m"} 5000.0
# TYPE sglang:num_requests_total counter
sglang:num_requests_total{model_name="m"} 4.0
"""


def test_each_family_sums_its_per_iteration_series() -> None:
    vllm = parse_metrics(VLLM)
    assert (vllm.family, vllm.progress, vllm.requests) == ("vllm", 4600.0, 9.0)
    sglang = parse_metrics(SGLANG)
    assert (sglang.family, sglang.progress, sglang.requests) == ("sglang", 6000.0, 4.0)
    # An older SGLang without the counter: no progress, so busy gauges are believed.
    old = parse_metrics(SGLANG.split("# TYPE sglang:num_requests_total")[0].replace(
        "realtime_tokens_total", "something_else_total") + "sglang:num_running_reqs 0\n")
    assert old.progress is None


@pytest.mark.parametrize(("family", "span"), [
    ("sglang", (1663 + 599, 1663 + 599)),  # the prompt, then every token after the first
    ("vllm", (1663 + 600, 1663 + 600)),  # the first token is a generation token too
])
def test_what_one_request_accounts_for(family: str, span: tuple[int, int]) -> None:
    assert guard.ACCOUNTING[family].span(1663, 600) == span


class Scrapes:
    def __init__(self, *snaps: MetricsSnapshot) -> None:
        self.snaps = list(snaps)

    def __call__(self) -> MetricsSnapshot:
        return self.snaps.pop(0) if len(self.snaps) > 1 else self.snaps[0]


def _snap(family: str, progress: float, requests: float | None = None, running: float = 0
          ) -> MetricsSnapshot:
    return MetricsSnapshot(None, None, requests, running, 0, progress, family)


def test_vllm_foreign_tokens_beyond_our_request_are_seen() -> None:
    before = _snap("vllm", 4600, 9)
    ours = 4600 + 13 + 64
    quiet = guard.TrafficGuard(Scrapes(_snap("vllm", ours, 10)), settle_s=0)
    assert quiet.after(before, prompt_tokens=13, completion_tokens=64) is not None
    busy = guard.TrafficGuard(Scrapes(_snap("vllm", ours + 300, 10)), settle_s=0)
    with pytest.raises(guard.Disturbed) as err:
        busy.after(before, prompt_tokens=13, completion_tokens=64)
    assert str(err.value) == (
        "the server processed 300 more tokens than this request accounts for "
        "(vllm:prompt_tokens_total + vllm:generation_tokens_total moved by 377, this request "
        "77): a foreign request ran beside it")


def test_a_kind_without_a_finish_counter_still_gets_the_exact_check(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Designed for llama.cpp: gauges, iteration counters, no finished-request counter.
    monkeypatch.setitem(acceptance.PROGRESS, "llamacpp", (
        "llamacpp:n_decode_total", "llamacpp:spec_decode_num_drafts_total"))
    monkeypatch.setitem(guard.ACCOUNTING, "llamacpp", guard.Accounting("iterations",
                                                                       overshoot=2))
    assert guard.ACCOUNTING["llamacpp"].span(13, 64) == (1, 63)
    before = _snap("llamacpp", 500)
    fine = guard.TrafficGuard(Scrapes(_snap("llamacpp", 520)), settle_s=0)
    assert fine.after(before, prompt_tokens=13, completion_tokens=64) is not None
    foreign = guard.TrafficGuard(Scrapes(_snap("llamacpp", 600)), settle_s=0)
    with pytest.raises(guard.Disturbed, match=r"^the server processed 37 more iterations "):
        foreign.after(before, prompt_tokens=13, completion_tokens=64)
    # Before a request: busy iterations with idle gauges are a foreign request.
    moving = [_snap("llamacpp", 500 + i) for i in range(200)]
    waiting = guard.TrafficGuard(Scrapes(*moving), wait_s=0.2, poll_s=0.01)
    with pytest.raises(guard.Disturbed, match="per-iteration counter kept moving"):
        waiting.before()
