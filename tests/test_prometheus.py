"""The run's outcome for Prometheus: rendered from the record, written as a textfile, pushed.

The push goes to a tiny recording HTTP server on loopback (what a Pushgateway receives);
the textfile is parsed back with prometheus_client's own parser.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from loopback import serving
from specperf.core.errors import PublishError
from specperf.record import readers
from specperf.views import prometheus
from test_report import make_doc


def samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Every sample of the exposition text, by metric name: (labels, value)."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((dict(s.labels), s.value))
    return out


def regressed() -> dict[str, Any]:
    """A record whose four cases regressed in acceptance, as results.json holds it."""
    doc: dict[str, Any] = json.loads(json.dumps(make_doc(commit=5.0)))
    return doc


def test_the_textfile_carries_the_decision_end_time_medians_and_verdicts(tmp_path):
    doc = regressed()
    path = tmp_path / "collector" / "specperf.prom"
    prometheus.write_textfile(doc, path)
    found = samples(path.read_text())
    assert found["specperf_decision"] == [({"deployment": "dep", "decision": "regression"}, 1)]
    ended = datetime.fromisoformat(doc["created"].replace("Z", "+00:00")).timestamp()
    assert found["specperf_run_end_timestamp_seconds"] == [({"deployment": "dep"}, ended)]
    medians = {(lab["case"], lab["metric"]): v for lab, v in found["specperf_case_median"]}
    expected = {(cid, m): readers.median(measured, m)
                for cid, measured in doc["measurements"].items() for m in prometheus.MEDIANS}
    assert medians == expected and len(medians) == 16
    counts = {lab["status"]: v for lab, v in found["specperf_verdicts"]}
    assert counts == {"pass": 0, "noted": 0, "regression": 4, "improved": 0,
                      "undetermined": 0}
    changes = {(lab["case"], lab["metric"]): (lab["status"], v)
               for lab, v in found["specperf_verdict_change_ratio"]}
    for verdict in doc["verdicts"]:
        status, change = changes[(verdict["case_id"], "avg_commit")]
        assert status == "regression"
        assert change == pytest.approx(verdict["details"]["avg_commit"]["change"])
    assert not list(tmp_path.glob("collector/*.prom.*"))  # the temporary file was renamed


def test_errors_beat_the_regression_and_a_clean_record_passes():
    broken = json.loads(json.dumps(make_doc(commit=5.0, errors={"t::b": "refused"})))
    assert prometheus.decision(broken) == "infrastructure"
    found = samples(prometheus.render(broken))
    assert found["specperf_decision"] == [({"deployment": "dep",
                                            "decision": "infrastructure"}, 3)]
    assert found["specperf_errors"] == [({"deployment": "dep"}, 1)]
    clean = json.loads(json.dumps(make_doc()))
    assert prometheus.decision(clean) == "pass"
    assert samples(prometheus.render(clean))["specperf_decision"][0][1] == 0


def test_the_resolution_is_a_gauge_per_factor_when_the_record_has_one():
    doc = regressed()
    doc["resolution"] = {"factors": {"tok_s": -0.054, "step_ms": 0.067}, "power": 0.95}
    found = samples(prometheus.render(doc))
    assert sorted((lab["factor"], v) for lab, v in found["specperf_resolution_ratio"]) == [
        ("step_ms", 0.067), ("tok_s", -0.054)]
    assert found["specperf_resolution_power"] == [({"deployment": "dep"}, 0.95)]
    assert "specperf_resolution_ratio" not in samples(prometheus.render(regressed()))


class Recorder(BaseHTTPRequestHandler):
    """What a Pushgateway receives: each request's method, path and body."""

    received: list[tuple[str, str, str]] = []

    def _record(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.received.append((self.command, self.path, body.decode()))
        self.send_response(200)
        self.end_headers()

    do_PUT = do_POST = _record

    def log_message(self, *args: Any) -> None:  # keep the test's output clean
        pass


@pytest.fixture
def gateway() -> Iterator[tuple[str, list[tuple[str, str, str]]]]:
    """A recording server on a free loopback port: its URL and what it received."""
    received: list[tuple[str, str, str]] = []
    with serving(type("Handler", (Recorder,), {"received": received})) as url:
        yield url, received


def test_the_push_replaces_the_deployments_group_of_job_specperf(gateway):
    url, received = gateway
    doc = regressed()
    assert prometheus.push(doc, url) == "dep"
    ((method, path, body),) = received
    assert (method, path) == ("PUT", "/metrics/job/specperf/deployment/dep")
    assert samples(body) == samples(prometheus.render(doc))
    assert samples(body)["specperf_decision"][0][1] == 1


def test_a_pushgateway_that_is_down_is_one_sentence_naming_it(gateway):
    url, _ = gateway
    dead = url.rsplit(":", 1)[0] + ":9"  # the discard port: nothing listens on loopback
    with pytest.raises(PublishError) as caught:
        prometheus.push(regressed(), dead)
    message = str(caught.value)
    assert message.startswith(f"the Pushgateway {dead} did not take the run's metrics (")
    assert message.endswith("); results.json and report.html were written: check that "
                            f"`curl {dead}/metrics` answers, or drop --specperf-pushgateway")


def test_a_textfile_that_cannot_be_written_names_the_option(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(PublishError) as caught:
        prometheus.write_textfile(regressed(), blocker / "specperf.prom")
    assert str(caught.value).startswith(f"the Prometheus textfile {blocker / 'specperf.prom'} "
                                        "could not be written (")
    assert "point --specperf-prometheus-textfile at a writable file" in str(caught.value)



def test_a_fleet_asked_for_prometheus_outputs_is_one_usage_error(pytester):
    pytester.makefile(".toml", fleet='[[endpoint]]\nname = "a"\nurl = "http://127.0.0.1:1"\n'
                      '[[endpoint]]\nname = "b"\nurl = "http://127.0.0.1:2"\n')
    result = pytester.runpytest_inprocess("--specperf-endpoints=fleet.toml",
                                          "--specperf-prometheus-textfile=x.prom")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: --specperf-prometheus-textfile cannot be combined with a fleet "
        "(--specperf-endpoints) yet: run each endpoint alone with --specperf-endpoint to "
        "publish its metrics."])
