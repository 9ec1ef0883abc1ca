"""The gate's runner: the perf suite in a subprocess, and what its run left behind.

It runs ``python -m pytest <perf tests> -m smoke`` (the perf tests installed with the package,
``specperf/perf_tests``) in a subprocess, so its progress and closing table stream to the CI
log, forwarding SIGTERM so a cancelled job still releases the GPU lock. Then it reads each
case's outcome back from the run's record (``results.json``: its outcomes, errors and
verdicts, and why a run that measured nothing stopped) — the JUnit XML only for the order and
the words of each line, or for everything when the run died before writing its record — and
hands them to :func:`specperf.cli.decision.decide`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import replace
from importlib.resources import files
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from ..core.contract import REGRESSION, UNDETERMINED
from ..core.limits import SKIP_NOT_APPLICABLE, SKIP_PROPERTY
from ..views.headline import factor, headline, reason
from .decision import PYTEST_FAILED, PYTEST_OK, CaseOutcome, GateExit, GateResult, decide

SMOKE_MARKER = "smoke"


# -- reading the JUnit XML ---------------------------------------------------------------------
def read_junit(path: Path) -> list[CaseOutcome]:
    """Every test case of a run; ``ElementTree.ParseError``/``OSError`` if unreadable."""
    root = ElementTree.parse(path).getroot()
    return [_case(tc) for tc in root.iter("testcase")]


def _case(tc: ElementTree.Element) -> CaseOutcome:
    props = {p.get("name", ""): p.get("value", "") for p in tc.iter("property")}
    verdicts = [json.loads(p.get("value", "{}")) for p in tc.iter("property")
                if p.get("name") == "specperf_verdict"]
    # A path case's requests are all its paths' (its native measurement is one of them).
    requests, server_s = (_paths_cost(props["specperf_paths"]) if "specperf_paths" in props
                          else _cost(props.get("specperf_measurement")))
    endpoint = props.get("specperf_endpoint", "")
    case_id = _case_id(tc.get("name", ""), endpoint)
    found = _outcome(tc, case_id, verdicts, requests, server_s, endpoint)
    return replace(found, check=_check(tc.get("name", "")), line=_line(found, verdicts),
                   factors=_factors(verdicts),
                   not_applicable=found.outcome == "skipped"
                   and props.get(SKIP_PROPERTY) == SKIP_NOT_APPLICABLE)


def _check(name: str) -> str:
    """What a smoke test checks, by its test function (perf_tests/test_smoke.py and
    test_sweep.py): the sweep, a path against the native route, or a case."""
    test = name.split("[", 1)[0]
    if test.startswith("test_sweep"):
        return "sweep"
    return "path" if test.startswith("test_smoke_") else "case"


def _factors(verdicts: Sequence[dict[str, Any]]) -> tuple[str, ...]:
    """The factors its regressions name (views/headline.py's keys, from the record)."""
    return tuple(dict.fromkeys(factor(v) for v in verdicts
                               if v.get("status") == REGRESSION and factor(v)))


def _line(found: CaseOutcome, verdicts: Sequence[dict[str, Any]]) -> str:
    """The check's one line from its verdicts' figures: a failure's regressions, an
    undetermined check's intervals across the limit; empty otherwise (its message is used)."""
    if found.outcome == "failed":
        return "; ".join(headline(v) for v in verdicts if v.get("status") == REGRESSION)
    if found.undetermined:
        return "; ".join(reason(v) for v in verdicts if v.get("status") == UNDETERMINED)
    return ""


def _case_id(name: str, endpoint: str) -> str:
    """A test's line in the summary: its parameter (a fleet's endpoint prefix dropped), with
    what a ``test_smoke_*`` test checks (e.g. the parser case: "reasoning-ctx3333 parser")."""
    case_id = name[name.find("[") + 1:-1] if name.endswith("]") else name
    test = name.split("[", 1)[0]
    if test.startswith("test_smoke_"):
        case_id = f"{case_id} {test.removeprefix('test_smoke_').replace('_', ' ')}"
    if endpoint and case_id.startswith(f"{endpoint}-"):
        case_id = case_id[len(endpoint) + 1:]
    return case_id


def _outcome(tc: ElementTree.Element, case_id: str, verdicts: list[dict[str, Any]],
             requests: int, server_s: float, endpoint: str) -> CaseOutcome:
    for tag, outcome in (("error", "error"), ("failure", "failed"), ("skipped", "skipped")):
        element = tc.find(tag)
        if element is None:
            continue
        message = _message(element)
        unmeasured = [v["message"] for v in verdicts  # the reason (older records: the status)
                      if "unmeasured" in (v.get("reason"), v.get("status"))]
        if unmeasured:  # a figure that could not be measured: infrastructure, not the deploy
            return CaseOutcome(case_id, "error", "\n".join(unmeasured), requests, server_s,
                               endpoint)
        if outcome == "failed":
            failing = [v["message"] for v in verdicts if v.get("status") == REGRESSION]
            message = "\n".join(failing) or message
        # A skip whose verdict is undetermined is a statistical outcome, not a missing part.
        undecided = outcome == "skipped" and any(v.get("status") == UNDETERMINED
                                                 for v in verdicts)
        return CaseOutcome(case_id, outcome, message, requests, server_s, endpoint,
                           undetermined=undecided)
    return CaseOutcome(case_id, "passed", "", requests, server_s, endpoint)


def _message(element: ElementTree.Element) -> str:
    text = (element.text or "").strip()
    if element.tag == "skipped":
        # pytest writes "path:line: reason" as the text; the message attribute is the reason.
        return element.get("message", "") or text
    return text or element.get("message", "")


def _paths_cost(paths: str) -> tuple[int, float]:
    """Requests and server time of every path of a parser or streaming case."""
    total_n, total_s = 0, 0.0
    for path in json.loads(paths).get("paths", {}).values():
        n, secs = _cost(json.dumps(path.get("measurement", {})))
        total_n, total_s = total_n + n, total_s + secs
    return total_n, total_s


def _cost(measurement: str | None) -> tuple[int, float]:
    """Requests sent and server time (simulated time on the simulator) of one case."""
    if not measurement:
        return 0, 0.0
    samples: list[dict[str, Any]] = json.loads(measurement).get("samples", [])
    return len(samples), sum(float(s.get("wall_s", 0.0)) for s in samples)


# -- reading the record (results.json) --------------------------------------------------------
def read_record(path: Path, worded: Sequence[CaseOutcome] = ()) -> list[CaseOutcome]:
    """Every test of a run as its results document records it (a fleet: each endpoint's own
    document); ``OSError``/``ValueError`` if unreadable.

    The record decides each outcome; ``worded`` (the JUnit XML's reading, when there is one)
    gives each line its order, message and cost, and marks a comparison that could not be
    measured, which its verdict recorded.
    """
    doc = json.loads(path.read_text(encoding="utf-8"))
    parts = [(str(e["name"]), e["document"]) for e in doc.get("endpoints", ())] or [("", doc)]
    words = {(c.endpoint, c.case_id): c for c in worded}
    found = [_recorded(nodeid, outcome, endpoint, part, words)
             for endpoint, part in parts for nodeid, outcome in part["outcomes"].items()]
    order = {key: i for i, key in enumerate(words)}
    return sorted(found, key=lambda c: order.get((c.endpoint, c.case_id), len(order)))


def _recorded(nodeid: str, outcome: str, endpoint: str, part: dict[str, Any],
              words: dict[tuple[str, str], CaseOutcome]) -> CaseOutcome:
    case_id = _case_id(nodeid.rsplit("::", 1)[-1], endpoint)
    said = words.get((endpoint, case_id), CaseOutcome(case_id, outcome))
    if outcome == "not run":
        outcome, message = "error", "not run: the run stopped before this test ran."
    elif outcome == "error":
        message = str(part.get("errors", {}).get(nodeid, "")) or said.message
    elif said.outcome == "error":  # a verdict that could not be measured (read_junit)
        outcome, message = "error", said.message
    else:
        message = said.message
    stopped = (part.get("run") or {}).get("stopped_by")
    # A skip whose verdict was undetermined (read_junit read it from the verdict's status) stays
    # a statistical outcome: dropping the mark turned it into "not judged", exit 3.
    return CaseOutcome(case_id, outcome, message, said.requests, said.server_s, endpoint,
                       no_baseline=outcome == "error" and stopped == "no-baseline",
                       undetermined=outcome == "skipped" and said.undetermined,
                       not_applicable=outcome == "skipped" and said.not_applicable,
                       check=_check(nodeid.rsplit("::", 1)[-1]),
                       line=said.line if outcome == said.outcome else "",
                       factors=said.factors if outcome == said.outcome else ())


def _misdirected(record: Path, decided: GateResult, flag: str) -> GateResult | None:
    """A run stopped by its settings (the record's ``run.stopped_by`` is ``config-error``:
    the endpoint is no LLM server, or the options ask what the server cannot do) is the
    pipeline's call to fix: exit 2, not an outage. None for any other run, and for a fleet
    (each endpoint is decided alone there)."""
    doc = json.loads(record.read_text(encoding="utf-8"))
    run = doc.get("run") or {}
    if "endpoints" in doc or run.get("stopped_by") != "config-error":
        return None
    settings = doc.get("settings") or {}
    url = str(settings.get("endpoint") or "the endpoint")
    if settings.get("compare_endpoint"):  # A/B: the error above says which side
        reason = (f"{url} or {settings['compare_endpoint']} is not an LLM server specperf can "
                  "measure as asked (the error above says which, and why): fix the gate's "
                  "call, then run it again.")
    elif not doc.get("server"):  # the probe never recognised a server there
        reason = (f"{url} is not an LLM server specperf can measure (the error above says "
                  f"what answered): point {flag} at the SGLang, vLLM or llama.cpp server "
                  "itself, then run the gate again.")
    else:
        reason = (f"the gate's options ask for what the server at {url} cannot do (the error "
                  "above says what): fix the pytest arguments after --, then run the gate "
                  "again.")
    return GateResult(GateExit.USAGE, reason, decided.cases)


def simulated(record: Path | None) -> bool:
    """Whether the run's record says it measured a simulator (its times are simulated)."""
    if record is None:
        return False
    try:
        doc = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    parts = [e.get("document", {}) for e in doc.get("endpoints", ())] or [doc]
    return any(bool((p.get("server") or {}).get("simulated")) for p in parts)


def find_record(report_dir: Path, before: set[Path]) -> Path | None:
    """The results.json this gate's run wrote under ``report_dir`` (absent before it ran)."""
    new = [p for p in report_dir.glob("*/results.json") if p not in before]
    return max(new, key=lambda p: p.stat().st_mtime) if new else None


REPORT_DIR_FLAGS = ("--specperf-report-dir", "--report-dir")


def report_dir_of(pytest_args: Sequence[str]) -> Path:
    """Where the run writes its record: --specperf-report-dir (or its alias --report-dir),
    else SPECPERF_REPORT_DIR, else reports."""
    where = os.environ.get("SPECPERF_REPORT_DIR") or "reports"
    for i, arg in enumerate(pytest_args):
        flag, sep, value = arg.partition("=")
        if flag not in REPORT_DIR_FLAGS:
            continue
        if sep:
            where = value
        elif i + 1 < len(pytest_args):
            where = pytest_args[i + 1]
    return Path(where).resolve()


def result_of(pytest_exit: int, junit: Path, record: Path | None = None,
              flag: str = "--endpoint") -> GateResult:
    """Decide from the run's record; from the JUnit XML alone when it left none (its errors
    are then infrastructure: the XML keeps no error's kind, and words are not data).
    ``flag``: how the caller named the endpoint, for the sentence of a wrong URL."""
    if pytest_exit not in (PYTEST_OK, PYTEST_FAILED):
        return decide(pytest_exit, [])
    unreadable: Exception | None = None
    try:
        worded = read_junit(junit)
    except (OSError, ElementTree.ParseError) as exc:
        worded, unreadable = [], exc
    if record is not None:
        try:
            decided = decide(pytest_exit, read_record(record, worded))
            return _misdirected(record, decided, flag) or decided
        except (OSError, ValueError, KeyError, TypeError):
            pass  # a record cut short: the JUnit XML still tells the outcomes
    if unreadable is not None:
        return GateResult(GateExit.INFRASTRUCTURE,
                          f"the JUnit XML of the run could not be read ({unreadable}).")
    return decide(pytest_exit, worded)


# -- running -------------------------------------------------------------------------------
def perf_tests_dir(explicit: Path | None = None) -> Path | None:
    """The perf tests to run: --perf-tests DIR, else those installed with this package.

    The shipped ones (``specperf/perf_tests``) match the plugin that runs them, wherever the
    gate runs from; in a checkout (installed editable) they are the checkout's own.
    """
    tests = explicit if explicit is not None else Path(str(files("specperf") / "perf_tests"))
    return tests if tests.is_dir() else None


def pytest_command(tests: Path, junit: Path, flags: Sequence[str], pytest_args: Sequence[str],
                   marker: str = SMOKE_MARKER) -> list[str]:
    """``python -m pytest <tests> -m <marker>`` with the gate's flags, then the pass-through."""
    # The plugins by their pytest11 entry-point names: loaded once even when pytest also
    # autoloads them, and loaded still when PYTEST_DISABLE_PLUGIN_AUTOLOAD is set.
    cmd = [sys.executable, "-m", "pytest", str(tests), "-m", marker,
           "-p", "specperf", "-p", "specperf_fleet", "-p", "no:cacheprovider", *flags]
    extra = list(pytest_args)
    if extra[:1] == ["--"]:
        extra = extra[1:]
    # The gate reads this file, so its --junitxml comes last and wins.
    return cmd + extra + [f"--junitxml={junit}"]


def run_pytest(cmd: Sequence[str], log: Path | None = None) -> int:
    """Run the perf suite in a subprocess, its output streamed, or written to ``log`` (the
    gate prints its own answer once; ``-v`` streams pytest's); SIGTERM is forwarded, Ctrl-C
    waits for it."""
    if log is None:
        return _wait(subprocess.Popen(list(cmd)))
    # pytest's stderr (a usage error, a deprecation notice) still reaches the user's stderr,
    # after the run, and is kept at the end of the log too.
    errors = log.with_suffix(".err")
    with log.open("w", encoding="utf-8") as out, errors.open("w", encoding="utf-8") as err:
        code = _wait(subprocess.Popen(list(cmd), stdout=out, stderr=err))
    said = errors.read_text(encoding="utf-8", errors="replace")
    if said:
        sys.stderr.write(said)
        with log.open("a", encoding="utf-8") as out:
            out.write(said)
    return code


def _wait(proc: subprocess.Popen[bytes]) -> int:

    def forward(signum: int, _frame: object) -> None:
        # A cancelled CI job sends SIGTERM: pytest must release the GPU lock, not be orphaned.
        proc.send_signal(signum)

    previous = signal.signal(signal.SIGTERM, forward)
    try:
        while True:
            try:
                return proc.wait()
            except KeyboardInterrupt:
                continue  # Ctrl-C reached pytest too; wait for it to close its session
    finally:
        signal.signal(signal.SIGTERM, previous)
