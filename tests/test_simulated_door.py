"""The simulator's door: only ``servers/simulated.py`` knows the simulator, by one header.

A recording proxy that forwards requests but not the simulator's header makes the simulator
look like the real server kind it imitates: the suite then asks nothing under ``/_sim/`` and
rescales no time, exactly as it treats a real SGLang or vLLM. (The real llama.cpp tier checks
the same through the same proxy against a real llama-server.)
"""

from __future__ import annotations

from typing import Any

import pytest

from inprocess import NO_HYPOTHESIS
from real.recorder import Recorder
from specperf.servers import simulated
from specperf.servers.client import Client
from specperf.servers.probe import ServerInfo, identify, probe
from specperf.sim import app as sim_app


def _probe(url: str) -> ServerInfo:
    client = Client(url, timeout_s=30)
    try:
        return probe(client, api="auto", model=None, wanted_source="auto", log_command=None,
                     simulated=False, endpoint_source="--endpoint")
    finally:
        client.close()


def test_the_header_is_spelled_the_same_on_both_sides_and_round_trips() -> None:
    assert sim_app.IDENTITY_HEADER == simulated.HEADER
    ident = simulated.parse_header(simulated.header_value("kimi-k26-ddtree", 0.05))
    assert ident == simulated.SimIdentity("kimi-k26-ddtree", 0.05)
    for junk in (None, "", "profile=x", "profile=x; time-scale=fast", "time-scale=0.1",
                 "profile=x; time-scale=-1"):
        assert simulated.parse_header(junk) is None


@pytest.mark.parametrize(("profile", "kind"), [("kimi-k26-ddtree", "sglang"),
                                                ("vllm-0.33", "vllm")])
def test_the_simulator_is_known_by_its_header_and_a_foreign_one_is_not_rescaled(
        request: pytest.FixtureRequest, start_sim: Any, profile: str, kind: str) -> None:
    # The default profile at 0.02 is the session's shared simulator; the probe only reads.
    sim = (request.getfixturevalue("sim_server") if profile == "kimi-k26-ddtree"
           else start_sim(profile=profile, time_scale=0.02))
    own = _probe(sim.url)
    assert (own.kind, own.simulated, own.time_scale) == (kind, True, 0.02)
    assert own.fingerprint["sim_profile"] == profile
    with Recorder(sim.url) as rec:  # forwards no header but content-type
        foreign = _probe(rec.url)
        named = identify(Client(rec.url, timeout_s=30), simulated=False,
                         endpoint_source="--endpoint")
    assert (foreign.kind, foreign.simulated, foreign.time_scale) == (kind, False, 1.0)
    assert "sim_profile" not in foreign.fingerprint and named["simulated"] is False
    asked = [e.path for e in rec.exchanges]
    assert asked and not [p for p in asked if p.startswith("/_sim/")], asked


def test_a_bad_profile_is_one_usage_sentence(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest_inprocess(*NO_HYPOTHESIS, "--specperf-sim-profile",
                                          "no-such-profile")
    result.stderr.fnmatch_lines(["*--specperf-sim-profile = 'no-such-profile' is not valid:*"])
    assert "Traceback" not in result.stderr.str()
