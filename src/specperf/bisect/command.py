"""``specperf bisect``: the first bad deploy of a deploy log, per factor that moved.

Exit codes (the gate's family; 1 and 4 are the gate's own and never returned here):

====  ===============  ===================================================================
code  meaning          when
====  ===============  ===================================================================
0     culprit found    every factor that moved has its first bad version named
2     usage error      a bad flag, an unreadable or malformed versions file, unknown ends,
                       ends the history (``--from-history``) does not name one version each,
                       an ``--endpoint`` that answers as no LLM server does (nothing restored)
3     infrastructure   the endpoint, the GPU lock, or a deploy of the good or bad end
                       failed: nothing can be compared; fix the box
5     not reproduced   tonight the bad end is not worse than the good end in any factor
6     undecided        the GPU budget ran out, a version stayed between good and bad at the
                       most requests, or only skipped versions are left around the culprit
130   interrupted      Ctrl-C: one line says what the box runs; nothing is restored
====  ===============  ===================================================================
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError, NotAnLlmServer, SpecperfError
from ..settings.config import Settings
from ..settings.parsers import database_url
from ..settings.reportdir import report_dir
from ..store.history import read_history
from . import classify as cl
from . import endpoint, report
from .deploylog import Version, check_ends, load_versions, pick
from .history import HistoryEnds, ends_from_history
from .lab import BoxLab, deploy_argv, measuring_settings
from .search import DeployFailed, Plan, Search


class BisectExit(IntEnum):
    """The bisect's exit codes (see the module docstring)."""

    FOUND = 0
    USAGE = 2
    INFRASTRUCTURE = 3
    NOT_REPRODUCED = 5
    UNDECIDED = 6
    INTERRUPTED = 130


EXIT_OF = {"found": BisectExit.FOUND, "not-reproduced": BisectExit.NOT_REPRODUCED,
           "undecided": BisectExit.UNDECIDED}
DEFAULT_CONTEXTS = "1663,3333"
DEFAULT_CLASSES = "padding,reasoning"
DEFAULT_OUTPUT_TOKENS = 128


def add_subcommand(subparsers: Any) -> None:
    """Register ``specperf bisect``."""
    p = subparsers.add_parser(
        "bisect", help="find the deploy that made a deployment slower, per factor",
        description="Deploy versions of a deploy log one at a time on the box and bisect each "
                    "factor that moved (acceptance, step time, prefill) between a good and a "
                    "bad version, every comparison against tonight's good end. Exit 0 culprit "
                    "found, 2 usage, 3 infrastructure, 5 not reproduced, 6 undecided, 130 "
                    "interrupted (docs/bisect.md).")
    p.add_argument("--endpoint", required=True, help="the box's server URL")
    p.add_argument("--versions", type=Path, required=True,
                   help="the deploy log, oldest first: a version name a line, or JSON lines "
                        "with a \"name\" and free fields (\"fingerprint\": keys the server "
                        "must report once it runs the version)")
    p.add_argument("--deploy", required=True,
                   help="command template that deploys {version} on the box (shlex-split, "
                        "no shell), e.g. 'ci/deploy.sh {version}'")
    p.add_argument("--good", default=None, help="the good version (default: the first)")
    p.add_argument("--bad", default=None, help="the bad version (default: the last)")
    p.add_argument("--from-history", nargs="?", const="", default=None, metavar="PATH",
                   help="take the ends from the run history instead (a report directory or "
                        "its history.jsonl; default: the report directory): the versions the "
                        "last passing and the first failing run of --endpoint reported")
    p.add_argument("--results-db", default=None, metavar="URL",
                   help="the results store --from-history reads (default: "
                        "$SPECPERF_RESULTS_DB, else the results.db beside the history)")
    p.add_argument("--budget-s", type=_positive, default=math.inf,
                   help="GPU seconds of measured requests the bisect may spend (on a "
                        "simulator, seconds of simulated time; default: no limit); when the "
                        "next measurement would not fit, it stops undecided")
    p.add_argument("--factor", action="append", default=None,
                   choices=[f.name for f in cl.ALL_FACTORS],
                   help="bisect only this factor (repeatable; default: every factor that "
                        "moved, and tok/s when none did)")
    p.add_argument("--repeats", type=_positive_int, default=3,
                   help="requests per case on a middle version before its first verdict "
                        "(default 3; the ends get 4 × as many; doubled while unknown)")
    p.add_argument("--max-repeats", type=_positive_int, default=None,
                   help="the most requests per case of one version (default 8 × --repeats)")
    p.add_argument("--min-change", type=_positive, default=cl.MIN_CHANGE,
                   help=f"the smallest relative change of a factor bisected (default "
                        f"{cl.MIN_CHANGE:g})")
    p.add_argument("--contexts", default=DEFAULT_CONTEXTS,
                   help=f"prompt lengths of the cases (default {DEFAULT_CONTEXTS})")
    p.add_argument("--classes", default=DEFAULT_CLASSES,
                   help=f"text classes of the cases (default {DEFAULT_CLASSES})")
    p.add_argument("--output-tokens", type=_positive_int, default=DEFAULT_OUTPUT_TOKENS,
                   help=f"output tokens per request (default {DEFAULT_OUTPUT_TOKENS})")
    p.add_argument("--deploy-timeout", type=_positive, default=600.0,
                   help="seconds a deploy may take until the server is healthy (default 600)")
    p.add_argument("--restore", default=None, metavar="V",
                   help="the version deployed again when the bisect ends (default: the "
                        "versions file's last, what ran before; 'none' leaves the box as is)")
    p.add_argument("--json", action="store_true", help="print the outcome as JSON")
    p.add_argument("--html", type=Path, default=None, help="write the outcome's page here")
    p.set_defaults(run=run)


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _plan(args: argparse.Namespace) -> Plan:
    chosen = args.factor is not None
    factors = tuple(f for f in (cl.ALL_FACTORS if chosen else cl.FACTORS)
                    if not chosen or f.name in args.factor)
    most = args.max_repeats or 8 * args.repeats
    if most < 4 * args.repeats:
        raise ConfigError(f"--max-repeats {most} is below 4 × --repeats {args.repeats}: the "
                          "ends are measured with 4 × --repeats requests per case.")
    return Plan(repeats=args.repeats, end_repeats=4 * args.repeats, max_repeats=most,
                budget_s=args.budget_s, factors=factors, min_change=args.min_change,
                fallback=None if chosen else cl.THROUGHPUT)


def _restore(lab: BoxLab, search: Search, version: Version | None) -> str | None:
    """Deploy ``version`` again (what ran before the bisect) unless it is on the box."""
    if version is None or search.deploys == 0:  # nothing was deployed (or asked to stay)
        return None
    if search.deployed == version.index:
        return version.name
    _say(f"restoring {version.name}")
    try:
        lab.deploy(version)
    except (DeployFailed, SpecperfError) as exc:
        _say(f"could not restore {version.name}: {exc}: deploy it by hand")
        return None
    return version.name


def _say(line: str) -> None:
    print(f"specperf bisect: {line}", file=sys.stderr, flush=True)


def _from_history(args: argparse.Namespace, versions: list[Version]) -> HistoryEnds:
    """The ends the history names (``--from-history``); ConfigError when it names none."""
    if args.good is not None or args.bad is not None:
        raise ConfigError("--from-history takes the ends from the history: leave out "
                          "--good and --bad, or leave out --from-history.")
    path = Path(args.from_history) if args.from_history else report_dir()
    if not path.exists():
        raise ConfigError(f"--from-history {path} does not exist: point it at the report "
                          "directory or the history.jsonl the perf runs wrote.")
    db = args.results_db or os.environ.get("SPECPERF_RESULTS_DB") or None
    try:
        url = database_url(db) if db else None
    except ValueError:
        raise ConfigError(f"--results-db {db!r} is not a store URL: give postgresql://USER@"
                          "HOST:PORT/DB, sqlite:///PATH or a file path.") from None
    return ends_from_history(read_history(path, url), args.endpoint, versions, str(path))


@dataclass(frozen=True)
class _Setup:
    """What a bisect runs with, checked before anything is locked or deployed."""

    versions: list[Version]
    good: Version
    bad: Version
    restore: Version | None
    plan: Plan
    settings: Settings
    chosen: HistoryEnds | None


def _prepare(args: argparse.Namespace) -> _Setup | int:
    """The ends, the restore version, the plan and the settings; an exit code on a usage or
    store error (nothing deployed, nothing locked)."""
    chosen: HistoryEnds | None = None
    try:
        versions = load_versions(args.versions)
        if args.from_history is not None:
            chosen = _from_history(args, versions)
            good, bad = chosen.good, chosen.bad
            _say(report.history_line(chosen.to_dict()))
        else:
            good = pick(versions, args.good, 0, "--good")
            bad = pick(versions, args.bad, len(versions) - 1, "--bad")
        check_ends(good, bad)
        restore = None if args.restore == "none" else \
            pick(versions, args.restore, len(versions) - 1, "--restore")
        deploy_argv(args.deploy, good.name)
        plan = _plan(args)
        settings = measuring_settings(args.endpoint, {
            "contexts": args.contexts, "text_classes": args.classes,
            "output_tokens": str(args.output_tokens)}, os.environ)
    except ConfigError as exc:
        print(f"specperf bisect: {exc}", file=sys.stderr)
        return BisectExit.USAGE
    except SpecperfError as exc:  # the results store --from-history reads
        print(f"specperf bisect: {exc}", file=sys.stderr)
        return BisectExit.INFRASTRUCTURE
    return _Setup(versions, good, bad, restore, plan, settings, chosen)


def run(args: argparse.Namespace) -> int:
    """Run ``specperf bisect``; returns its exit code."""
    setup = _prepare(args)
    if isinstance(setup, int):
        return setup
    lab = BoxLab(setup.settings, args.deploy, args.deploy_timeout, progress=_say)
    search = Search(lab, setup.versions, setup.good, setup.bad, setup.plan, progress=_say)
    try:
        return _bisect(args, lab, search, setup.restore, setup.chosen)
    except KeyboardInterrupt:
        # Ctrl-C means stop now: no restore wait; the lock is released below.
        print(f"specperf bisect: interrupted {lab.left(setup.restore)}.", file=sys.stderr)
        return BisectExit.INTERRUPTED
    finally:
        lab.close()


def _bisect(args: argparse.Namespace, lab: BoxLab, search: Search, restore: Version | None,
            chosen: HistoryEnds | None) -> int:
    """Identify the endpoint, lock the box, search, restore, report."""
    failed: int | None = None
    try:
        endpoint.identify(lab.endpoint, _say)  # before the lock and any wait on the server
        lab.open()
        outcome = search.run()
    except NotAnLlmServer as exc:  # the URL is wrong: no restore can wait on it either
        print(f"specperf bisect: {str(exc).removeprefix('specperf: ')}{_after(lab)}",
              file=sys.stderr)
        return BisectExit.USAGE
    except DeployFailed as exc:
        print(f"specperf bisect: an end of the range could not be measured: {exc}. Fix the "
              "box or choose other --good/--bad versions.", file=sys.stderr)
        failed = BisectExit.INFRASTRUCTURE
    except SpecperfError as exc:
        print(f"specperf bisect: {exc}", file=sys.stderr)
        failed = BisectExit.INFRASTRUCTURE
    restored = _restore(lab, search, restore)
    if failed is not None:
        return failed
    code = EXIT_OF[outcome.status]
    doc = report.to_dict(outcome, args.endpoint, int(code), lab.fingerprints, lab.simulated)
    doc["deploy_s"] = round(lab.deploy_s, 1)
    doc["restored"] = restored
    doc["from_history"] = chosen.to_dict() if chosen is not None else None
    if args.html is not None:
        args.html.parent.mkdir(parents=True, exist_ok=True)
        args.html.write_text(report.html(doc), encoding="utf-8")
        _say(f"page {args.html}")
    where = [f"  page: {args.html}"] if args.html is not None else []
    print(report.to_json(doc) if args.json else report.text(doc, where))
    return code


def _after(lab: BoxLab) -> str:
    """What a deploy left on the box before the endpoint turned out wrong ("" before any)."""
    if lab.deploying is None:
        return ""
    return f" The deploy of {lab.deploying} ran before that answer; nothing was restored."
