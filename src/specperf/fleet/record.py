"""The record of a fleet run: one results document, one report, one closing block.

On the controller only (xdist workers send their reports to it), :class:`FleetCollector`
sorts each test report to its endpoint by the ``specperf_endpoint`` property the plugin
gives every fleet item, into one :class:`~specperf.views.summary.Collector` per endpoint, so each
endpoint's part is built exactly as a single-endpoint run's. :func:`document` nests those
parts under ``endpoints`` in one results document (record_schema.schema.json); ``page.py``
renders it; the closing block puts the same case on every box side by side.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest

from ..core.errors import StoreError
from ..core.version import __version__
from ..measure.session import git_revision
from ..plugin.reporting import ERROR_CHARS, custom_matrix, endpoint_document
from ..plugin.runstate import RunState
from ..record import files as record_files
from ..record import readers as record_readers
from ..record import results, runkind
from ..record import scrub as record_scrub
from ..settings.endpoints import Endpoint
from ..settings.reportdir import report_dir
from ..store import ingest
from ..store.engine import not_written
from ..views import summary
from . import page

FLEET_COLLECTOR = "specperf-fleet"
# An endpoint's run in the fleet, by its tests' outcomes (not a verdict: a box whose tests
# errored has no verdict at all). Worst first: error beats fail beats pass.
EndpointStatus = Literal["error", "fail", "not run", "pass", "skipped"]
_STATUS_ORDER: tuple[EndpointStatus, ...] = ("error", "fail", "not run", "pass", "skipped")


SKIP_CHARS = 240  # of a skip's reason on the fleet's closing lines (-rs prints it whole)


def _prop(report: pytest.TestReport, key: str) -> str | None:
    return next((str(v) for k, v in report.user_properties if k == key), None)


@dataclass
class EndpointRecord:
    """What the controller learnt about one endpoint from its workers' reports."""

    endpoint: Endpoint
    found: summary.Collector = field(default_factory=summary.Collector)
    errors: dict[str, str] = field(default_factory=dict)
    lock_wait_s: float | None = None
    lock_lines: list[str] = field(default_factory=list)
    measure_s: float = 0.0  # its tests' setup, call and teardown: the time its worker spent
    skips: dict[str, str] = field(default_factory=dict)  # test id: why it judged nothing

    def add(self, report: pytest.TestReport) -> None:
        self.found.pytest_runtest_logreport(report)
        self.measure_s += report.duration
        if report.failed and report.when != "call":
            self.errors[report.nodeid] = _error_text(report)
        if report.skipped and isinstance(report.longrepr, tuple):
            reason = str(report.longrepr[2]).removeprefix("Skipped: ")
            self.skips[report.nodeid.rsplit("::", 1)[-1]] = reason
        lock = _prop(report, "specperf_lock")
        if lock is not None:
            data = json.loads(lock)
            self.lock_wait_s = max(self.lock_wait_s or 0.0, float(data["waited_s"]))
            self.lock_lines += [line for line in data["lines"] if line not in self.lock_lines]

    def status(self) -> EndpointStatus:
        """error beats fail beats pass: a regression beside an outage cannot be trusted."""
        outcomes = set(self.found.perf_outcomes.values()) or {"not run"}
        named = {"failed": "fail", "passed": "pass"}
        found = {named.get(o, o) for o in outcomes}
        return next((s for s in _STATUS_ORDER if s in found), "not run")

    def skip_lines(self) -> list[str]:
        """Each skipped test and why (an undetermined verdict, a case without a baseline), so
        a box's '1 skipped' is not left unexplained; ``-rs`` prints each reason whole."""
        name = self.endpoint.name
        return [f"specperf fleet: {name}: {test} skipped: "
                f"{reason if len(reason) <= SKIP_CHARS else reason[:SKIP_CHARS] + '…'}"
                for test, reason in self.skips.items()]

    def counts(self) -> str:
        outcomes = list(self.found.perf_outcomes.values())
        kinds = ("passed", "failed", "error", "skipped", "not run")
        return ", ".join(f"{outcomes.count(k)} {k}" for k in kinds if outcomes.count(k)) \
            or "nothing ran"


class FleetCollector:
    """Sorts test reports to their endpoint and writes the fleet's record at session end."""

    def __init__(self, config: pytest.Config, endpoints: Sequence[Endpoint],
                 states: Mapping[str, RunState]) -> None:
        self.config = config
        self.states = states
        self.records = {ep.name: EndpointRecord(ep) for ep in endpoints}
        self.started = time.monotonic()
        self.run_id = results.new_run_id()
        self.written: Path | None = None
        self.problem = ""
        self.store_problem = ""
        self.backfilled: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        name = _prop(report, "specperf_endpoint")
        if name in self.records:
            self.records[name].add(report)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if hasattr(self.config, "workerinput") or self.config.option.collectonly:
            return  # workers send their reports to the controller, which writes once
        for item in getattr(session, "items", []):
            name = next((str(v) for k, v in item.user_properties if k == "specperf_endpoint"),
                        None)
            if name in self.records:
                self.records[name].found.perf_outcomes.setdefault(item.nodeid, "not run")
        if not any(r.found.perf_outcomes for r in self.records.values()):
            return
        interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
        doc = self.document(interrupted)
        try:
            base = next(iter(self.states.values())).settings
            where = report_dir(base.report_dir, self.config.invocation_params.dir)
            self.written, self.backfilled = write(doc, where)
        except OSError as exc:
            self.problem = f"{exc}; point --specperf-report-dir at a writable directory"
        except StoreError as exc:  # every file is written before the store (write): say so
            self.written = where / str(doc["run_id"]) / "report.html"
            self.store_problem = not_written(exc, self.written.with_name("results.json"))
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR

    def document(self, interrupted: bool) -> dict[str, Any]:
        """The fleet's results document: the whole run, and each endpoint's own part."""
        revision = git_revision(self.config.rootpath)
        parts = [self._part(r, revision, interrupted) for r in self.records.values()]
        waits = [r.lock_wait_s for r in self.records.values() if r.lock_wait_s is not None]
        first = next(iter(self.states.values()))
        run = results.RunInfo(run_id=self.run_id, created=results.utc_now(),
                              duration_s=time.monotonic() - self.started,
                              lock_wait_s=max(waits) if waits else None,
                              settings={**first.settings.public_dict(), "endpoint": None},
                              suite_version=__version__, git_revision=revision)
        names = [r.endpoint.name for r in self.records.values()]
        outcomes = {k: v for r in self.records.values() for k, v in r.found.outcomes.items()}
        errors = {k: v for r in self.records.values() for k, v in r.errors.items()}
        doc = results.build(run, server={"label": f"fleet of {len(names)}: {', '.join(names)}"},
                            measurements={}, verdicts=[], outcomes=outcomes,
                            errors=errors, baseline=None)
        doc["interrupted"] = interrupted
        doc["run"] = _run_kind(self.records.values(), first, interrupted)
        doc["endpoints"] = parts
        scrubbed: dict[str, Any] = record_scrub.scrub(doc, _secrets(self.states))
        return scrubbed

    def _part(self, record: EndpointRecord, revision: str, interrupted: bool) -> dict[str, Any]:
        state, found = self.states[record.endpoint.name], record.found
        run = results.RunInfo(run_id=f"{self.run_id}.{record.endpoint.name}",
                              created=results.utc_now(),
                              duration_s=time.monotonic() - self.started,
                              lock_wait_s=record.lock_wait_s,
                              settings=state.settings.public_dict(), suite_version=__version__,
                              git_revision=revision)
        doc = endpoint_document(run, state, found, record.errors, interrupted)
        found.record = doc  # the endpoint's closing block renders from its record
        return {**record.endpoint.to_dict(), "status": record.status(),
                "counts": record.counts(), "lock_wait_s": record.lock_wait_s,
                "measure_s": record.measure_s,
                "lock_lines": record.lock_lines, "document": doc}

    @pytest.hookimpl(trylast=True)  # after the closing block
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.config.option.collectonly:
            return
        for line in self.closing_lines():
            terminalreporter.write_line(line)
        if self.store_problem:
            terminalreporter.write_line(f"specperf: results store NOT written: "
                                        f"{self.store_problem}")
        if self.backfilled:
            terminalreporter.write_line(f"specperf: {ingest.missed_line(self.backfilled)}")
        if self.written is not None:
            terminalreporter.write_line(f"specperf: fleet report {self.written}")
        elif self.problem:
            terminalreporter.write_line(f"specperf: report NOT written: {self.problem}")

    def closing_lines(self) -> list[str]:
        """Per endpoint its own closing block, then the fleet's verdict and lock waits."""
        lines: list[str] = []
        for name, record in self.records.items():
            lines += ["", f"== endpoint {name} ({record.endpoint.url}, deployment "
                          f"{record.endpoint.deployment}) =="]
            if record.found.measurements:
                lines += summary.render(record.found, self.states[name].settings)[1:]
            for error in dict.fromkeys(record.errors.values()):
                lines.append(f"  error: {error.strip().splitlines()[-1]}")
        lines += ["", "specperf fleet: same case on each box (tok/s, step ms, avg commit):"]
        lines += cross_lines([(n, r.found.measurements) for n, r in self.records.items()],
                             [page.errored_cases(r.found.outcomes) for r in self.records.values()])
        lines.append(self.timing_line())
        for name, record in self.records.items():
            lines.append(f"specperf fleet: {name}: {record.status().upper()} "
                         f"({record.counts()})")
            lines += record.skip_lines()
            if record.lock_lines:
                lines.append(f"specperf fleet: {name} waited {record.lock_wait_s or 0:.1f} s "
                             f"for its GPU lock: {record.lock_lines[0]}")
        return lines


    def timing_line(self) -> str:
        """Wall time against each endpoint's own: parallel endpoints cost the slowest one."""
        wall = time.monotonic() - self.started
        each = ", ".join(f"{n} {r.measure_s:.1f} s" for n, r in self.records.items())
        return f"specperf fleet: run {wall:.1f} s wall; each endpoint's tests: {each}"


def _error_text(report: pytest.TestReport) -> str:
    """The error as the suite worded it, without the "[gw0] linux -- Python …" line xdist
    puts before a worker's report."""
    lines = report.longreprtext.splitlines()
    if lines and re.match(r"^\[gw\d+\] ", lines[0]):
        lines = lines[1:]
    return "\n".join(lines)[-ERROR_CHARS:]


def cross_lines(parts: Sequence[tuple[str, Mapping[str, Any]]],
                errored: Sequence[Collection[str]] = ()) -> list[str]:
    """One row per case, one column per endpoint: the same case side by side; a case that
    errored on a box (``errored``: per endpoint, its errored case ids) says so there."""
    failed = list(errored) or [()] * len(parts)
    cases = sorted({cid for _, m in parts for cid in m} | {c for e in failed for c in e},
                   key=lambda c: (c.split("-ctx")[0], int(c.rsplit("ctx", 1)[-1] or 0)
                                  if c.rsplit("ctx", 1)[-1].isdigit() else 0))
    width = max([len(c) for c in cases] + [4])
    head = f"{'case':<{width}} | " + " | ".join(f"{n:>22}" for n, _ in parts)
    lines = [head, "-" * len(head)]
    for cid in cases:
        cells = ["error" if m.get(cid) is None and cid in bad else _cell(m.get(cid))
                 for (_, m), bad in zip(parts, failed, strict=True)]
        lines.append(f"{cid:<{width}} | " + " | ".join(f"{c:>22}" for c in cells))
    return lines


def _cell(data: Mapping[str, Any] | None) -> str:
    if data is None:
        return "—"
    values = [record_readers.median(data, m) for m in ("tok_s", "step_ms", "avg_commit")]
    return " / ".join("n/a" if v is None else f"{v:.1f}" if i < 2 else f"{v:.2f}"
                      for i, v in enumerate(values))


def _run_kind(records: Any, state: RunState, interrupted: bool) -> dict[str, Any]:
    outcomes: dict[str, str] = {}
    smoke: set[str] = set()
    scaling: set[str] = set()
    measured = 0
    error_kinds: dict[str, list[str]] = {}
    for record in records:
        outcomes.update(record.found.perf_outcomes)
        error_kinds.update(record.found.error_kinds)
        smoke |= record.found.smoke
        scaling |= record.found.scaling_cases
        measured += len(record.found.measurements)
    return runkind.classify(ab=False, interrupted=interrupted, outcomes=outcomes, smoke=smoke,
                            scaling_cases=scaling, planned=[c.id for c in state.cases],
                            measured=measured, error_kinds=error_kinds,
                            custom=custom_matrix(state.settings)).to_dict()


def _secrets(states: Mapping[str, RunState]) -> list[str]:
    return [s.settings.api_key() or "" for s in states.values()]


def write(doc: dict[str, Any], directory: Path) -> tuple[Path, list[str]]:
    """``<dir>/<run-id>/results.json`` and report.html, and one history line per endpoint
    (each endpoint's figures are its own series; the line points at the fleet's file); the
    page and the earlier runs the store write brought in."""
    run_dir = directory / str(doc["run_id"])
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "results.json").write_text(
        json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    entries = [record_files.history_entry(part["document"], f"{doc['run_id']}/results.json")
               for part in doc["endpoints"]]
    lines = [json.dumps(e, sort_keys=True, ensure_ascii=False) for e in entries]
    with (directory / "history.jsonl").open("a", encoding="utf-8") as fh:
        fh.write("".join(line + "\n" for line in lines))
    out = run_dir / "report.html"
    out.write_text(page.render(doc), encoding="utf-8")
    # Last, each endpoint as its own run: a store that is down loses none of the files.
    return out, ingest.write_runs(
        [(e, part["document"]) for e, part in zip(entries, doc["endpoints"], strict=True)],
        directory)
