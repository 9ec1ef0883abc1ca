"""``specperf report RESULTS``: render the HTML page of a run done elsewhere from its
results.json (views/page.py renders; this module only reads, writes and says so)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..core.errors import SpecperfError
from ..record import schema as record_schema
from ..views import page
from .exits import failed, unwritable


def add_subcommand(subparsers: Any) -> None:
    """Register ``specperf report`` (``specperf trend`` is cli/trend.py's)."""
    rep = subparsers.add_parser("report", help="re-render report.html from a results.json",
                                description="Render the HTML report of a run done elsewhere.")
    rep.add_argument("results", type=Path, help="a results.json written by a perf run")
    rep.add_argument("--out", type=Path, default=None,
                     help="where to write the page (default: report.html beside RESULTS)")
    rep.set_defaults(run=run_report)


def run_report(args: argparse.Namespace) -> int:
    """0 when written, 2 when the results file is unusable or the page cannot be written."""
    try:
        doc = record_schema.load(args.results)
    except SpecperfError as exc:  # a missing or corrupt results.json: the caller's to fix
        return failed("report", exc)
    out = args.out or args.results.with_name("report.html")
    try:
        out.write_text(page.render(doc), encoding="utf-8")
    except OSError as exc:
        return unwritable("report", "--out", out, exc)
    print(f"specperf: report {out}")
    return 0
