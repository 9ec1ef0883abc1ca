"""The runner label the history, the store and the trend file a run under (issue 49).

The embedded simulator listens on a new port each run; a label with the port made every run
a new box on a dashboard. Its label names the profile instead, the same across runs; the
record keeps the URL (``server.url``). A simulator the user started keeps its URL's label.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from specperf.servers.client import Client
from specperf.servers.probe import ServerInfo, probe


def _probe(url: str, embedded: bool) -> ServerInfo:
    client = Client(url, timeout_s=30)
    try:
        # the session passes simulated=True for the simulator it started itself
        return probe(client, api="auto", model=None, wanted_source="auto", log_command=None,
                     simulated=embedded, endpoint_source="--endpoint")
    finally:
        client.close()


def test_the_embedded_simulators_label_is_the_same_on_every_port(sim_server: Any,
                                                                 start_sim: Any) -> None:
    other = start_sim(time_scale=0.02)
    assert other.url != sim_server.url  # two runs, two ports
    first, second = _probe(sim_server.url, True), _probe(other.url, True)
    assert first.label == second.label == "SIMULATED (embedded, profile kimi-k26-ddtree)"
    for info, sim in ((first, sim_server), (second, other)):
        doc = info.to_dict()
        assert (doc["label"], doc["url"], doc["embedded"]) == (first.label, sim.url, True)


def test_a_simulator_the_user_started_keeps_its_urls_label(sim_server: Any) -> None:
    info = _probe(sim_server.url, False)
    assert (info.simulated, info.embedded) == (True, False)
    assert info.label == f"SIMULATED ({sim_server.url})"


@pytest.mark.slow  # two (tiny) perf sessions, each with its own embedded simulator
def test_two_embedded_runs_are_one_box_in_the_history(perf_project: Any, tmp_path: Path) -> None:
    project = perf_project()
    reports = tmp_path / "reports"
    for _ in range(2):
        result = project.run("-m", "context_scaling", "--specperf-contexts", "13",
                             "--specperf-text-classes", "padding", "--baseline-dir",
                             str(tmp_path / "b"), env={"SPECPERF_REPORT_DIR": str(reports)})
        assert result.ret == 0, result.stdout.str()
    lines = [json.loads(x) for x in (reports / "history.jsonl").read_text().splitlines()]
    assert [e["label"] for e in lines] == ["SIMULATED (embedded, profile kimi-k26-ddtree)"] * 2
    urls = [json.loads((reports / e["results"]).read_text())["server"]["url"] for e in lines]
    assert len(set(urls)) == 2 and all(u.startswith("http://127.0.0.1:") for u in urls)
