"""``specperf trend``: tok/s, step ms and avg commit per cell over the runs of the history.

The runs come from the one history reader (:func:`specperf.store.history.read_history`): the
results store when it holds runs (``--db``, else ``$SPECPERF_RESULTS_DB``, else the SQLite
``results.db`` beside the history file), else ``history.jsonl`` — a line cut short by a crash
is skipped and said, never an error. The runs as data and the drift scan's finding are
:mod:`specperf.record.trend`'s, the page :mod:`specperf.views.trend`'s.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError, StoreError
from ..record import trend as history_trend
from ..settings.config import resolve_only
from ..settings.ini import project_ini
from ..settings.reportdir import report_dir
from ..store.history import HistoryLineSkipped, read_history
from ..views import trend
from .exits import USAGE_ERROR, failed, unwritable
from .store import given_store

DB_ENV = "SPECPERF_RESULTS_DB"


def add_subcommand(subparsers: Any) -> None:
    """Register ``specperf trend``."""
    default = report_dir() / "history.jsonl"
    tr = subparsers.add_parser("trend", help="render tok/s, step ms and avg commit over runs",
                               description="Per cell over past runs, with baseline versions "
                                           "and fingerprint changes marked.")
    tr.add_argument("--history", type=Path, default=default,
                    help=f"history file or report directory (default: {default})")
    tr.add_argument("--db", default=None,
                    help=f"the results store URL (default: ${DB_ENV}, else results.db beside "
                         f"the history, when a run wrote one)")
    tr.add_argument("--out", type=Path, default=None,
                    help="where to write the page (default: trend.html beside the history)")
    tr.add_argument("--kind", choices=history_trend.GROUPS, default="full",
                    help="which runs the plots compare (default: full sweeps); every run is "
                         "listed with its kind either way")
    tr.add_argument("--night-window", default=None,
                    help="hours within which runs share a night, for the drift scan (default "
                         "as the perf run reads it: $SPECPERF_NIGHT_WINDOW, else ini "
                         "specperf_night_window, else 12)")
    tr.set_defaults(run=run_trend)


def night_window(flag: str | None) -> float:
    """The night window as the perf run reads it: ``--night-window``, else
    $SPECPERF_NIGHT_WINDOW, else the project's ini, else the default (ConfigError naming the
    source of a bad value)."""
    return resolve_only(("night_window",), {"night_window": flag}, os.environ, project_ini(),
                        {"night_window": "--night-window"}).night_window


def run_trend(args: argparse.Namespace) -> int:
    """0 when written, 2 when the history holds no run, 3 when the store cannot be read."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", HistoryLineSkipped)
        try:
            entries = read_history(args.history, given_store(args.db))
            window = night_window(args.night_window)
        except (ConfigError, StoreError) as exc:
            return failed("trend", exc)
    for warning in caught:
        print(f"specperf trend: {warning.message}", file=sys.stderr)
    if not entries:
        print(f"specperf trend: {args.history} holds no runs: perf runs append to "
              f"reports/history.jsonl; pass --history.", file=sys.stderr)
        return USAGE_ERROR
    base = args.history if args.history.is_dir() else args.history.parent
    out = args.out or base / "trend.html"
    found = history_trend.build(entries, args.kind, window)
    try:
        out.write_text(trend.render(found), encoding="utf-8")
    except OSError as exc:
        return unwritable("trend", "--out", out, exc)
    for line in trend.drift_lines(found):  # the nightly job's log names a slow drift
        print(f"specperf {line}")
    print(f"specperf: trend: {trend.describe(found)}: {out}")
    return 0
