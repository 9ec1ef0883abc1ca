"""The nightly trend page: tok/s, step ms and avg commit per cell over the runs of the history.

It renders the fields of a :class:`specperf.record.trend.Trend` (the runs, their kinds,
cells, boundaries and deployments, and the drift scan's finding per deployment) and decides
nothing. A run sits at x = its index; a boundary before run *i* is drawn at i − ½ and listed
under the plots; each deployment gets its own colour. The markup is templates/trend.html.j2.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..core import drift
from ..record.trend import STOPPED, Trend, deployment_of, group
from . import template
from .plots import trend_plot
from .template import Cell, Table, figure, num

METRICS = (("tok_s", "tok/s", ".1f"), ("step_ms", "step ms", ".1f"),
           ("avg_commit", "avg commit", ".2f"))


def describe(trend: Trend) -> str:
    """One line for the terminal: what was plotted and what was only listed."""
    others = ", ".join(f"{n} {k}" for k, n in sorted(trend.left_out().items()))
    return (f"{len(trend.runs)} {trend.kind} runs plotted of {len(trend.all_runs)} in the "
            "history" + (f" (listed, not plotted: {others})" if others else ""))


def render(trend: Trend) -> str:
    """The trend page: one plot and one table per metric, boundaries listed."""
    return template.render("trend.html.j2", title="specperf trend", view=view(trend))


def view(trend: Trend) -> dict[str, Any]:
    """What the trend page shows, by the name of the macro that draws it."""
    return {"title": {"runs": len(trend.runs), "kind": trend.kind, "cells": len(trend.cells),
                      "scope": describe(trend)},
            **{name: build(trend) for name, build in PARTS.items()}}


def section(name: str, trend: Trend) -> str:
    """One part of the trend page alone, drawn as the page draws it."""
    return template.fragment("trend_parts.html.j2", name, PARTS[name](trend))


def _metrics(trend: Trend) -> list[dict[str, Any]]:
    """Per metric any plotted run measured: its plot over runs and its table."""
    labels = trend.short_labels()
    several = len(set(trend.deployments)) > 1
    out = []
    for metric, label, fmt in METRICS:
        series = trend.series(metric)
        if not any(v is not None for values in series.values() for v in values):
            continue
        svg = trend_plot(f"t-{metric}", label, labels, series, trend.boundaries,
                         trend.deployments if several else None)
        what = ("colour: deployment, marker: cell" if several else "one line per cell")
        out.append({"id": metric, "label": label, "figure": figure(
            metric, svg, f"{label} per cell over runs ({what}); dotted lines: boundaries "
                         "B1, B2, … listed above; x: each run's start (MM-DD HH:MM, from its id)."),
            "table": _metric_table(metric, fmt, labels, series)})
    return out


def _boundaries(trend: Trend) -> list[tuple[str, str, str]]:
    """(tag, run, what changed): the tag marks the boundary's line on the plots."""
    labels = trend.run_labels()
    return [(f"B{n}", labels[i], text) for n, (i, text) in enumerate(trend.boundaries, 1)]


def baseline_text(run: Mapping[str, Any]) -> str:
    """The baseline a run was judged against; a concurrency run's is its concurrency baseline."""
    base = run.get("baseline")
    if base:
        return f"{base['deployment']} v{base['version']}"
    levels = run.get("concurrency_baseline")
    return f"{levels['deployment']} v{levels['version']} (concurrency)" if levels else "none"


def _runs_table(trend: Trend) -> Table:
    rows, attrs = [], []
    for run in trend.all_runs:
        kind = group(run)
        cls = "warn" if kind in (*STOPPED, "interrupted") else ""
        rows.append([Cell(run.get("run_id", "")), Cell(run.get("created", "")),
                     Cell(run.get("kind_label") or kind, {"class": cls}),
                     Cell(deployment_of(run, trend.all_runs)),
                     Cell(run.get("label", "")), Cell(baseline_text(run)),
                     Cell(run.get("git_revision", "")),
                     Cell(", ".join(run.get("failed", [])) or "—"),
                     Cell("; ".join(run.get("errors", [])[:2]) or "—")])
        attrs.append({"data-kind": kind, "data-plotted": "yes" if kind == trend.kind else "no"})
    return Table(["run", "ended", "kind", "deployment", "server", "baseline", "git", "regressed",
                  "errors"], rows, "runs", attrs)


def _metric_table(metric: str, fmt: str, labels: Sequence[str],
                  series: Mapping[str, Sequence[float | None]]) -> Table:
    rows, attrs = [], []
    for cell, values in series.items():
        rows.append([Cell(cell), *(num("" if v is None else format(v, fmt)) for v in values)])
        attrs.append({"data-cell": cell, "data-points": sum(v is not None for v in values)})
    return Table(["cell", *labels], rows, f"trend trend-{metric}", attrs)


# -- drift (core/drift.py): persistent shifts below the per-run tolerance -----------------------
def drift_lines(trend: Trend) -> list[str]:
    """One sentence per flag the scan raised, for the nightly job's log."""
    return [line.log for line in trend.drift if line.log]


def _drift(trend: Trend) -> dict[str, Any]:
    return {"lines": [(line.status, line.text) for line in trend.drift], "window": drift.WINDOW}

# The page's parts, each drawn by the macro of the same name in trend.html.j2.
PARTS: dict[str, Callable[[Trend], Any]] = {
    "runs": _runs_table, "boundaries": _boundaries, "drift": _drift, "metrics": _metrics}
