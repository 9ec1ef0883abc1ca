"""A foreign request sent to a real llama-server (two slots) while a case is measured is
caught by the contamination guard: the server batches both requests, so nothing but the
guard would notice that the measured steps were shared."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from specperf.servers.acceptance import parse_metrics

from .helpers import run_suite

pytestmark = pytest.mark.real_server


class Intruder:
    """Sends one short request each time a measured request is running on the server, so it
    starts after the guard's check and finishes before the measured request does."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.sent = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _running(self, client: httpx.Client) -> float:
        return parse_metrics(client.get(self.url + "/metrics").text).running or 0.0

    def _run(self) -> None:
        body = {"prompt": "a foreign request", "n_predict": 8, "ignore_eos": True,
                "cache_prompt": False, "temperature": 0}
        with httpx.Client(timeout=60) as client:
            while not self.stop.is_set():
                if self._running(client) < 1:
                    time.sleep(0.005)
                    continue
                client.post(self.url + "/completion", json=body)
                self.sent += 1
                while self._running(client) >= 1 and not self.stop.is_set():
                    time.sleep(0.005)  # wait for the measured request to end

    def __enter__(self) -> Intruder:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=30)


def test_a_foreign_request_during_a_measured_one_is_caught(perf_project, llama_pool, tiny,
                                                         tmp_path):
    server = llama_pool.get(tiny.target, draft=tiny.draft, slots=2)
    with Intruder(server.url) as intruder:
        # one long case, so the foreign request always lands inside the measured one
        result = run_suite(perf_project(), server.url, tmp_path / "r", tmp_path / "b",
                           "--specperf-contexts=2000", "--specperf-text-classes=reasoning",
                           "--output-tokens=256", "-k", "ctx2000", "-rE")
    out = result.stdout.str()
    assert intruder.sent >= 4, out[-2000:]
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([
        "*ContaminatedMeasurement: reasoning-ctx2000: the generated-token counter moved by "
        "* not by our 256: foreign requests ran during the measurement; every one of 4 "
        "attempts was disturbed by other traffic on the server*"])
