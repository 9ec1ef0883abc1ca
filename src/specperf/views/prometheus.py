"""The run's outcome for Prometheus: rendered from the results document only, written for
node_exporter's textfile collector or pushed to a Pushgateway (``docs/dashboards.md``).

The only module that imports prometheus_client's registry and exposition (the simulator's
own metrics, ``sim/``, are a separate server). The decision is a number with the gate's
exit codes (``cli/decision.py``): 0 pass, 1 regression, 3 infrastructure, 4 undetermined,
decided here from the record: errors beat failures, as the gate's do, because a regression
measured beside a broken box cannot be trusted either.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Gauge,
    generate_latest,
    push_to_gateway,
    write_to_textfile,
)

from ..core.contract import NAMES, STATUSES
from ..core.errors import PublishError
from ..core.fingerprint import deployment_for
from ..record import readers
from .decision import FAIL_WORD, decide

JOB = "specperf"
PUSH_TIMEOUT_S = 10.0
# The decision's number and word: the gate's exit codes (cli/decision.py's GateExit).
DECISIONS = {"pass": 0, "regression": 1, "infrastructure": 3, "undetermined": 4}
# The case medians exported (the record's metric names), the quantities of docs/results.md.
MEDIANS = ("tok_s", "avg_commit", "step_ms", "ttft_ms")


def decision(doc: Mapping[str, Any]) -> str:
    """The run's decision in one word of :data:`DECISIONS`, from its record."""
    run = doc.get("run") or {}
    if doc.get("errors") or run.get("outage") or run.get("stopped_by") or \
            run.get("interrupted") or doc.get("interrupted"):
        return "infrastructure"
    word = decide(doc).word
    return "regression" if word == FAIL_WORD else word.lower()


def deployment(doc: Mapping[str, Any]) -> str:
    """The deployment the run measured: its baseline's, else the name its settings and
    server give (core/fingerprint.py), as every other reader of the record names it."""
    base = doc.get("baseline") or {}
    if base.get("deployment"):
        return str(base["deployment"])
    settings = doc.get("settings") or {}
    return deployment_for(settings.get("deployment"), str(settings.get("sim_profile") or "?"),
                          doc.get("server") or {})


def end_time(doc: Mapping[str, Any]) -> float:
    """When the run ended, in unix seconds: its record is created at the end of the run."""
    return datetime.fromisoformat(str(doc["created"]).replace("Z", "+00:00")).timestamp()


def registry(doc: Mapping[str, Any]) -> CollectorRegistry:
    """Every gauge of the run, labelled by its deployment, in a registry of its own."""
    reg = CollectorRegistry(auto_describe=True)
    dep = deployment(doc)
    _run_gauges(reg, doc, dep)
    _median_gauges(reg, doc, dep)
    _verdict_gauges(reg, doc, dep)
    _resolution_gauges(reg, doc, dep)
    return reg


def render(doc: Mapping[str, Any]) -> str:
    """The run's gauges as exposition text (what the textfile and the push carry)."""
    return generate_latest(registry(doc)).decode("utf-8")


def _gauge(reg: CollectorRegistry, name: str, doc: str, labels: tuple[str, ...]) -> Gauge:
    return Gauge(name, doc, ("deployment", *labels), registry=reg)


def _run_gauges(reg: CollectorRegistry, doc: Mapping[str, Any], dep: str) -> None:
    word = decision(doc)
    _gauge(reg, "specperf_decision", "The run's decision: 0 pass, 1 regression, "
           "3 infrastructure, 4 undetermined (the gate's exit codes).", ("decision",)
           ).labels(dep, word).set(DECISIONS[word])
    _gauge(reg, "specperf_run_end_timestamp_seconds", "When the run ended (unix seconds).",
           ()).labels(dep).set(end_time(doc))
    _gauge(reg, "specperf_run_duration_seconds", "How long the run took.", ()
           ).labels(dep).set(float(doc.get("duration_s") or 0.0))
    _gauge(reg, "specperf_errors", "Tests of the run that errored (infrastructure).", ()
           ).labels(dep).set(len(doc.get("errors") or {}))
    server = doc.get("server") or {}
    run = doc.get("run") or {}
    _gauge(reg, "specperf_run_info", "The run's identity (value 1).",
           ("run_id", "kind", "suite_version", "simulated")).labels(
        dep, str(doc.get("run_id", "")), str(run.get("kind", "")),
        str(doc.get("suite_version", "")), "true" if server.get("simulated") else "false"
    ).set(1)


def _median_gauges(reg: CollectorRegistry, doc: Mapping[str, Any], dep: str) -> None:
    gauge = _gauge(reg, "specperf_case_median", "A case's median of one metric this run "
                   "(tok_s tok/s, avg_commit tokens per verify step, step_ms and ttft_ms "
                   "milliseconds).", ("case", "metric"))
    for cid, measured in sorted((doc.get("measurements") or {}).items()):
        for metric in MEDIANS:
            value = readers.median(measured, metric)
            if value is not None:
                gauge.labels(dep, cid, metric).set(value)


def _verdict_gauges(reg: CollectorRegistry, doc: Mapping[str, Any], dep: str) -> None:
    verdicts: list[Mapping[str, Any]] = doc.get("verdicts") or []
    counts = _gauge(reg, "specperf_verdicts", "Verdicts of the run with this status.",
                    ("status",))
    for word in STATUSES:  # every word, zeros too: an alert's series always exists
        counts.labels(dep, NAMES[word]).set(
            sum(1 for v in verdicts if str(v.get("status")) == str(word)))
    one = _gauge(reg, "specperf_verdict", "One verdict of the run (value 1), its status "
                 "and the factor it names.", ("case", "status", "factor"))
    change = _gauge(reg, "specperf_verdict_change_ratio", "A verdict's relative change of "
                    "one metric against its baseline (-0.1 is 10% lower).",
                    ("case", "metric", "status", "factor"))
    limit = _gauge(reg, "specperf_verdict_limit_ratio", "The tolerance a verdict's metric "
                   "was judged against, signed in its bad direction.",
                   ("case", "metric", "status", "factor"))
    for v in verdicts:
        labels = (dep, str(v.get("case_id", "")))
        status = NAMES.get(str(v.get("status", "")), str(v.get("status", "")))
        factor = str(v.get("factor") or "")
        one.labels(*labels, status, factor).set(1)
        for metric, detail in sorted((v.get("details") or {}).items()):
            for gauge, key in ((change, "change"), (limit, "limit")):
                if isinstance(detail.get(key), (int, float)):
                    gauge.labels(*labels, metric, status, factor).set(float(detail[key]))


def _resolution_gauges(reg: CollectorRegistry, doc: Mapping[str, Any], dep: str) -> None:
    resolution = doc.get("resolution")
    if not resolution:
        return
    gauge = _gauge(reg, "specperf_resolution_ratio", "The smallest change of a factor this "
                   "run could see (at its stated power).", ("factor",))
    for factor, value in sorted((resolution.get("factors") or {}).items()):
        if isinstance(value, (int, float)):
            gauge.labels(dep, factor).set(float(value))
    _gauge(reg, "specperf_resolution_power", "The power the resolution is stated at.", ()
           ).labels(dep).set(float(resolution.get("power", 0.95)))


def write_textfile(doc: Mapping[str, Any], path: Path) -> None:
    """The run's gauges to ``path``, atomically (a temporary file renamed over it), as
    node_exporter's textfile collector reads them."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_to_textfile(str(path), registry(doc))
    except OSError as exc:
        raise PublishError(f"the Prometheus textfile {path} could not be written ({exc}); "
                           "point --specperf-prometheus-textfile at a writable file, e.g. "
                           "node_exporter's --collector.textfile.directory") from exc


def push(doc: Mapping[str, Any], url: str) -> str:
    """Push the run's gauges to the Pushgateway at ``url`` (job specperf, grouped by
    deployment, replacing that group's last push); returns the deployment pushed."""
    dep = deployment(doc)
    try:
        push_to_gateway(url, job=JOB, registry=registry(doc),
                        grouping_key={"deployment": dep}, timeout=PUSH_TIMEOUT_S)
    except (OSError, ValueError) as exc:  # urllib's URLError and HTTPError are OSErrors
        raise PublishError(f"the Pushgateway {url} did not take the run's metrics ({exc}); "
                           "results.json and report.html were written: check that "
                           f"`curl {url}/metrics` answers, or drop --specperf-pushgateway") \
            from exc
    return dep
