"""Why each baseline version exists, as data: the listing ``specperf baselines`` prints and the
reason a report's header names.

A version's reason is read from its lineage (baselines/store.py, written by
plugin/updatecheck.py), never guessed: an accepted version names its reason and who accepted
it; a later version written without acceptance was judged first and regressed nowhere; a
deployment's first version replaced nothing; a schema-1 file (written before lineage) and a
file that carries none record no reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..baselines.concurrency import ConcurrencyBaseline, ConcurrencyStore
from ..baselines.store import Baseline, BaselineStore
from ..baselines.versions import Versions
from ..core.errors import ConfigError
from ..core.limits import LABELS, format_percent

ACCEPTED, JUDGED, FIRST, UNRECORDED = "accepted", "judged", "first", "unrecorded"
WORDS = {JUDGED: "written by an update that judged no regression",
         FIRST: "the deployment's first version",
         UNRECORDED: "no recorded reason"}
MOST_MOVES = 3
# A change without an interval (the fit's slope, exact acceptance) counts once it prints as
# one: 0.05 % rounds to 0.1 %.
SHOWN = 0.0005
# A fit's slope is named by its case id (reasoning-fit: context; …-batch-fit: batch size).
NAMES = {**LABELS, "slope": "slope", "agg_tok_s": "aggregate tok/s"}


def reason(lineage: Mapping[str, Any] | None) -> dict[str, str]:
    """The reason of a version with ``lineage``: its kind and its words ('accepted: the new
    drafter (me@box)', 'no recorded reason', …)."""
    if lineage is None:
        return {"kind": UNRECORDED, "text": WORDS[UNRECORDED]}
    accepted = lineage.get("accepted")
    if isinstance(accepted, Mapping):
        text, who = str(accepted.get("reason", "")), str(accepted.get("who", ""))
        return {"kind": ACCEPTED, "text": f"accepted: {text}" + (f" ({who})" if who else ""),
                "reason": text, "who": who}
    return {"kind": FIRST if lineage.get("previous") is None else JUDGED,
            "text": WORDS[FIRST if lineage.get("previous") is None else JUDGED]}


def moves(lineage: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Per metric, the biggest change against the previous version whose interval excludes
    no change (a change without an interval counts when it shows), biggest first."""
    moved = (lineage or {}).get("moved") or {}
    best: dict[str, dict[str, Any]] = {}
    for case, metrics in sorted(moved.items()):
        for metric, figures in sorted(metrics.items() if isinstance(metrics, Mapping) else ()):
            change, low, high = _figures(figures)
            if change is None or abs(change) < SHOWN or (low is not None and high is not None
                                                         and low <= 0 <= high):
                continue
            if metric not in best or abs(change) > abs(best[metric]["change"]):
                best[metric] = {"metric": metric, "case": case, "change": change,
                                "low": low, "high": high}
    return sorted(best.values(), key=lambda m: -abs(m["change"]))


def _figures(figures: Any) -> tuple[float | None, float | None, float | None]:
    """(change, low, high) of one moved metric, None where the file holds no number."""
    if not isinstance(figures, Mapping):
        return None, None, None
    found = [figures.get(k) for k in ("change", "low", "high")]
    change, low, high = (float(v) if isinstance(v, (int, float)) and not isinstance(v, bool)
                         else None for v in found)
    return change, low, high


def moved_text(version: Mapping[str, Any]) -> str:
    """'moved: step time +14.9% (reasoning-ctx13)': a version's moves in a short phrase ('' for
    a first version: its reason says so)."""
    if version["lineage"] is None:
        return "moves not recorded"
    if version["previous"] is None:
        return ""  # the reason says it: the deployment's first version
    found: list[dict[str, Any]] = version["moved"]
    if not found:
        return "nothing moved beyond its noise"
    parts = [f"{NAMES.get(m['metric'], m['metric'])} {format_percent(m['change'])} ({m['case']})"
             for m in found[:MOST_MOVES]]
    more = len(found) - MOST_MOVES
    return "moved: " + ", ".join(parts) + (f" and {more} more" if more > 0 else "")


def version_entry(base: Baseline) -> dict[str, Any]:
    """One version of the listing."""
    lineage = base.lineage
    return {"version": base.version, "created": base.created, "runs": base.run_count,
            "run_ids": list(base.runs), "lineage": lineage,
            "previous": None if lineage is None else lineage.get("previous"),
            "moved": moves(lineage), "reason": reason(lineage)}


def listing(root: Path, deployment: str) -> dict[str, Any]:
    """Every version of ``deployment`` under ``root``, oldest first, and its concurrency
    versions; ConfigError for a missing directory or deployment (naming what exists),
    BaselineError for a file that cannot be read."""
    store = BaselineStore(root)
    numbers = store.versions(deployment) if store.directory(deployment).is_dir() else []
    concurrency = _concurrency(ConcurrencyStore(root), deployment)
    if not numbers and not concurrency:
        raise ConfigError(_unknown(root, deployment))
    return {"deployment": deployment, "directory": str(store.directory(deployment)),
            "versions": [version_entry(store.load(deployment, v)) for v in numbers],
            "concurrency": concurrency}


def _concurrency(store: ConcurrencyStore, deployment: str) -> list[dict[str, Any]]:
    files = store.files(deployment)
    out = []
    for number in files.numbers():
        base = ConcurrencyBaseline.from_json(files.read(number), files.path(number))
        out.append({"version": number, "created": base.created, "levels": sorted(base.levels),
                    "runs": 1, "lineage": base.lineage,
                    "previous": None if base.lineage is None else base.lineage.get("previous"),
                    "moved": moves(base.lineage), "reason": reason(base.lineage)})
    return out


def _unknown(root: Path, deployment: str) -> str:
    if not root.is_dir():
        what = "is not a directory" if root.exists() else "does not exist"
        return (f"baseline directory {root} {what}: pass --baseline-dir with the directory "
                f"that holds <deployment>/v<N>.json.")
    found = sorted(p.name for p in root.iterdir() if p.is_dir() and Versions(p, "").numbers())
    holds = f"it holds {', '.join(found)}" if found else "it holds no deployment"
    return f"{root} has no baseline of deployment {deployment!r} ({holds}): name one of those."
