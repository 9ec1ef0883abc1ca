"""``specperf baselines DEPLOYMENT``: the deployment's baseline versions, oldest first, one
line each: version, created date, the runs it came from, what moved against the version
before, and why it was written (record/lineage.py reads it from each file's lineage).

Exit codes are the gate's: 0 listed, 2 usage (no such directory or deployment: the sentence
names what exists), 3 a baseline file that cannot be read (the sentence names it).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..core.errors import BaselineError, ConfigError
from ..record import lineage
from .exits import failed


def add_subcommand(subparsers: Any) -> None:
    """Register ``specperf baselines``."""
    p = subparsers.add_parser(
        "baselines", help="list a deployment's baseline versions and why each was written",
        description="A deployment's baseline versions, oldest first: created, runs, what "
                    "moved against the version before, and the reason.")
    p.add_argument("deployment", help="the deployment's name (a directory of the baseline dir)")
    p.add_argument("--baseline-dir", type=Path, default=Path("baselines"),
                   help="where baselines live (default: baselines)")
    p.add_argument("--json", action="store_true", help="print the listing as JSON")
    p.set_defaults(run=run_baselines)


def run_baselines(args: argparse.Namespace) -> int:
    """0 when listed, 2 for an unknown deployment or directory, 3 for an unreadable file."""
    try:
        found = lineage.listing(args.baseline_dir, args.deployment)
    except (ConfigError, BaselineError) as exc:
        return failed("baselines", exc)
    if args.json:
        print(json.dumps(found, indent=2, sort_keys=True, ensure_ascii=False))
        return 0
    for line in lines(found):
        print(line)
    return 0


def lines(found: Mapping[str, Any]) -> list[str]:
    """The listing in lines: a heading, one line per version, the concurrency section."""
    count = len(found["versions"])
    out = [f"{found['deployment']} ({found['directory']}): "
           + (f"{_count(count, 'version')}, oldest first" if count else
              "no version of the main cases")]
    out += [_line(v, f"{_count(v['runs'], 'run')}") for v in found["versions"]]
    if found["concurrency"]:
        out.append(f"concurrency: {_count(len(found['concurrency']), 'version')}")
        out += [_line(v, f"levels {', '.join(map(str, v['levels']))}")
                for v in found["concurrency"]]
    return out


def _line(version: Mapping[str, Any], source: str) -> str:
    parts = [f"v{version['version']}  {str(version['created'])[:10]}  {source}",
             lineage.moved_text(version), version["reason"]["text"]]
    return "  " + "; ".join(p for p in parts if p)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}"
