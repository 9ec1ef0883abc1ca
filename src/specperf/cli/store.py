"""``specperf import`` and ``specperf export``: the results store from the command line.

``specperf import reports/`` loads what runs wrote before the store (history.jsonl, and
results.json files it does not name) into it, once per run id; ``specperf export --format
pytorch-v3 --out DIR`` writes each run's PyTorch benchmark database v3 rows to
``DIR/<run-id>.json``. The store is ``--db``, else ``$SPECPERF_RESULTS_DB``, else SQLite
``<report dir>/results.db`` (docs/store.md).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError, SpecperfError
from ..record import importer
from ..store import engine, export, ingest
from ..views.report import report_dir

USAGE, INFRASTRUCTURE = 2, 3
DB_ENV = "SPECPERF_RESULTS_DB"


def add_subcommand(subparsers: Any) -> None:
    """Register ``specperf import`` and ``specperf export``."""
    db_help = (f"the results store URL (default: ${DB_ENV}, else <report dir>/results.db)")
    imp = subparsers.add_parser("import", help="load history.jsonl and results.json files "
                                "into the results store",
                                description="Load what perf runs wrote (a report directory, "
                                            "a history.jsonl, a results.json) into the "
                                            "results store, once per run id.")
    imp.add_argument("paths", type=Path, nargs="+", help="report directories or files")
    imp.add_argument("--db", default=None, help=db_help)
    imp.set_defaults(run=run_import)
    exp = subparsers.add_parser("export", help="write the store's runs as dashboard rows",
                                description="Write each run's rows in a format dashboards "
                                            "ingest, one file per run id (re-exporting "
                                            "replaces it).")
    exp.add_argument("--format", choices=[export.FORMAT], required=True,
                     help="pytorch-v3: the PyTorch benchmark database v3 JSON rows")
    exp.add_argument("--out", type=Path, required=True, help="directory of <run-id>.json files")
    exp.add_argument("--run", dest="run_ids", action="append", default=None,
                     help="a run id to export (repeatable; default: every run)")
    exp.add_argument("--label", default=None, help="only the runs of this box's label")
    exp.add_argument("--db", default=None, help=db_help)
    exp.set_defaults(run=run_export)


def _url(args: argparse.Namespace) -> str:
    return engine.store_url(args.db or os.environ.get(DB_ENV) or None, report_dir())


def run_import(args: argparse.Namespace) -> int:
    """``specperf import``: every run found, in one transaction each; prints the counts."""
    try:
        url = _url(args)
        found = [r for path in args.paths for r in importer.runs_in(path)]
        added = ingest.put_runs(url, found)
    except ConfigError as exc:
        print(f"specperf import: {exc}", file=sys.stderr)
        return USAGE
    except SpecperfError as exc:
        print(f"specperf import: {exc}", file=sys.stderr)
        return INFRASTRUCTURE
    print(f"specperf import: {added} new run{'s' if added != 1 else ''} of {len(found)} found "
          f"into {engine.shown(url)} ({len(found) - added} already there).")
    return 0


def run_export(args: argparse.Namespace) -> int:
    """``specperf export``: one file of rows per run id."""
    try:
        url = _url(args)
        ids = args.run_ids or export.run_ids(url, args.label)
        args.out.mkdir(parents=True, exist_ok=True)
        rows = 0
        for run_id in ids:
            found = export.pytorch_v3(url, run_id)
            if not found:
                raise ConfigError(f"run {run_id} is not in {engine.shown(url)}: "
                                  "`specperf import` it first, or check the id.")
            (args.out / f"{run_id}.json").write_text(json.dumps(found, indent=1) + "\n",
                                                     encoding="utf-8")
            rows += len(found)
    except ConfigError as exc:
        print(f"specperf export: {exc}", file=sys.stderr)
        return USAGE
    except (SpecperfError, OSError) as exc:
        print(f"specperf export: {exc}", file=sys.stderr)
        return INFRASTRUCTURE
    print(f"specperf export: {rows} {export.FORMAT} rows of {len(ids)} runs in {args.out}.")
    return 0
