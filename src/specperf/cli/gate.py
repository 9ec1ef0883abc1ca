"""The deploy gate: ``specperf gate`` runs the smoke subset against an endpoint and says yes or no.

The command only wires: :mod:`~specperf.cli.runner` runs the very same perf suite,
``pytest perf_tests -m smoke``, in a subprocess and reads each case's outcome back from the
run's record; :mod:`~specperf.cli.decision` turns the outcomes into the exit code (0 pass,
1 regression, 2 usage error, 3 infrastructure; its docstring has the table) and
:mod:`~specperf.cli.sentences` prints one attributed line per case and the decision. Over a
fleet (``--endpoints FILE``) the worst endpoint decides, and is named. Around a deploy,
``--save-reference DIR`` (before) and ``--reference DIR`` (after) judge the candidate against
the running deployment measured the same night (:mod:`~specperf.cli.reference`).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..settings.parsers import http_url
from . import reference, runner
from .decision import PYTEST_USAGE, GateExit, GateResult, fleet_result
from .runner import (
    find_record,
    perf_tests_dir,
    pytest_command,
    report_dir_of,
    result_of,
    run_pytest,
)
from .sentences import decision_line, fleet_summary_lines, summary_lines

__all__ = ["add_subcommand", "run"]


def gate_flags(args: argparse.Namespace) -> list[str]:
    """The pytest flags the gate's own options stand for."""
    flags: list[str] = ["-v"] if getattr(args, "verbose", False) else []
    for flag, value in (("--specperf-endpoint", args.endpoint),
                        ("--specperf-deployment", args.deployment),
                        ("--specperf-endpoints", getattr(args, "endpoints", None)),
                        ("--specperf-baseline-dir", args.baseline_dir),
                        ("--specperf-compare-endpoint", args.production)):
        if value is not None:
            flags += [flag, str(value)]
    if args.production is None:
        # A case without a baseline is an error, found before any GPU time is spent.
        flags.append("--specperf-require-baseline")
    return flags


def _bad_url(args: argparse.Namespace) -> str | None:
    """A URL option that is no http(s) URL, named as the user typed it (pytest would name the
    --specperf-… flag the gate passes it as)."""
    for flag, value in (("--candidate", args.candidate), ("--endpoint", args.endpoint),
                        ("--production", args.production)):
        if value is None:
            continue
        try:
            http_url(value)
        except ValueError:
            return (f"{flag} {value!r} is not an http(s) URL: pass the server's base URL, "
                    "such as http://127.0.0.1:30000.")
    return None


def _usage(message: str) -> int:
    print(f"specperf gate: {message}", file=sys.stderr)
    return int(GateExit.USAGE)


def _reference_usage(args: argparse.Namespace) -> str | None:
    """Options that cannot go with a reference phase."""
    if args.save_reference is not None and args.reference is not None:
        return ("--save-reference measures before the deploy and --reference judges after it: "
                "give one of them per call.")
    phase = "--save-reference" if args.save_reference is not None else "--reference"
    for given, name in ((getattr(args, "endpoints", None), "--endpoints"),
                        (args.production, "--production"), (args.baseline_dir, "--baseline-dir")):
        if given is not None:
            return (f"{phase} cannot be combined with {name}: a reference is one endpoint's "
                    "deployment measured the same night, and its directory is its baseline "
                    "directory.")
    return None


def run(args: argparse.Namespace) -> int:
    """``specperf gate``: run the smoke subset, print the summary, return the exit code."""
    if args.candidate is not None:
        if args.endpoint is not None and args.endpoint != args.candidate:
            return _usage("--candidate and --endpoint name different servers; give one of them.")
        args.endpoint = args.candidate
    if args.production is not None and args.candidate is None and args.endpoint is None:
        return _usage("--production needs --candidate URL (the deploy under test).")
    endpoint = args.endpoint or os.environ.get("SPECPERF_ENDPOINT")
    fleet = getattr(args, "endpoints", None)
    if fleet is not None and (args.endpoint is not None or args.production is not None):
        return _usage("--endpoints judges a fleet; give it without --endpoint, --candidate or "
                      "--production.")
    if (problem := _bad_url(args)) is not None:
        return _usage(problem)
    phased = args.save_reference is not None or args.reference is not None
    if phased and (problem := _reference_usage(args)) is not None:
        return _usage(problem)
    if fleet is not None:
        args.endpoint, endpoint = None, f"the fleet in {fleet}"
    elif not endpoint:
        return _usage("--endpoint URL (or SPECPERF_ENDPOINT) is required: the gate judges a "
                      "deployed server, never the embedded simulator.")
    tests = perf_tests_dir(args.perf_tests)
    if tests is None:
        where = args.perf_tests or "specperf/perf_tests (installed with the package)"
        return _usage(f"no perf tests at {where}: pass --perf-tests DIR, or reinstall specperf.")
    if args.save_reference is not None:
        return _save_reference(args, tests, endpoint)
    if args.reference is not None:
        return _judge_against_reference(args, tests, endpoint)
    run = _run_suite(tests, gate_flags(args), args.pytest_args, verbose=_verbose(args),
                     flag="--candidate" if args.candidate is not None else "--endpoint")
    result = run.result
    if fleet is not None:  # the worst endpoint decides, and is named
        result = fleet_result(run.code, result)
        lines = fleet_summary_lines(result, endpoint)
        lines[-1:-1] = [f"  {w}" for w in run.where()]  # the fleet's own line stays last
    elif result.code == GateExit.USAGE:  # a wrong URL: pytest's sentence is shown above
        lines = ["", decision_line(result)]
    elif args.production is not None:  # A/B: name both sides, in the verdicts' order
        lines = summary_lines(result, f"candidate {endpoint}, judged against production "
                                      f"{args.production} (figures read production \u2192 "
                                      "candidate)", run.simulated, record=run.document(),
                              where=run.where())
    else:
        lines = summary_lines(result, endpoint, run.simulated, record=run.document(),
                              where=run.where())
    _print_block(lines, run.show_output_if(result) or _verbose(args))
    return int(result.code)


def _print_block(lines: list[str], after_output: bool) -> None:
    """The closing block; its leading blank line parts it from pytest's output, and only
    when that output was printed above it (stdout then opens with the answer)."""
    for line in lines if after_output or (lines and lines[0]) else lines[1:]:
        print(line)


def _verbose(args: argparse.Namespace) -> bool:
    """Whether pytest's own output streams: the gate's -v, or a -v among pytest's args."""
    return bool(getattr(args, "verbose", False)) or any(
        a == "--verbose" or (a.startswith("-v") and set(a[1:]) == {"v"})
        for a in args.pytest_args)


@dataclass(frozen=True)
class _Run:
    """One run of the perf suite: pytest's exit code, the decision, whether the server was a
    simulator (its seconds are simulated seconds), the record it wrote and, unless -v
    streamed it, the file holding pytest's own output."""

    code: int
    result: GateResult
    simulated: bool
    record: Path | None = None
    log: Path | None = None

    def document(self) -> dict[str, Any] | None:
        """The run's results document, or None (a fleet's, or one that cannot be read)."""
        if self.record is None:
            return None
        try:
            doc = json.loads(self.record.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return doc if isinstance(doc, dict) and "endpoints" not in doc else None

    def where(self) -> list[str]:
        """Where the detail is: the report, and pytest's output when the gate kept it."""
        found = []
        if self.record is not None and (self.record.parent / "report.html").is_file():
            found.append(f"report: {self.record.parent / 'report.html'}")
        if self.log is not None:
            found.append(f"pytest's output (every sentence; -v prints it here): {self.log}")
        return found

    def show_output_if(self, result: GateResult) -> bool:
        """pytest's kept output, printed when the decision points at it: a usage error, or a
        run that ended before it could judge (its message is the only account). Whether it
        printed."""
        if self.log is None or not (result.code == GateExit.USAGE or (
                result.code == GateExit.INFRASTRUCTURE and self.code not in (0, 1))):
            return False
        try:
            print(self.log.read_text(encoding="utf-8", errors="replace"), end="")
        except OSError:
            return False
        return True


def _run_suite(tests: Path, flags: list[str], pytest_args: list[str],
               marker: str = runner.SMOKE_MARKER, flag: str = "--endpoint",
               verbose: bool = True) -> _Run:
    """Run the perf tests in a subprocess (its command printed on stderr) and decide; ``flag``
    is how the user named the endpoint, for the sentence of a wrong URL. Unless ``verbose``,
    pytest's output goes to a file beside the run's record, not to the terminal."""
    reports = report_dir_of(pytest_args)
    before = set(reports.glob("*/results.json"))
    with tempfile.TemporaryDirectory(prefix="specperf-gate-") as tmp:
        junit = Path(tmp) / "smoke.xml"
        cmd = pytest_command(tests, junit, flags, pytest_args, marker)
        # Progress, on stderr: stdout is the answer's one screen (a pipeline reads the exit
        # code, a person the screen; the command is for whoever reruns it by hand).
        print("specperf gate: python " + shlex.join(cmd[1:]), file=sys.stderr, flush=True)
        log = None if verbose else Path(tmp) / "pytest.log"
        code = run_pytest(cmd, log)
        record = find_record(reports, before)
        return _Run(code, result_of(code, junit, record, flag), runner.simulated(record),
                    record, _keep(log, record, reports))


def _keep(log: Path | None, record: Path | None, reports: Path) -> Path | None:
    """pytest's output moved beside the run's record (else into the report directory), so
    it outlives the gate's temporary directory."""
    if log is None or not log.is_file():
        return None
    where = record.parent if record is not None else reports
    try:
        where.mkdir(parents=True, exist_ok=True)
        kept = where / ("pytest.log" if record is not None else
                        f"gate-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log")
        shutil.move(str(log), kept)
    except OSError:
        return None
    return kept


def _endpoint_flags(endpoint: str, deployment: str | None) -> list[str]:
    flags = ["--specperf-endpoint", endpoint]
    return flags + (["--specperf-deployment", deployment] if deployment else [])


def _save_reference(args: argparse.Namespace, tests: Path, endpoint: str) -> int:
    """Phase 1, before the deploy: the running deployment's subset, kept as the reference."""
    directory = Path(args.save_reference).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    before = reference.baseline_files(directory)
    flags = _endpoint_flags(endpoint, args.deployment) + reference.measure_flags(directory)
    run = _run_suite(tests, flags, args.pytest_args, reference.SUBSET_MARKER,
                     verbose=_verbose(args))
    if run.code == PYTEST_USAGE:
        run.show_output_if(GateResult(GateExit.USAGE, ""))
        print(decision_line(GateResult(GateExit.USAGE, "pytest rejected the options (see its "
                                                        "message above).")))
        return int(GateExit.USAGE)
    if run.result.code == GateExit.USAGE:  # a wrong URL: the pipeline's call to fix
        run.show_output_if(run.result)
        print(decision_line(run.result))
        return int(GateExit.USAGE)
    cases = run.result.cases
    saved = reference.written(directory, before, endpoint,
                              (sum(c.requests for c in cases), sum(c.server_s for c in cases)))
    if saved is None:
        run.show_output_if(GateResult(GateExit.USAGE, ""))  # the run is the only account
        print(decision_line(GateResult(
            GateExit.INFRASTRUCTURE, f"no reference was written in {directory}: the running "
            "deployment could not be measured cleanly (see the run above); fix that before "
            "the deploy, or gate it against its nightly baseline instead.")))
        return int(GateExit.INFRASTRUCTURE)
    extra = [a for a in args.pytest_args if a != "--"]
    after = shlex.join(["specperf", "gate", "--reference", str(directory), "--endpoint",
                        endpoint, *(["--", *extra] if extra else [])])
    _print_block(["", f"specperf gate: reference saved in {directory}: {saved.describe()}. "
                      f"After the deploy: `{after}`."], _verbose(args))
    for line in run.where():
        print(f"  {line}")
    return int(GateExit.PASS)


def _judge_against_reference(args: argparse.Namespace, tests: Path, endpoint: str) -> int:
    """Phase 2, after the deploy: the candidate against the reference, the same night."""
    directory = Path(args.reference).resolve()
    fix = reference.save_command(directory, endpoint, args.deployment, args.pytest_args)
    try:
        ref = reference.load(directory)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return _usage(reference.missing(directory, str(exc) or type(exc).__name__, fix))
    problem = reference.mismatch(ref, endpoint, args.deployment, args.reference_max_age,
                                 reference.now_utc(), fix)
    if problem is not None:
        return _usage(problem)
    flags = ["--specperf-endpoint", endpoint, *reference.judge_flags(ref)]
    run = _run_suite(tests, flags, args.pytest_args, verbose=_verbose(args))
    result = run.result
    if any(c.no_baseline for c in result.cases):  # the reference lacks a case: another subset
        result = GateResult(GateExit.USAGE, reference.other_subset(ref, fix), result.cases)
    shown = run.show_output_if(result) or _verbose(args)
    record = run.document()
    decode = " ".join(s for s in (ref.decode_sentence(), reference.path_sentence(
        record, max(ref.lengths().values(), default=0))) if s) or None
    _print_block(summary_lines(result, f"{endpoint}, judged against its same-night reference "
                                       f"({ref.describe()})", run.simulated,
                               reference_cost=(ref.requests, ref.server_s),
                               record=record, where=run.where(), decode=decode), shown)
    return int(result.code)


def _hours(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of hours")
    return value


def add_subcommand(subparsers: Any) -> None:
    """Register ``specperf gate`` with the ``specperf`` command."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "gate", help="run the deploy gate (the smoke subset) against an endpoint",
        description="Run the smoke subset of the perf suite against a deployed endpoint, "
                    "judge it against the deployment's baseline and exit with a code the "
                    "deploy pipeline acts on.",
        epilog="Exit codes: 0 pass, 1 performance regression (block the deploy), 2 usage "
               "error (a bad flag, a refused reference, a URL that is no LLM server), 3 "
               "infrastructure problem (unreachable, GPU lock timeout, unstable measurements, "
               "no baseline), 4 undecided (measured, none regressed, the statistics could not "
               "decide). Arguments after -- go to pytest unchanged, e.g. "
               "-- --specperf-output-tokens 64 -v. A/B: --candidate URL --production URL. Around "
               "a deploy: --save-reference DIR before it, --reference DIR after it "
               "(docs/gate.md).")
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
    parser.add_argument("--save-reference", type=Path, metavar="DIR",
                        help="phase 1 of a deploy, before it: measure the running deployment's "
                             "gate subset and keep it in DIR as the same-night reference "
                             "(exit 0 saved, 3 not measured cleanly)")
    parser.add_argument("--reference", type=Path, metavar="DIR",
                        help="phase 2, after the deploy: judge the candidate against the "
                             "reference in DIR, the run-to-run noise cancelled; a stale or "
                             "mismatched reference is a usage error (exit 2)")
    parser.add_argument("--reference-max-age", type=_hours, default=reference.DEFAULT_MAX_AGE_H,
                        metavar="HOURS",
                        help="oldest reference --reference accepts, in hours (default: "
                             f"{reference.DEFAULT_MAX_AGE_H:g})")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="stream pytest's own output (every sentence, progress) and pass "
                             "-v to it; by default it goes to pytest.log beside the run's "
                             "report and the gate prints its answer once")
    parser.add_argument("--perf-tests", type=Path,
                        help="perf tests directory (default: the ones installed with "
                             "specperf, specperf/perf_tests)")
    parser.add_argument("pytest_args", nargs="*", metavar="-- PYTEST_ARGS",
                        help="extra pytest arguments, after --")
    parser.set_defaults(run=run)
