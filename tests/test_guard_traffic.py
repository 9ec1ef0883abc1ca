"""Foreign traffic on a real simulator process with SGLang 0.5.23's counter semantics.

The simulator raises its finish counters only when a request finishes, publishes its busy
gauges only with prefill batches, decode-log windows and at idle, and moves
``sglang:realtime_tokens_total`` every iteration (sim/metrics.py cites the release source).
Foreign requests come from a real HTTP client thread (started before ours) or from the
simulator's ``foreign_output`` fault (started a given number of simulated ms after ours).
Each is detected: the attempt is discarded and retried with a fresh nonce, and when the
traffic persists the case errors naming what was seen. A sample that survives never
overlapped a foreign request: checked against the simulator's own ground truth.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from specperf.core.errors import ContaminatedMeasurement
from specperf.measure.sample import Sample
from specperf.measure.session import PerfSession
from specperf.plan.workload import Case
from specperf.settings.config import resolve

# At time scale 0.2 our request (64 tokens at context 13, ~13 verify steps of ~28 simulated
# ms) takes ~75 ms of wall time; the foreign ones below are sized against that.
SCALE = 0.2
OURS = Case("padding", 13, 64)
FOREIGN_BODY = {"text": "foreign traffic " * 20,
                "sampling_params": {"max_new_tokens": 6000, "ignore_eos": True}}


@pytest.fixture
def sim(start_sim: Callable[..., Any]) -> Any:
    return start_sim(time_scale=SCALE)


@pytest.fixture
def session(sim: Any) -> Iterator[PerfSession]:
    settings = resolve({"endpoint": sim.url, "contexts": "13", "output_tokens": "64",
                        "text_classes": "padding"}, {}, {})
    perf = PerfSession(settings, lock_mode="none")
    perf.start()
    try:
        yield perf
    finally:
        perf.close()


def _faults(url: str, **fields: Any) -> None:
    httpx.post(f"{url}/_sim/faults", json=fields).raise_for_status()


def _sample(session: PerfSession) -> Sample:
    assert session.measurer is not None
    return session.measurer.sample(OURS, 0, warmup=False)


def _alone(url: str) -> dict[str, Any]:
    """Our last finished request from the ground truth, asserted to have run alone."""
    truth = httpx.get(f"{url}/_sim/truth").json()["requests"]
    ours = [r for r in truth if not r["background"] and r["completion_tokens"] == 64
            and r["finish_reason"] and r["finish_reason"]["type"] == "length"]
    mine = ours[-1]
    for other in truth:
        if other is mine:
            continue
        ended = other["finished_mono"]
        overlaps = other["received_mono"] < mine["finished_mono"] and \
            (ended is None or ended > mine["received_mono"])
        assert not overlaps, (mine, other)
    return mine


class Foreign:
    """A real foreign client: one long /generate, cut (the simulator aborts it) on stop."""

    def __init__(self, url: str, seconds: float) -> None:
        self.thread = threading.Thread(target=self._run, args=(url, seconds), daemon=True)

    def _run(self, url: str, seconds: float) -> None:
        try:
            httpx.post(f"{url}/generate", json=FOREIGN_BODY, timeout=seconds)
        except httpx.TimeoutException:
            pass  # the connection closes: the simulator aborts the request

    def __enter__(self) -> Foreign:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.thread.join()


def _wait_decoding(url: str) -> None:
    """Until the foreign request has committed tokens (it is decoding), with a deadline."""
    deadline = time.monotonic() + 10
    while not any(r["finish_reason"] is None and r["commits"]
                  for r in httpx.get(f"{url}/_sim/truth").json()["requests"]):
        assert time.monotonic() < deadline, "the foreign request never started decoding"
        time.sleep(0.02)


# -- a long foreign request decoding when ours comes ------------------------------------------
def test_a_long_foreign_request_started_before_ours_persists_into_an_error(sim, session):
    assert session.measurer is not None
    session.measurer.traffic.wait_s = 0.3
    with Foreign(sim.url, seconds=4.0):
        _wait_decoding(sim.url)
        with pytest.raises(ContaminatedMeasurement) as err:
            _sample(session)
    message = str(err.value)
    assert message.startswith("padding-ctx13: 1 foreign requests running and 0 queued on the "
                              "server before the request, still after 0.3 s; every one of 4 "
                              "attempts was disturbed by other traffic on the server (")
    assert message.endswith("). Measure on an idle server: stop other clients or take the "
                            "endpoint out of rotation.")


def test_a_foreign_request_that_ends_is_waited_out_and_the_sample_ran_alone(sim, session):
    assert session.measurer is not None
    session.measurer.traffic.wait_s = 0.2
    # Cut 2 s after it was sent (aborted within the simulator's 1 s disconnect poll): enough
    # retries to outlast it, each a fresh attempt with a new nonce.
    session.measurer.run = replace(session.measurer.run, guard_retries=60)
    with Foreign(sim.url, seconds=2.0):
        _wait_decoding(sim.url)
        sample = _sample(session)
    assert sample.raw["discarded_attempts"][0].startswith("1 foreign requests running")
    mine = _alone(sim.url)
    assert sample.verify_steps == len(mine["commits"])


# -- a long foreign request started in the middle of ours -------------------------------------
LONG_MIDWAY = {"foreign_output": 400, "foreign_prompt": 256, "foreign_delay_ms": 150.0}
PROGRESS_SEEN = ("the server processed {extra} more tokens than this request accounts for "
                 "(sglang:realtime_tokens_total moved by {moved}, this request {ours}): a "
                 "foreign request ran beside it")


def test_a_long_foreign_request_started_midway_is_seen_by_the_per_iteration_counter(sim,
                                                                                   session):
    # It is still running when ours ends: the finish counter moved by exactly one, and only
    # the per-iteration counter shows it. Once only: the retry waits it out and runs alone.
    _faults(sim.url, **LONG_MIDWAY, foreign_times=1)
    sample = _sample(session)
    [seen] = sample.raw["discarded_attempts"]
    truth = httpx.get(f"{sim.url}/_sim/truth").json()["requests"]
    disturbed = [r for r in truth if not r["background"] and r is not truth[-1]][-1]
    ours = disturbed["prompt_tokens"] + 63
    moved = int(seen.split("moved by ")[1].split(",")[0])
    assert seen == PROGRESS_SEEN.format(extra=moved - ours, moved=moved, ours=ours)
    assert moved - ours >= 256  # at least the foreign prompt
    mine = _alone(sim.url)
    assert sample.verify_steps == len(mine["commits"])


def test_a_long_foreign_request_midway_every_time_is_an_error(sim, session):
    assert session.measurer is not None
    session.measurer.traffic.wait_s = 0.2
    _faults(sim.url, **LONG_MIDWAY)
    with pytest.raises(ContaminatedMeasurement) as err:
        _sample(session)
    assert "more tokens than this request accounts for" in str(err.value).split("(", 1)[1]
    assert "every one of 4 attempts was disturbed" in str(err.value)


# -- a short foreign request in the middle of ours ----------------------------------------------
SHORT_MIDWAY = {"foreign_output": 4, "foreign_prompt": 8, "foreign_delay_ms": 100.0}


def test_a_short_foreign_request_midway_is_retried_and_the_sample_ran_alone(sim, session):
    _faults(sim.url, **SHORT_MIDWAY, foreign_times=1)
    sample = _sample(session)
    assert sample.raw["discarded_attempts"] == ["1 foreign request ran during the measurement"]
    _alone(sim.url)


def test_a_short_foreign_request_midway_every_time_is_an_error(sim, session):
    _faults(sim.url, **SHORT_MIDWAY)
    with pytest.raises(ContaminatedMeasurement) as err:
        _sample(session)
    assert str(err.value) == (
        "padding-ctx13: 1 foreign request ran during the measurement; every one of 4 attempts "
        "was disturbed by other traffic on the server (" +
        "; ".join(["1 foreign request ran during the measurement"] * 4) +
        "). Measure on an idle server: stop other clients or take the endpoint out of "
        "rotation.")


# -- the counters themselves ----------------------------------------------------------------
def _wait_all_finished(url: str) -> None:
    deadline = time.monotonic() + 10
    while any(r["finish_reason"] is None
              for r in httpx.get(f"{url}/_sim/truth").json()["requests"]):
        assert time.monotonic() < deadline
        time.sleep(0.05)


def _scrape(url: str) -> dict[str, float]:
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(httpx.get(f"{url}/metrics").text):
        for sample in family.samples:
            totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
    return totals


def test_counters_move_at_finish_and_the_realtime_counter_every_iteration(sim):
    before = _scrape(sim.url)
    with Foreign(sim.url, seconds=1.5):
        deadline = time.monotonic() + 5
        while _scrape(sim.url)["sglang:realtime_tokens_total"] - \
                before["sglang:realtime_tokens_total"] < 1000:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        during = _scrape(sim.url)
    for name in ("sglang:spec_verify_calls_total", "sglang:generation_tokens_total",
                 "sglang:num_requests_total"):
        assert during[name] == before[name], name  # still, though a request has decoded
    _wait_all_finished(sim.url)  # the cut foreign request is aborted at the next poll
    body = {"text": "one of ours " * 9, "sampling_params": {"max_new_tokens": 50,
                                                            "ignore_eos": True}}
    start = _scrape(sim.url)
    meta = httpx.post(f"{sim.url}/generate", json=body).json()["meta_info"]
    end = _scrape(sim.url)
    assert end["sglang:realtime_tokens_total"] - start["sglang:realtime_tokens_total"] == \
        meta["prompt_tokens"] + 50 - 1  # the prompt, then every token after the first
    assert end["sglang:spec_verify_calls_total"] - start["sglang:spec_verify_calls_total"] == \
        meta["spec_verify_ct"]
    assert end["sglang:num_running_reqs"] == 0  # re-published at idle (0.5.19+)


def test_stale_gauges_of_an_older_release_are_told_by_the_still_progress_counter(
        start_sim, tmp_path: Path):
    # SGLang 0.5.14 re-published idle gauges only every 30 s: after a request they keep its
    # last decode-log window ("1 running") on an idle server.
    text = (resources.files("specperf.sim") / "profiles" / "kimi-k26-ddtree.toml").read_text(
        encoding="utf-8")
    profile = tmp_path / "old-gauges.toml"
    profile.write_text(text + '\n[switches]\ngauge_idle_refresh = "every-30s"\n',
                       encoding="utf-8")
    sim = start_sim(profile=str(profile), time_scale=SCALE)
    settings = resolve({"endpoint": sim.url, "contexts": "13", "output_tokens": "64",
                        "text_classes": "padding"}, {}, {})
    perf = PerfSession(settings, lock_mode="none")
    perf.start()
    try:
        # Long enough (>= 125 verify steps at 16 tokens a step) to end a decode-log window.
        body = {"text": "warm " * 9, "sampling_params": {"max_new_tokens": 2000,
                                                         "ignore_eos": True}}
        httpx.post(f"{sim.url}/generate", json=body).raise_for_status()
        assert _scrape(sim.url)["sglang:num_running_reqs"] == 1  # stale: nothing runs
        assert perf.measurer is not None
        perf.measurer.traffic.stale_s = 0.3
        sample = perf.measurer.sample(OURS, 0, warmup=False)
    finally:
        perf.close()
    assert "discarded_attempts" not in sample.raw
