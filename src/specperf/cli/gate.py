"""The deploy gate: ``specperf gate`` runs the smoke subset against an endpoint and says yes or no.

It runs the very same perf suite, ``pytest perf_tests -m smoke`` (the perf tests installed
with the package, ``specperf/perf_tests``), in a subprocess (so its progress and closing
table stream to the CI log), reads each case's outcome back from the run's record
(``results.json``: its outcomes, errors and verdicts, and why a run that measured nothing
stopped) — the JUnit XML only for the order and the words of each line, or for everything
when the run died before writing its record — prints one attributed line per case and exits
with:

====  ==============  ====================================================================
code  meaning         when
====  ==============  ====================================================================
0     pass            every smoke case was judged against its baseline and none regressed
1     regression      a case failed its baseline and none errored: block the deploy
2     usage error     a bad flag or option value (argparse, or pytest's usage error)
3     infrastructure  any case errored (unreachable, timeout, GPU lock, unstable, corrupt
                      baseline), a case had no baseline, nothing was collected, or pytest
                      itself crashed or was interrupted: page someone, don't blame the deploy
====  ==============  ====================================================================

Errors beat failures: when the box or the endpoint misbehaved, a regression measured beside
it cannot be trusted either. Over a fleet (``--endpoints FILE``) each endpoint's cases are
decided alone, exactly so, and the gate exits with the worst endpoint's code, naming it.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import IntEnum
from importlib.resources import files
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from ..core.limits import NOT_APPLICABLE

SMOKE_MARKER = "smoke"
# pytest's own exit codes (pytest.ExitCode), spelled out so this module never imports pytest.
_PYTEST_OK, _PYTEST_FAILED, _PYTEST_INTERRUPTED = 0, 1, 2
_PYTEST_INTERNAL, _PYTEST_USAGE, _PYTEST_NO_TESTS = 3, 4, 5


class GateExit(IntEnum):
    """The gate's exit codes (see the module docstring)."""

    PASS = 0
    REGRESSION = 1
    USAGE = 2
    INFRASTRUCTURE = 3




@dataclass(frozen=True)
class CaseOutcome:
    """One smoke case as the JUnit XML tells it: passed, failed, error or skipped."""

    case_id: str
    outcome: str
    message: str = ""
    requests: int = 0
    server_s: float = 0.0
    endpoint: str = ""  # a fleet's endpoint name (fleet.py); empty for one endpoint
    # The error is the missing (or unreadable) baseline --require-baseline checks before any
    # request: from the record's run.stopped_by, never from the message's words.
    no_baseline: bool = False


@dataclass(frozen=True)
class GateResult:
    """The gate's decision: the exit code, the sentence behind it, and each case."""

    code: GateExit
    reason: str
    cases: tuple[CaseOutcome, ...] = field(default_factory=tuple)


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
    outcome = _outcome(tc, case_id, verdicts, requests, server_s, endpoint)
    if outcome.outcome == "error" and _no_baseline(outcome.message):
        return replace(outcome, no_baseline=True)
    return outcome


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
        unmeasured = [v["message"] for v in verdicts if v.get("status") == "unmeasured"]
        if unmeasured:  # a figure that could not be measured: infrastructure, not the deploy
            return CaseOutcome(case_id, "error", "\n".join(unmeasured), requests, server_s,
                               endpoint)
        if outcome == "failed":
            failing = [v["message"] for v in verdicts if v.get("status") == "fail"]
            message = "\n".join(failing) or message
        return CaseOutcome(case_id, outcome, message, requests, server_s, endpoint)
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
    return CaseOutcome(case_id, outcome, message, said.requests, said.server_s, endpoint,
                       no_baseline=outcome == "error" and stopped == "no-baseline")


def find_record(report_dir: Path, before: set[Path]) -> Path | None:
    """The results.json this gate's run wrote under ``report_dir`` (absent before it ran)."""
    new = [p for p in report_dir.glob("*/results.json") if p not in before]
    return max(new, key=lambda p: p.stat().st_mtime) if new else None


def report_dir_of(pytest_args: Sequence[str]) -> Path:
    """Where the run writes its record: --report-dir, else SPECPERF_REPORT_DIR, else reports."""
    where = os.environ.get("SPECPERF_REPORT_DIR") or "reports"
    for i, arg in enumerate(pytest_args):
        if arg == "--report-dir" and i + 1 < len(pytest_args):
            where = pytest_args[i + 1]
        elif arg.startswith("--report-dir="):
            where = arg.split("=", 1)[1]
    return Path(where).resolve()


# -- deciding ------------------------------------------------------------------------------
def decide(pytest_exit: int, cases: Sequence[CaseOutcome]) -> GateResult:
    """Map pytest's exit code and the case outcomes to the gate's exit code and reason."""
    found = tuple(cases)
    early = _from_pytest_exit(pytest_exit, found)
    if early is not None:
        return early
    errors = [c for c in found if c.outcome == "error"]
    failures = [c for c in found if c.outcome == "failed"]
    # "not applicable" skips (e.g. parser cases on a server without parsers) judge nothing
    # that exists; any other skip (no baseline) leaves the gate unable to vouch.
    skipped = [c for c in found if c.outcome == "skipped"
               and not c.message.startswith(NOT_APPLICABLE)]
    n = len(found)
    if errors and all(c.no_baseline for c in errors):
        return GateResult(GateExit.INFRASTRUCTURE,
                          f"{len(errors)} of {n} smoke cases have no baseline to be judged "
                          "against (checked before any request): write one with the command "
                          "above, then run the gate again.", found)
    if errors:
        also = f" ({len(failures)} regression(s) beside them cannot be trusted)" if failures else ""
        return GateResult(GateExit.INFRASTRUCTURE,
                          f"{len(errors)} of {n} smoke cases could not be measured{also}: "
                          "an infrastructure problem, not the deploy's fault; page the owner "
                          "of the box.", found)
    if failures:
        return GateResult(GateExit.REGRESSION,
                          f"{len(failures)} of {n} smoke cases regressed: block the deploy.",
                          found)
    if pytest_exit == _PYTEST_FAILED:
        return GateResult(GateExit.INFRASTRUCTURE,
                          "pytest reported a failure the JUnit XML does not show (an error "
                          "outside the smoke cases?): see its output above.", found)
    if skipped:
        return GateResult(GateExit.INFRASTRUCTURE,
                          f"{len(skipped)} of {n} smoke cases were not judged (see the reasons "
                          "above): the gate cannot say the deploy is good.", found)
    return GateResult(GateExit.PASS, f"all {n} smoke cases within their limits.", found)


def _no_baseline(message: str) -> bool:
    """Only for a run that left no record: the JUnit XML keeps no error's kind but its words."""
    return message.startswith("BaselineError: --require-baseline:")


def _from_pytest_exit(code: int, cases: tuple[CaseOutcome, ...]) -> GateResult | None:
    if code == _PYTEST_USAGE:
        return GateResult(GateExit.USAGE, "pytest rejected the options (see its message above).")
    if code == _PYTEST_NO_TESTS or (code == _PYTEST_OK and not cases):
        return GateResult(GateExit.INFRASTRUCTURE,
                          "no smoke case was collected: check the perf_tests directory and -m.")
    if code in (_PYTEST_OK, _PYTEST_FAILED):
        return None
    what = {_PYTEST_INTERRUPTED: "was interrupted or could not collect the perf tests",
            _PYTEST_INTERNAL: "hit an internal error"}.get(code, f"stopped with exit code {code}")
    return GateResult(GateExit.INFRASTRUCTURE, f"pytest {what}: nothing can be concluded.",
                      cases)


# -- printing ------------------------------------------------------------------------------
_LABELS = {"passed": "pass", "failed": "FAIL", "error": "ERROR", "skipped": "SKIP"}
_VERDICTS = {GateExit.PASS: "PASS", GateExit.REGRESSION: "REGRESSION",
             GateExit.USAGE: "USAGE ERROR", GateExit.INFRASTRUCTURE: "INFRASTRUCTURE PROBLEM"}


def summary_lines(result: GateResult, endpoint: str) -> list[str]:
    """The attributed summary: one line per case, then the decision with its exit code."""
    lines = [""]
    if result.cases:
        lines.append(f"specperf gate: {len(result.cases)} smoke cases against {endpoint}")
    previous = ""
    for case in result.cases:
        message = _without_power(case.message) if case.outcome == "failed" else case.message
        first, *rest = (message or "").splitlines() or [""]
        if case.message and case.message == previous:
            first, rest = "the same as above", []  # e.g. one missing baseline, every case
        previous = case.message
        lines.append(f"  {_LABELS.get(case.outcome, case.outcome):<5} {case.case_id}"
                     + (f": {first}" if first else ""))
        lines += [f"        {line}" for line in rest]
    requests = sum(c.requests for c in result.cases)
    if requests:
        server_s = sum(c.server_s for c in result.cases)
        lines.append(f"  cost: {requests} requests, {server_s:.0f} s of server time")
    lines.append(f"specperf gate: {_VERDICTS[result.code]} (exit {int(result.code)}): "
                 f"{result.reason}")
    return lines



def _without_power(message: str) -> str:
    """A failed case without the sweep's "Would have caught …" sentence (judge/sweep.py): the
    chance that a clean sweep would catch a 5% change says how far to trust a *pass*; on a
    regression it explains nothing."""
    kept = [line.partition(_POWER_SENTENCE)[0].rstrip() for line in message.splitlines()]
    return "\n".join(line for line in kept if line)


_POWER_SENTENCE = "Would have caught "


# -- a fleet (fleet.py): each endpoint decided alone, the worst one decides the run ---------
# How bad each code is: an endpoint that could not be measured outranks a regression.
_SEVERITY = {GateExit.PASS: 0, GateExit.REGRESSION: 1, GateExit.INFRASTRUCTURE: 2,
             GateExit.USAGE: 3}


@dataclass(frozen=True)
class FleetResult(GateResult):
    """The fleet's decision, and each endpoint's own."""

    endpoints: tuple[tuple[str, GateResult], ...] = ()


def fleet_result(pytest_exit: int, overall: GateResult) -> GateResult:
    """Per endpoint ``decide`` on its own cases; the worst endpoint's code, naming it."""
    if pytest_exit not in (_PYTEST_OK, _PYTEST_FAILED) or not overall.cases:
        return overall  # usage error, crash, nothing collected: no endpoint to blame
    names = sorted({c.endpoint for c in overall.cases})  # the JUnit order is xdist's
    each = []
    for name in names:
        cases = [c for c in overall.cases if c.endpoint == name]
        bad = any(c.outcome in ("failed", "error") for c in cases)
        each.append((name, decide(_PYTEST_FAILED if bad else _PYTEST_OK, cases)))
    worst_name, worst = max(each, key=lambda pair: _SEVERITY[pair[1].code])
    if worst.code == GateExit.PASS:
        reason = f"every endpoint passed ({', '.join(names)})."
    else:
        reason = f"endpoint {worst_name or '(unnamed)'} decides: {worst.reason}"
    return FleetResult(worst.code, reason, overall.cases, tuple(each))


def fleet_summary_lines(result: GateResult, where: str) -> list[str]:
    """Each endpoint's gate summary, then the fleet's decision with its exit code."""
    if not isinstance(result, FleetResult):
        return summary_lines(result, where)
    lines: list[str] = []
    for name, own in result.endpoints:
        lines += summary_lines(own, f"endpoint {name}")
    lines.append(f"specperf gate: fleet ({where}): exit {int(result.code)}: {result.reason}")
    return lines


# -- running -------------------------------------------------------------------------------
def perf_tests_dir(explicit: Path | None = None) -> Path | None:
    """The perf tests to run: --perf-tests DIR, else those installed with this package.

    The shipped ones (``specperf/perf_tests``) match the plugin that runs them, wherever the
    gate runs from; in a checkout (installed editable) they are the checkout's own.
    """
    tests = explicit if explicit is not None else Path(str(files("specperf") / "perf_tests"))
    return tests if tests.is_dir() else None


def pytest_command(args: argparse.Namespace, tests: Path, junit: Path) -> list[str]:
    """``python -m pytest perf_tests -m smoke`` with the gate's options and the pass-through."""
    # The plugins by their pytest11 entry-point names: loaded once even when pytest also
    # autoloads them, and loaded still when PYTEST_DISABLE_PLUGIN_AUTOLOAD is set.
    cmd = [sys.executable, "-m", "pytest", str(tests), "-m", SMOKE_MARKER,
           "-p", "specperf", "-p", "specperf_fleet", "-p", "no:cacheprovider"]
    for flag, value in (("--endpoint", args.endpoint), ("--deployment", args.deployment),
                        ("--endpoints", getattr(args, "endpoints", None)),
                        ("--baseline-dir", args.baseline_dir),
                        ("--compare-endpoint", args.production)):
        if value is not None:
            cmd += [flag, str(value)]
    extra = list(args.pytest_args)
    if extra[:1] == ["--"]:
        extra = extra[1:]
    if args.production is None:
        # A case without a baseline is an error, found before any GPU time is spent.
        cmd.append("--require-baseline")
    # The gate reads this file, so its --junitxml comes last and wins.
    return cmd + extra + [f"--junitxml={junit}"]


def _run_pytest(cmd: Sequence[str]) -> int:
    proc = subprocess.Popen(list(cmd))

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


def run(args: argparse.Namespace) -> int:
    """``specperf gate``: run the smoke subset, print the summary, return the exit code."""
    if args.candidate is not None:
        if args.endpoint is not None and args.endpoint != args.candidate:
            print("specperf gate: --candidate and --endpoint name different servers; give "
                  "one of them.", file=sys.stderr)
            return int(GateExit.USAGE)
        args.endpoint = args.candidate
    if args.production is not None and args.candidate is None and args.endpoint is None:
        print("specperf gate: --production needs --candidate URL (the deploy under test).",
              file=sys.stderr)
        return int(GateExit.USAGE)
    endpoint = args.endpoint or os.environ.get("SPECPERF_ENDPOINT")
    fleet = getattr(args, "endpoints", None)
    if fleet is not None and (args.endpoint is not None or args.production is not None):
        print("specperf gate: --endpoints judges a fleet; give it without --endpoint, "
              "--candidate or --production.", file=sys.stderr)
        return int(GateExit.USAGE)
    if fleet is not None:
        args.endpoint, endpoint = None, f"the fleet in {fleet}"
    elif not endpoint:
        print("specperf gate: --endpoint URL (or SPECPERF_ENDPOINT) is required: the gate "
              "judges a deployed server, never the embedded simulator.", file=sys.stderr)
        return int(GateExit.USAGE)
    tests = perf_tests_dir(args.perf_tests)
    if tests is None:
        where = args.perf_tests or "specperf/perf_tests (installed with the package)"
        print(f"specperf gate: no perf tests at {where}: pass --perf-tests DIR, or reinstall "
              "specperf.", file=sys.stderr)
        return int(GateExit.USAGE)
    reports = report_dir_of(args.pytest_args)
    before = set(reports.glob("*/results.json"))
    with tempfile.TemporaryDirectory(prefix="specperf-gate-") as tmp:
        junit = Path(tmp) / "smoke.xml"
        cmd = pytest_command(args, tests, junit)
        print("specperf gate: python " + shlex.join(cmd[1:]), flush=True)
        code = _run_pytest(cmd)
        result = _result(code, junit, find_record(reports, before))
    if fleet is not None:  # the worst endpoint decides, and is named
        result = fleet_result(code, result)
        lines = fleet_summary_lines(result, endpoint)
    elif args.production is not None:  # A/B: name both sides, in the verdicts' order
        lines = summary_lines(result, f"candidate {endpoint}, judged against production "
                                      f"{args.production} (figures read production \u2192 "
                                      "candidate)")
    else:
        lines = summary_lines(result, endpoint)
    for line in lines:
        print(line)
    return int(result.code)


def _result(pytest_exit: int, junit: Path, record: Path | None = None) -> GateResult:
    """Decide from the run's record; from the JUnit XML alone when it left none."""
    if pytest_exit not in (_PYTEST_OK, _PYTEST_FAILED):
        return decide(pytest_exit, [])
    unreadable: Exception | None = None
    try:
        worded = read_junit(junit)
    except (OSError, ElementTree.ParseError) as exc:
        worded, unreadable = [], exc
    if record is not None:
        try:
            return decide(pytest_exit, read_record(record, worded))
        except (OSError, ValueError, KeyError, TypeError):
            pass  # a record cut short: the JUnit XML still tells the outcomes
    if unreadable is not None:
        return GateResult(GateExit.INFRASTRUCTURE,
                          f"the JUnit XML of the run could not be read ({unreadable}).")
    return decide(pytest_exit, worded)


def add_subcommand(subparsers: Any) -> None:
    """Register ``specperf gate`` with the ``specperf`` command."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "gate", help="run the deploy gate (the smoke subset) against an endpoint",
        description="Run the smoke subset of the perf suite against a deployed endpoint, "
                    "judge it against the deployment's baseline and exit with a code the "
                    "deploy pipeline acts on.",
        epilog="Exit codes: 0 pass, 1 performance regression (block the deploy), 2 usage "
               "error, 3 infrastructure problem (unreachable, GPU lock timeout, unstable "
               "measurements, no baseline). Arguments after -- go to pytest unchanged, e.g. "
               "-- --output-tokens 64 -v. A/B: --candidate URL --production URL.")
    parser.add_argument("--endpoint", help="base URL of the deployed server (or SPECPERF_ENDPOINT)")
    parser.add_argument("--candidate", help="A/B mode: the candidate's base URL (as --endpoint)")
    parser.add_argument("--production", help="A/B mode: production's base URL; the candidate "
                        "is judged against it, interleaved, with no baseline file")
    parser.add_argument("--endpoints", type=Path,
                        help="fleet: a TOML endpoints file; every endpoint is gated against "
                             "its own deployment's baseline, and the gate exits with the worst "
                             "endpoint's code, naming it")
    parser.add_argument("--deployment", help="baseline deployment name (default: fingerprint slug)")
    parser.add_argument("--baseline-dir", type=Path, help="directory of versioned baselines")
    parser.add_argument("--perf-tests", type=Path,
                        help="perf tests directory (default: the ones installed with "
                             "specperf, specperf/perf_tests)")
    parser.add_argument("pytest_args", nargs="*", metavar="-- PYTEST_ARGS",
                        help="extra pytest arguments, after --")
    parser.set_defaults(run=run)
