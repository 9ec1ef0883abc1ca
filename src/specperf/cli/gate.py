"""The deploy gate: ``specperf gate`` runs the smoke subset against an endpoint and says yes or no.

The command only wires: :mod:`~specperf.cli.runner` runs the very same perf suite,
``pytest perf_tests -m smoke``, in a subprocess and reads each case's outcome back from the
run's record; :mod:`~specperf.cli.decision` turns the outcomes into the exit code (0 pass,
1 regression, 2 usage error, 3 infrastructure; its docstring has the table) and
:mod:`~specperf.cli.sentences` prints one attributed line per case and the decision. Over a
fleet (``--endpoints FILE``) the worst endpoint decides, and is named.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

from .decision import CaseOutcome, GateExit, GateResult, fleet_result
from .runner import (
    find_record,
    perf_tests_dir,
    pytest_command,
    read_junit,
    report_dir_of,
    result_of,
    run_pytest,
)
from .sentences import fleet_summary_lines, summary_lines

# The gate's names other code reads from here (the pieces live in decision, runner, sentences).
__all__ = ["CaseOutcome", "GateExit", "GateResult", "add_subcommand", "fleet_result",
           "fleet_summary_lines", "read_junit", "run", "summary_lines"]


def gate_flags(args: argparse.Namespace) -> list[str]:
    """The pytest flags the gate's own options stand for."""
    flags: list[str] = []
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
        cmd = pytest_command(tests, junit, gate_flags(args), args.pytest_args)
        print("specperf gate: python " + shlex.join(cmd[1:]), flush=True)
        code = run_pytest(cmd)
        result = result_of(code, junit, find_record(reports, before))
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
               "-- --specperf-output-tokens 64 -v. A/B: --candidate URL --production URL.")
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
