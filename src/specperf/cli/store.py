"""``specperf import`` and ``specperf export``: the results store from the command line.

``specperf import reports/`` loads what runs wrote before the store (history.jsonl, and
results.json files it does not name) into it, once per run id; ``specperf export --format
pytorch-v3 --out DIR`` writes each run's PyTorch benchmark HUD v3 rows to
``DIR/<run-id>.jsonl`` (store/export.py). The store is ``--db``, else
``$SPECPERF_RESULTS_DB``, else SQLite ``<report dir>/results.db`` (docs/store.md).
"""

from __future__ import annotations

import argparse
import gzip
import os
import sys
import warnings
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError, SpecperfError
from ..record import importer
from ..settings.parsers import database_url
from ..settings.reportdir import report_dir
from ..store import engine, export, ingest
from ..store.history import HistoryLineSkipped
from .exits import failed, unwritable

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
                     help="pytorch-v3: the PyTorch benchmark HUD's v3 rows, JSON Lines")
    exp.add_argument("--out", type=Path, required=True,
                     help="directory of <run-id>.jsonl files")
    exp.add_argument("--gzip", action="store_true", help="write <run-id>.jsonl.gz instead")
    origin = exp.add_argument_group(
        "where the rows come from (the HUD's metadata columns; on GitHub Actions from its "
        "environment: GITHUB_REPOSITORY, GITHUB_SHA, GITHUB_REF_NAME, GITHUB_RUN_ID, "
        "GITHUB_RUN_ATTEMPT, and GITHUB_WORKFLOW the rows' name, else specperf)")
    origin.add_argument("--repo", default=None, help="owner/name the HUD query selects by")
    origin.add_argument("--head-branch", default=None, help="the branch measured")
    origin.add_argument("--head-sha", default=None,
                        help="the commit measured (default: the run's git revision)")
    origin.add_argument("--workflow-id", type=int, default=None, help="the CI run's id")
    origin.add_argument("--run-attempt", type=int, default=None, help="the CI run's attempt")
    origin.add_argument("--job-id", type=int, default=None, help="the CI job's numeric id")
    origin.add_argument("--device", default=None,
                        help="the accelerator family, the HUD's device (default: cuda)")
    origin.add_argument("--arch", default=None,
                        help="the GPU model, the HUD's arch, e.g. 'NVIDIA RTX PRO 6000 "
                             "Blackwell' (default: $SPECPERF_GPU_NAME)")
    exp.add_argument("--run", dest="run_ids", action="append", default=None,
                     help="a run id to export (repeatable; default: every run)")
    exp.add_argument("--label", default=None, help="only the runs of this box's label")
    exp.add_argument("--db", default=None, help=db_help)
    exp.set_defaults(run=run_export)


def _url(args: argparse.Namespace) -> str:
    return engine.store_url(given_store(args.db), report_dir())


def given_store(db: str | None) -> str | None:
    """``--db``, else ``$SPECPERF_RESULTS_DB``, checked as --specperf-results-db is (one
    parser: a password in the URL is refused everywhere); ConfigError naming where it came
    from."""
    where, text = ("--db", db) if db else (f"${DB_ENV}", os.environ.get(DB_ENV) or None)
    if text is None:
        return None
    try:
        return database_url(text)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    except ValueError:
        raise ConfigError(f"{where} {text!r} is not a store URL: give postgresql://USER@"
                          "HOST:PORT/DB, sqlite:///PATH or a file path.") from None


def run_import(args: argparse.Namespace) -> int:
    """``specperf import``: every run found, in one transaction each; prints the counts and
    names every file passed by. A named file that holds no run is a usage error (2)."""
    skipped: list[str] = []
    try:
        url = _url(args)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", HistoryLineSkipped)
            found = [r for path in args.paths for r in importer.runs_in(path, skipped)]
        for warning in caught:
            print(f"specperf import: {warning.message}", file=sys.stderr)
        added = ingest.put_runs(url, found)
    except SpecperfError as exc:
        return failed("import", exc, usage_note="nothing was imported.")
    passed = (f" {len(skipped)} file{'s' if len(skipped) != 1 else ''} skipped: "
              f"{'; '.join(skipped)}." if skipped else "")
    print(f"specperf import: {added} new run{'s' if added != 1 else ''} of {len(found)} found "
          f"into {engine.shown(url)} ({len(found) - added} already there).{passed}")
    return 0


def run_export(args: argparse.Namespace) -> int:
    """``specperf export``: one file of rows per run id."""
    try:
        url = _url(args)
        ids = args.run_ids or export.run_ids(url, args.label)
        origin = export.Origin.from_env(
            os.environ, repo=args.repo, head_branch=args.head_branch, head_sha=args.head_sha,
            workflow_id=args.workflow_id, run_attempt=args.run_attempt, job_id=args.job_id,
            device=args.device, arch=args.arch)
        args.out.mkdir(parents=True, exist_ok=True)
        rows = 0
        for run_id in ids:
            found = export.pytorch_v3(url, run_id, origin)
            if not found:
                raise ConfigError(f"run {run_id} is not in {engine.shown(url)}: "
                                  "`specperf import` it first, or check the id.")
            data = export.jsonl(found)
            name = f"{run_id}.jsonl"
            if args.gzip:  # no name or time in the header: the same bytes on every export
                data, name = gzip.compress(data, mtime=0), f"{name}.gz"
            (args.out / name).write_bytes(data)
            rows += len(found)
    except OSError as exc:  # the directory --out names (the store's own are StoreErrors)
        return unwritable("export", "--out", args.out, exc)
    except SpecperfError as exc:
        return failed("export", exc)
    repo = f"repo {origin.repo}" if origin.repo else \
        "no repo: the HUD's query selects by repo, so pass --repo owner/name"
    print(f"specperf export: {rows} {export.FORMAT} rows of {len(ids)} "
          f"run{'s' if len(ids) != 1 else ''} in {args.out} "
          f"({repo}).")
    return 0
