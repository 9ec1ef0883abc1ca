"""The report's pytest side: at the end of a perf run, build the run's record and write it.

On the controller only (never on an xdist worker) and only when the run set out to measure
something, :class:`ReportPlugin` builds the results document (:mod:`specperf.record.results`) from
what every worker reported (:mod:`specperf.views.summary`'s collector), hands it to the terminal
summary, and writes results.json, the history line and report.html (:func:`write_report`).
When pytest-html is active (``--html``), its results table gains tok/s, step ms, avg commit
and Δ columns, its summary names our report, and each case carries its samples and raw JSON
as extras. This is the only module that imports pytest_html.
"""

from __future__ import annotations

import json
import time
from collections.abc import Generator, Mapping
from pathlib import Path
from typing import Any, Protocol

import pytest
from pytest_html import extras as html_extras

from ..baselines import shipped
from ..baselines.store import Baseline
from ..core.contract import REGRESSION
from ..core.errors import SpecperfError, StoreError
from ..core.version import __version__
from ..measure.session import git_revision
from ..record import files as record_files
from ..record import persistence, results, runkind
from ..record import readers as record_readers
from ..record import scrub as record_scrub
from ..settings.config import Settings
from ..settings.reportdir import report_dir
from ..store.engine import not_written
from ..store.history import history_despite_store
from ..store.ingest import missed_line
from ..views import extras, page, summary
from . import burstfixtures, publish
from .fixtures import STATE
from .runstate import RunState

ERROR_CHARS = 2000


class ReportPlugin:
    """Writes the run's report at session end; see the module docstring."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.started = time.monotonic()
        self.run_id = results.new_run_id()
        self.errors: dict[str, str] = {}
        self.written: Path | None = None
        self.problem = ""
        self.store_problem = ""
        self.backfilled: list[str] = []
        self.interrupted = False
        self.kind = ""
        self.published = publish.Published()
        if config.pluginmanager.hasplugin("html"):
            config.pluginmanager.register(HtmlHooks(self), "specperf-report-html")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed and report.when != "call":
            self.errors[report.nodeid] = report.longreprtext[-ERROR_CHARS:]

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]
                                  ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        # The error's class travels with the report (also from an xdist worker): the run's
        # kind says a lock timeout or a missing baseline, not an outage (record/runkind.py).
        if call.excinfo is not None and isinstance(call.excinfo.value, SpecperfError):
            names = [c.__name__ for c in type(call.excinfo.value).__mro__
                     if issubclass(c, SpecperfError)]
            report.user_properties.append(("specperf_error", json.dumps(names)))
        return report

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if hasattr(self.config, "workerinput"):
            return  # workers send their reports to the controller, which writes once
        if self.config.option.collectonly:
            return  # nothing was measured or attempted: no run to record
        found = summary.collected(self.config)
        # An interrupted run keeps what it measured and says what it never reached.
        for item in getattr(session, "items", []):
            found.outcomes.setdefault(item.nodeid, "not run")
            case = next((v for k, v in item.user_properties if k == "specperf_case"), None)
            if case is not None:  # the run's kind is what it set out to do
                found.perf_outcomes.setdefault(item.nodeid, "not run")
                if item.get_closest_marker("context_scaling") is not None:
                    found.scaling_cases.add(str(case))
                if item.get_closest_marker("smoke") is not None:
                    found.smoke.add(item.nodeid)
                if item.get_closest_marker("concurrency_scaling") is not None:
                    found.concurrency_tests.add(item.nodeid)
        self.interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
        state = self.config.stash.get(STATE, None)
        if state is None:
            return
        # This process's samples of a case it was measuring when stopped (no report carries
        # them) and of cases that errored; a worker's came in its reports.
        for cid, data in state.partials.items():
            found.partials.setdefault(cid, data)
        # Every perf run that attempted something leaves a record, also when nothing could
        # be measured (an outage); one that attempted nothing (all "not run") leaves none.
        attempted = any(o != "not run" for o in found.perf_outcomes.values())
        if not (found.measurements or found.partials or attempted):
            return
        doc = self.document(state, found)
        found.record = doc  # the terminal summary renders from it too
        self.kind = str(doc["run"]["label"])
        try:
            where = report_dir(state.settings.report_dir, self.config.invocation_params.dir)
            self.written, self.backfilled = write_report(doc, where)
        except OSError as exc:
            self.problem = f"{exc}; point --report-dir at a writable directory"
        except StoreError as exc:  # every file is written (write_report): say so
            self.written = where / str(doc["run_id"]) / "report.html"
            self.store_problem = not_written(exc, _shown(self.written.with_name("results.json")))
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
        # The dashboards' outputs (docs/dashboards.md): one that fails is infrastructure,
        # exit 3 as a store that is down, so a nightly nobody can see never passes quietly.
        self.published = publish.publish(doc, state.settings, self.written)
        if self.published.problems:
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR

    def document(self, state: RunState, found: summary.Collector) -> dict[str, Any]:
        """The results document of this run, secrets scrubbed."""
        session = state.session
        run = results.RunInfo(
            run_id=self.run_id, created=results.utc_now(),
            duration_s=time.monotonic() - self.started,
            lock_wait_s=session.lock_wait_s if session is not None else None,
            settings=state.settings.public_dict(), suite_version=__version__,
            git_revision=git_revision(self.config.rootpath))
        doc = endpoint_document(run, state, found, self.errors, self.interrupted)
        scrubbed: dict[str, Any] = record_scrub.scrub(doc, [state.settings.api_key() or ""])
        return scrubbed

    @pytest.hookimpl(trylast=True)  # after the closing table
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.store_problem:
            terminalreporter.write_line(f"specperf: results store NOT written: "
                                        f"{self.store_problem}")
        if self.backfilled:
            terminalreporter.write_line(f"specperf: {missed_line(self.backfilled)}")
        if self.written is not None:
            terminalreporter.write_line(f"specperf: report {_shown(self.written)} (this run: "
                                        f"{self.kind})")
        elif self.problem:
            terminalreporter.write_line(f"specperf: report NOT written: {self.problem}")
        for line in self.published.lines:
            terminalreporter.write_line(f"specperf: {line}")
        for problem in self.published.problems:
            terminalreporter.write_line(f"specperf: NOT published: {problem}")
        for annotation in self.published.annotations:  # GitHub reads them from stdout
            terminalreporter.write_line(annotation)


def endpoint_document(run: results.RunInfo, state: RunState, found: summary.Collector,
                      errors: Mapping[str, str], interrupted: bool) -> dict[str, Any]:
    """One endpoint's results document (not yet scrubbed): the single run's record, and
    each endpoint's part of a fleet's, built the same way."""
    kind = runkind.classify(
        ab=state.settings.compare_endpoint is not None, interrupted=interrupted,
        outcomes=found.perf_outcomes, smoke=found.smoke, scaling_cases=found.scaling_cases,
        planned=[c.id for c in state.cases],
        measured=len(found.measurements) + len(found.concurrency),
        error_kinds=found.error_kinds, custom=custom_matrix(state.settings),
        concurrency=found.concurrency_tests,
        concurrency_scope=burstfixtures.scope(state.settings, found.concurrency))
    # A run of the concurrency tests alone compared nothing with the main baseline.
    only_levels = kind.kind == "concurrency" and not found.measurements
    doc = results.build(
        run, server=found.server, measurements=found.measurements, verdicts=found.verdicts,
        outcomes=found.outcomes, errors=dict(errors),
        baseline=None if only_levels else judged_baseline(state, found.server),
        paths=found.paths, partial=found.partials, concurrency=found.concurrency,
        concurrency_baseline=found.concurrency_baseline if found.concurrency else None,
        not_judged=found.skipped)
    doc["interrupted"] = interrupted
    doc["run"] = kind.to_dict()
    doc["persists"] = _streak(state.settings, doc)
    if doc["baseline"] is not None:  # which directory it came from (the closing block says)
        where = shipped.directory(state.settings, doc["baseline"]["deployment"])
        doc["baseline"]["directory"] = str(where.resolve())
        doc["baseline"]["shipped"] = shipped.is_reference(where)
    return doc


def _streak(settings: Settings, doc: Mapping[str, Any]) -> dict[str, Any] | None:
    """How many nights tonight's regression has failed the same way (record/persistence.py),
    from this box's history; None when it is new, or no history can be read."""
    if not any(v.get("status") == REGRESSION for v in doc.get("verdicts") or ()):
        return None
    server = doc.get("server") or {}
    try:  # a store that is down: the file's runs (its problem is reported with the write)
        entries, _ = history_despite_store(settings.report_dir / "history.jsonl",
                                           settings.results_db)
    except (SpecperfError, OSError):
        return None
    simulated = bool(server.get("simulated"))
    mine = [e for e in entries if bool(e.get("simulated")) == simulated
            and (simulated or e.get("label") == server.get("label"))]
    return persistence.streak(doc, mine, settings.night_window)


def custom_matrix(settings: Settings) -> str:
    """The run's planned matrix in words when it is not the default one (runkind.py)."""
    default = Settings()
    return runkind.custom_matrix(settings.contexts, default.contexts,
                                 settings.text_classes, default.text_classes)


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def judged_baseline(state: RunState, server: Mapping[str, Any]) -> Baseline | None:
    """The baseline the run was judged against (the state's; under xdist the controller's
    state names it from the server its workers reported)."""
    try:
        return state.reported_baseline(server)
    except SpecperfError:
        return None  # the cases already errored with the reason


# -- pytest-html --------------------------------------------------------------------------------
def _properties(report: pytest.TestReport) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The case's measurement and its verdict, from the report's user properties."""
    measured = verdict = None
    for key, value in report.user_properties:
        if key == "specperf_measurement":
            measured = json.loads(str(value))
        elif key == "specperf_verdict":
            verdict = json.loads(str(value))
    return measured, verdict


class Written(Protocol):
    """Whatever wrote the run's report: a single endpoint's ReportPlugin or a fleet's."""

    written: Path | None


class HtmlHooks:
    """pytest-html's public hooks; registered only when pytest-html is loaded."""

    COLUMNS = ("tok/s", "step ms", "avg commit", "Δ tok/s vs baseline")

    def __init__(self, owner: Written) -> None:
        self.owner = owner

    def pytest_html_results_table_header(self, cells: list[str]) -> None:
        cells[2:2] = extras.header_cells(self.COLUMNS)

    def pytest_html_results_table_row(self, report: pytest.TestReport, cells: list[str]) -> None:
        measured, verdict = _properties(report)
        values = ["", "", "", ""]
        if measured is not None:
            values[:3] = [_fmt(record_readers.median(measured, m), f) for m, f in
                          (("tok_s", ".1f"), ("step_ms", ".1f"), ("avg_commit", ".2f"))]
        change = ((verdict or {}).get("details") or {}).get("tok_s", {}).get("change")
        if change is not None:
            values[3] = f"{100 * change:+.1f}%"
        cells[2:2] = extras.row_cells(values)

    def pytest_html_results_summary(self, prefix: list[str], summary: list[str],
                                    postfix: list[str], session: pytest.Session) -> None:
        if self.owner.written is not None:
            prefix.append(extras.report_link(self.owner.written))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]
                                  ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        measured, _ = _properties(report)
        if report.when == "call" and measured is not None:
            state = item.config.stash.get(STATE, None)
            key = state.settings.api_key() if state is not None else None
            clean = record_scrub.scrub(measured, [key or ""])
            cid = clean["case"]["id"]
            report.extras = [*getattr(report, "extras", []),  # type: ignore[attr-defined]
                             html_extras.html(extras.samples(cid, clean)),
                             # pytest-html encodes the object itself (a str: twice).
                             html_extras.json(clean, name=f"{cid} raw JSON")]
        return report


def _fmt(value: float | None, spec: str) -> str:
    return "" if value is None else format(value, spec)


def write_report(doc: dict[str, Any], directory: Path) -> tuple[Path, list[str]]:
    """results.json, the history line, the results store and report.html of one run; returns
    the page's path and the earlier runs the store write brought in. A store that is down
    (StoreError) is raised after the page is written: it loses no file."""
    out = directory / str(doc["run_id"]) / "report.html"
    try:
        _, missed = record_files.write(doc, directory)
    except StoreError:
        out.write_text(page.render(doc), encoding="utf-8")
        raise
    out.write_text(page.render(doc), encoding="utf-8")
    return out, missed
