"""A bisect's outcome as text, as JSON, and as an HTML page (views/templates/bisect.html.j2).

Every view renders :func:`to_dict`'s document, so the three say the same thing. On a
simulator (the probe says so, ``simulated`` in the document) every view says SIMULATED and
its seconds are simulated time, not a GPU's.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.limits import format_ci, format_percent
from ..views import template
from ..views.explaincard import SIMULATED
from ..views.headline import FACTORS
from ..views.screen import wrap
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


# A factor's metric on the screen: its words, and the closing block's factor whose hint says
# what to check when it got worse (views/headline.py FACTORS).
_WORDS = {"avg_commit": ("avg commit", "acceptance"), "step_ms": ("step time", "step"),
          "ttft_ms": ("prefill (TTFT)", "prefill"), "tok_s": ("tok/s", "unexplained")}
_COLUMNS = {"avg_commit": "avg commit", "step_ms": "step ms", "ttft_ms": "TTFT ms",
            "tok_s": "tok/s"}


def _hint(metric: str) -> str:
    """' — check the kernels, attention backend and KV cache' ('' for no hint)."""
    hint = FACTORS[_WORDS[metric][1]][2].partition(": ")[2]
    return f" \u2014 {hint}" if hint else ""


def _among(names: Sequence[str]) -> str:
    """'one of v07, v08, v09'; a longer range by its ends ('one of the 6 versions v04 … v09')."""
    if len(names) <= 3:
        return f"one of {', '.join(names)}"
    return f"one of the {len(names)} versions {names[0]} \u2026 {names[-1]}"


def _cause_line(f: Mapping[str, Any], doc: Mapping[str, Any]) -> str:
    """A bisected factor: its size at the culprit, the range's, where it moved, what to check."""
    words = _WORDS[f["metric"]][0]
    if not words.startswith(f["factor"]):  # 'acceptance: avg commit', but 'step time' once
        words = f"{f['factor']}: {words}"
    whole = (f"{format_percent(f['regression']['relative'])} from {doc['good']} to "
             f"{doc['bad']}")
    if f["status"] == "found":
        step = f["culprit_change"]
        size = f"{_pct(step)} " if step else ""
        return (f"{words} {size}at {f['first_bad']}, the first bad version "
                f"({f['last_good']} the last good); {whole}{_hint(f['metric'])}")
    return (f"{words} {whole}; the first bad version is "
            f"{_among(f['candidates'])}: {f['reason']}{_hint(f['metric'])}")


def _decision(doc: Mapping[str, Any]) -> str:
    """'specperf bisect: culprit found (exit 0): v02 made acceptance worse, v03 made step time
    worse.' — the answer, which version and which factor."""
    head = f"specperf bisect: {HEADLINE[doc['status']]} (exit {doc['exit_code']})"
    answers = [f"{f['first_bad']} made {f['factor']} worse" if f["status"] == "found" else
               f"{f['factor']} got worse at {_among(f['candidates'])}"
               for f in doc["factors"]]
    if answers:
        return f"{head}: {', '.join(answers)}."
    if doc["status"] == "undecided":
        return f"{head}: no version was judged."
    return f"{head}: no factor got worse at {doc['bad']}."


def _version_row(v: Mapping[str, Any], shown: Sequence[str], bisected: Mapping[str, str]
                 ) -> list[str]:
    """A measured version's cells: its medians (the good end) or its changes against them,
    each bisected factor's verdict beside its metric."""
    cells = [v["name"], v["state"], str(v["requests_per_case"] or "")]
    for metric in shown:
        entry = v["figures"].get(metric)
        change = entry.get("change") if entry else None
        cell = format_percent(change["relative"]) if change else \
            (f"{entry['median']:.4g}" if entry else "")
        verdict = v["verdicts"].get(bisected.get(metric, ""))
        cells.append(f"{cell} {verdict}" if verdict and change else cell)
    return cells


def _rows(doc: Mapping[str, Any], shown: Sequence[str]) -> list[list[str] | str]:
    """A row of cells per version, a run of unmeasured ones one line ('v04 … v06 not
    measured (3 versions)')."""
    bisected = {f["metric"]: f["factor"] for f in doc["factors"]}
    rows: list[list[str] | str] = []
    gap: list[str] = []
    for v in [*doc["versions"], None]:
        if v is not None and v["state"] == "not measured":
            gap.append(v["name"])
            continue
        if gap:
            rows.append(f" {', '.join(gap)} not measured" if len(gap) <= 2 else
                        f" {gap[0]} \u2026 {gap[-1]} not measured ({len(gap)} versions)")
            gap = []
        if v is not None:
            rows.append(_version_row(v, shown, bisected))
    return rows


def _versions_table(doc: Mapping[str, Any]) -> list[str]:
    """The range's versions under a header, each column as wide as its widest cell."""
    shown = [m for m in _COLUMNS if any(m in v["figures"] for v in doc["versions"])]
    header = ["version", "state", "req/case", *(_COLUMNS[m] for m in shown)]
    rows = _rows(doc, shown)
    tables = [header, *(r for r in rows if isinstance(r, list))]
    widths = [max(len(t[i]) for t in tables) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        out = [c.ljust(w) if i < 2 else c.rjust(w)
               for i, (c, w) in enumerate(zip(cells, widths, strict=True))]
        return " " + " | ".join(out).rstrip()

    title = (f"versions of the range: {doc['good']}'s medians, then each version's change "
             "against them and its verdict")
    return [wrap(title), line(header), "-" * len(line(header)),
            *(line(r) if isinstance(r, list) else r for r in rows)]


def text(doc: Mapping[str, Any], where: Sequence[str] = ()) -> str:
    """The terminal summary, its answer first: the decision (which version, which factor), a
    line per bisected factor with what to check, the skipped versions, what was compared and
    what it cost, ``where`` (the page), then the versions' table; every line at most
    :data:`~specperf.views.screen.WIDTH` columns (the JSON keeps every figure)."""
    lines = [_decision(doc), *_findings(doc), *_skipped(doc), _compared(doc), *_history(doc),
             _cost(doc), *where]
    return "\n".join([*(wrap(line) for line in lines), *_versions_table(doc)])


def _skipped(doc: Mapping[str, Any]) -> list[str]:
    """One line per reason versions were skipped (never blamed)."""
    reasons: dict[str, list[str]] = {}
    for v in doc["versions"]:
        if v["state"] == "skipped":
            reasons.setdefault(str(v["skipped"]), []).append(v["name"])
    return [f"  skipped {', '.join(names)}, never blamed: {why}"
            for why, names in reasons.items()]


def _compared(doc: Mapping[str, Any]) -> str:
    """'  v00 (good) … v15 (bad) on URL (SIMULATED): 6 of 16 versions measured, each against
    tonight's v00.'"""
    where = f"{doc['endpoint']} ({SIMULATED})" if doc.get("simulated") else doc["endpoint"]
    measured = sum(1 for v in doc["versions"] if v["requests_per_case"])
    return (f"  {doc['good']} (good) \u2026 {doc['bad']} (bad) on {where}: {measured} of "
            f"{len(doc['versions'])} versions measured, each against tonight's {doc['good']}.")


def _cost(doc: Mapping[str, Any]) -> str:
    """'  cost: 96.0 s of simulated time, 6 deploys; the box runs v15 again.'"""
    budget = f" (budget {doc['budget_s']:g} s)" if doc["budget_s"] is not None else ""
    restored = f"; the box runs {doc['restored']} again" if doc.get("restored") else ""
    deploys = f"{doc['deploys']} deploy{'s' if doc['deploys'] != 1 else ''}"
    return f"  cost: {doc['gpu_s']:.1f} s of {clock(doc)}{budget}, {deploys}{restored}."


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
        moved = ", ".join(f"{_WORDS[f.metric][0]} {_pct(doc['ends'].get(f.name))}"
                          for f in cl.ALL_FACTORS if f.name in doc["ends"])
        unsure = [k for k, v in doc["reproduction"].items() if v == "unsure"]
        lines = [f"  tonight {doc['good']} \u2192 {doc['bad']}: {moved}."]
        if unsure:
            lines.append(f"  Not confirmed either way: {', '.join(unsure)}.")
        return [*lines, "  The shift is not in these versions, or not on this box now."]
    return [f"  {_cause_line(f, doc)}" for f in doc["factors"]]


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
                           doc=doc, headline=_decision(doc), charts=charts,
                           clock=clock(doc, start=True),
                           factor_lines=[line.strip() for line in
                                         [*_findings(doc), *_skipped(doc), _compared(doc)]])
