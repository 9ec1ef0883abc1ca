"""A bisect's outcome as text, as JSON, and as an HTML page (views/templates/bisect.html.j2).

Every view renders :func:`to_dict`'s document, so the three say the same thing. On a
simulator (the probe says so, ``simulated`` in the document) every view says SIMULATED and
its seconds are simulated time, not a GPU's.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from ..core.limits import format_ci, format_percent
from ..views import template
from ..views.explaincard import SIMULATED
from . import classify as cl
from .search import FactorResult, Outcome, VersionState

HEADLINE = {
    "found": "culprit found",
    "not-reproduced": "the regression did not reproduce tonight",
    "undecided": "undecided",
}


def _state(v: VersionState, outcome: Outcome) -> str:
    if v.version.name == outcome.good:
        return "good end"
    if v.version.name == outcome.bad:
        return "bad end"
    if v.skipped:
        return "skipped"
    return "measured" if v.repeats else "not measured"


def _version(v: VersionState, outcome: Outcome, good: VersionState) -> dict[str, Any]:
    row: dict[str, Any] = {"name": v.version.name, "index": v.version.index,
                           "state": _state(v, outcome), "skipped": v.skipped,
                           "requests_per_case": v.repeats, "gpu_s": round(v.gpu_s, 3),
                           "verdicts": dict(v.verdicts), "figures": {}}
    for factor in cl.ALL_FACTORS:
        mine, base = v.side(factor.metric), good.side(factor.metric)
        if mine is None:
            continue
        entry: dict[str, Any] = {"median": mine.level}
        if base is not None and v is not good:
            found = cl.change(base, mine, factor.metric)
            entry["change"] = found.to_dict() if found else None
        row["figures"][factor.metric] = entry
    return row


def _factor(r: FactorResult) -> dict[str, Any]:
    return {"factor": r.factor.name, "metric": r.factor.metric, "status": r.status,
            "first_bad": r.first_bad if r.status == "found" else None,
            "last_good": r.last_good, "regression": r.regression.to_dict(),
            "culprit_change": r.culprit_change.to_dict() if r.culprit_change else None,
            "candidates": list(r.candidates), "reason": r.reason}


def to_dict(outcome: Outcome, endpoint: str, exit_code: int,
            fingerprints: Mapping[str, Any] | None = None, simulated: bool = False
            ) -> dict[str, Any]:
    """The bisect's one document (what ``--json`` prints; ``simulated``: the server is a
    simulator, whose seconds are simulated time)."""
    good = next(v for v in outcome.versions if v.version.name == outcome.good)
    lo, hi = good.version.index, max(v.version.index for v in outcome.versions
                                     if v.version.name == outcome.bad)
    return {
        "status": outcome.status, "exit_code": exit_code, "endpoint": endpoint,
        "good": outcome.good, "bad": outcome.bad,
        "reproduction": dict(outcome.reproduction),
        "ends": {name: c.to_dict() for name, c in outcome.ends.items()},
        "factors": [_factor(r) for r in outcome.factors],
        "versions": [_version(v, outcome, good) for v in outcome.versions[lo:hi + 1]],
        "versions_measured": sum(1 for v in outcome.versions if v.repeats),
        "gpu_s": round(outcome.gpu_s, 3), "deploys": outcome.deploys,
        "budget_s": None if math.isinf(outcome.budget_s) else outcome.budget_s,
        "fingerprints": dict(fingerprints or {}), "simulated": simulated,
    }


def clock(doc: Mapping[str, Any], start: bool = False) -> str:
    """What the document's seconds are: a GPU's, or the simulator's simulated time
    (``start``: opening a sentence)."""
    if doc.get("simulated"):
        return "Simulated time" if start else "simulated time"
    return "GPU time"


def _pct(change: Mapping[str, Any] | None) -> str:
    if not change:
        return "—"
    return (f"{format_percent(change['relative'])} "
            f"({format_ci(change['low'], change['high'])})")


def _factor_line(f: Mapping[str, Any]) -> str:
    if f["status"] == "found":
        return (f"  {f['factor']}: {f['first_bad']} is the first bad version ({f['last_good']} "
                f"the last good): {f['metric']} {_pct(f['culprit_change'])} at {f['first_bad']}; "
                f"good end → bad end {_pct(f['regression'])}.")
    return (f"  {f['factor']}: undecided, {f['reason']}; the first bad version is one of "
            f"{', '.join(f['candidates'])} ({f['metric']} good end → bad end "
            f"{_pct(f['regression'])}).")


def _version_line(v: Mapping[str, Any]) -> str:
    if v["state"] == "skipped":
        return f"  {v['name']:<12} skipped: {v['skipped']}"
    if not v["requests_per_case"]:
        return f"  {v['name']:<12} not measured"
    parts = []
    for metric, entry in v["figures"].items():
        change = entry.get("change")
        moved = f" ({format_percent(change['relative'])})" if change else ""
        parts.append(f"{metric} {entry['median']:.4g}{moved}")
    verdicts = ", ".join(f"{k} {w}" for k, w in v["verdicts"].items())
    tail = f" — {verdicts}" if verdicts else ""
    return (f"  {v['name']:<12} {v['state']:<9} {v['requests_per_case']:>3} req/case  "
            f"{'  '.join(parts)}{tail}")


def text(doc: Mapping[str, Any]) -> str:
    """The terminal summary."""
    lines = [_headline(doc), *_history(doc), *_findings(doc)]
    lines.append("versions (change against tonight's good end):")
    lines += [_version_line(v) for v in doc["versions"]]
    skipped = sum(1 for v in doc["versions"] if v["state"] == "skipped")
    budget = f"; budget {doc['budget_s']:g} s" if doc["budget_s"] is not None else ""
    lines.append(f"{clock(doc, start=True)} {doc['gpu_s']:.1f} s over "
                 f"{doc['versions_measured']} versions measured, {doc['deploys']} deploys, "
                 f"{skipped} skipped{budget}.")
    if doc.get("restored"):
        lines.append(f"The box runs {doc['restored']} again.")
    if doc.get("simulated"):
        lines.append(f"{SIMULATED}: the server is the simulator; its times are simulated time, "
                     "not a real box's.")
    return "\n".join(lines)


def _headline(doc: Mapping[str, Any]) -> str:
    where = f"{doc['endpoint']} ({SIMULATED})" if doc.get("simulated") else doc["endpoint"]
    return (f"specperf bisect: {doc['good']} (good) … {doc['bad']} (bad) on {where}: "
            f"{HEADLINE[doc['status']]} (exit {doc['exit_code']}).")


def _history(doc: Mapping[str, Any]) -> list[str]:
    """Which runs of the history chose the ends (``--from-history``), if they did."""
    chosen = doc.get("from_history")
    return [f"  {history_line(chosen)}"] if chosen else []


def history_line(chosen: Mapping[str, Any]) -> str:
    """The runs that chose the ends (``HistoryEnds.to_dict()``) in a sentence."""
    good, bad = chosen["good"], chosen["bad"]
    return (f"ends from {chosen['history']}: {good['version']} ran the last passing run "
            f"{good['run_id']} ({good['created']}), {bad['version']} the first failing run "
            f"{bad['run_id']} ({bad['created']}).")


def _findings(doc: Mapping[str, Any]) -> list[str]:
    """One line per bisected factor, or why nothing was bisected."""
    if doc["status"] == "undecided" and not doc["factors"]:
        return [f"  The budget ({doc['budget_s']:g} s of {clock(doc)}) was spent before both "
                "ends were measured: raise --budget-s."]
    if doc["status"] == "not-reproduced" or not doc["factors"]:
        moved = ", ".join(f"{f.metric} {_pct(doc['ends'].get(f.name))}"
                          for f in cl.ALL_FACTORS if f.name in doc["ends"])
        unsure = [k for k, v in doc["reproduction"].items() if v == "unsure"]
        note = f"; not confirmed either way: {', '.join(unsure)}" if unsure else ""
        return [f"  No factor got worse from {doc['good']} to {doc['bad']} measured tonight "
                f"({moved}){note}: the shift is not in these versions, or not on this box now."]
    return [_factor_line(f) for f in doc["factors"]]


def to_json(doc: Mapping[str, Any]) -> str:
    return json.dumps(doc, indent=2, sort_keys=True)


# -- the HTML page ------------------------------------------------------------------------------
_W, _H, _PAD = 640.0, 220.0, 40.0


def _chart(doc: Mapping[str, Any], factor: cl.Factor) -> dict[str, Any]:
    """One factor's axis: each version a slot, each measured one a point with its interval."""
    versions = doc["versions"]
    points: list[dict[str, Any]] = []
    lows: list[float] = []
    highs: list[float] = []
    for v in versions:
        change = v["figures"].get(factor.metric, {}).get("change")
        if change:
            lows.append(float(change["low"]))
            highs.append(float(change["high"]))
    top = max([*highs, 0.01]) * 100
    bottom = min([*lows, -0.01]) * 100
    span = top - bottom or 1.0
    step = (_W - 2 * _PAD) / max(len(versions) - 1, 1)

    def y(pct: float) -> float:
        return round(_PAD / 2 + (top - pct) / span * (_H - _PAD), 1)

    culprit = next((f["first_bad"] for f in doc["factors"] if f["metric"] == factor.metric), None)
    for i, v in enumerate(versions):
        x = round(_PAD + i * step, 1)
        entry = v["figures"].get(factor.metric, {})
        change = entry.get("change")
        pct = 0.0 if v["state"] == "good end" else (100 * change["relative"] if change else None)
        points.append({
            "x": x, "name": v["name"], "state": v["state"], "culprit": v["name"] == culprit,
            "y": None if pct is None else y(pct),
            "low": y(100 * change["low"]) if change else None,
            "high": y(100 * change["high"]) if change else None,
            "label": (f"{v['name']}: {format_percent(pct / 100)}" if pct is not None else
                      f"{v['name']}: {v['state']}"),
        })
    return {"factor": factor.name, "metric": factor.metric, "width": _W, "height": _H,
            "zero": y(0.0), "top": round(top, 1), "bottom": round(bottom, 1), "points": points,
            "left": _PAD, "right": _W - _PAD}


def html(doc: Mapping[str, Any]) -> str:
    """The page: the outcome, one chart per factor, the versions' table."""
    shown = {f["metric"] for f in doc["factors"]}
    charts = [_chart(doc, f) for f in cl.ALL_FACTORS if f in cl.FACTORS or f.metric in shown]
    return template.render("bisect.html.j2", title=f"specperf bisect {doc['good']} … {doc['bad']}",
                           doc=doc, headline=_headline(doc), charts=charts,
                           clock=clock(doc, start=True),
                           factor_lines=[line.strip() for line in _findings(doc)])
