"""The nightly trend: tok/s, step ms and avg commit per cell over the runs in history.jsonl.

Each line of the history is one run (:func:`specperf.record.files.history_entry`). Boundaries
mark where the comparison changed meaning: a new baseline version, or a server
fingerprint that differs from the previous run's (a drafter deploy shows as
``fingerprint: draft model: a → b``). A run sits at x = its index; a boundary before
run *i* is drawn at i − ½ and listed under the plots.

Like is compared with like: the plots hold only complete runs of one kind (full sweeps by
default; ``--kind gate`` for the gate's runs). Every run is still listed, with its kind, so
an outage (every case errored: the box was down), a lock timeout, a missing baseline, a usage
error, an interrupted run, a gate run, a custom context list or a subset shows as such instead
of as a silent gap or a misleading point. A concurrency run (only the concurrency_scaling
tests) is its own kind, listed with the concurrency baseline it was judged against; its levels
live in its results.json, not in the history's cells.

Runs of different deployments are never one series: each deployment (:func:`deployment_of`)
gets its own colour, its own boundaries and its own drift scan, which says *undetermined*
until a deployment has the nights it needs. The markup is templates/trend.html.j2.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core import drift
from ..core.errors import ConfigError
from ..core.fingerprint import deployment_for, fingerprint_differences
from ..core.noise import DEFAULT_NIGHT_WINDOW_H, nights_of
from . import template
from .plots import trend_plot
from .template import Cell, Table, figure, num

METRICS = (("tok_s", "tok/s", ".1f"), ("step_ms", "step ms", ".1f"),
           ("avg_commit", "avg commit", ".2f"))


def load_history(path: Path) -> list[dict[str, Any]]:
    """Every run in a history file, oldest first; a bad line is a ConfigError naming it."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read history {path}: {exc}. Perf runs append to "
                          "reports/history.jsonl; pass --history.") from exc
    entries = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path} line {number} is not JSON ({exc}): remove or fix "
                              "that line.") from exc
        if not isinstance(entry, dict) or not isinstance(entry.get("cells"), dict):
            raise ConfigError(f"{path} line {number} is not a specperf history entry "
                              "(no 'cells'): remove or fix that line.")
        entries.append(entry)
    if not entries:
        raise ConfigError(f"{path} holds no runs yet: run the perf tests first.")
    return entries


STOPPED = ("outage", "lock-timeout", "no-baseline", "config-error", "unstable")
GROUPS = ("full", "custom", "gate", "ab", "subset", "concurrency", "interrupted", *STOPPED,
          "empty")


def group(run: Mapping[str, Any]) -> str:
    """Which runs a run is comparable with: its kind (a custom context list is ``custom``,
    never ``full``), unless nothing was measured (why: record/runkind.py's ``stopped_by``), it
    was interrupted, or it holds nothing at all (a line an older suite wrote for a
    ``--collect-only`` session). A concurrency run has no cells (its levels are not context
    cases) and is still a concurrency run. History lines written before run kinds existed are
    complete full sweeps."""
    if run.get("stopped_by") in STOPPED:
        return str(run["stopped_by"])
    if run.get("outage"):
        return "outage"
    if run.get("interrupted"):
        return "interrupted"
    if run.get("kind") == "concurrency":
        return "concurrency"
    if not run.get("cells") and not run.get("error_count") and not run.get("failed"):
        return "empty"
    return str(run.get("kind") or "full")


@dataclass(frozen=True)
class Trend:
    """The plotted runs (one comparable kind) in order, every run of the history for the
    list, the cells the plotted runs measured, and the labelled boundaries."""

    runs: list[dict[str, Any]]
    cells: list[str]
    boundaries: list[tuple[int, str]]
    all_runs: list[dict[str, Any]] = field(default_factory=list)
    kind: str = "full"
    deployments: list[str] = field(default_factory=list)  # each plotted run's deployment
    night_window_h: float = DEFAULT_NIGHT_WINDOW_H  # the noise model's nights (core/noise.py)

    def left_out(self) -> dict[str, int]:
        """How many runs of each other kind the plots leave out (listed, not plotted)."""
        counts: dict[str, int] = {}
        for run in self.all_runs:
            if group(run) != self.kind:
                counts[group(run)] = counts.get(group(run), 0) + 1
        return counts

    def series(self, metric: str) -> dict[str, list[float | None]]:
        """Per cell, the metric's median in each run (None where the run lacks the cell)."""
        return {cell: [_value(run, cell, metric) for run in self.runs] for cell in self.cells}

    def run_labels(self) -> list[str]:
        return [str(run.get("run_id", i)) for i, run in enumerate(self.runs)]

    def short_labels(self) -> list[str]:
        """Each run's x label: when it started, 'MM-DD HH:MM' from its id (seconds, then the
        id's tail, only where two would read the same); the runs table holds the whole id."""
        return short_labels(self.run_labels())

    def by_deployment(self) -> dict[str, Trend]:
        """The plotted runs split by deployment, each with its own boundaries (one deployment:
        this trend)."""
        names = list(dict.fromkeys(self.deployments))
        if len(names) <= 1:
            return {names[0] if names else "": self}
        out = {}
        for name in names:
            runs = [r for r, d in zip(self.runs, self.deployments, strict=True) if d == name]
            out[name] = Trend(runs, self.cells, boundaries(runs), runs, self.kind,
                              [name] * len(runs), self.night_window_h)
        return out


def _value(run: Mapping[str, Any], cell: str, metric: str) -> float | None:
    value = (run["cells"].get(cell) or {}).get(metric)
    return None if value is None else float(value)


def build(entries: Sequence[dict[str, Any]], kind: str = "full",
          night_window_h: float = DEFAULT_NIGHT_WINDOW_H) -> Trend:
    every = sorted(entries, key=lambda e: (str(e.get("created", "")), str(e.get("run_id", ""))))
    runs = [run for run in every if group(run) == kind]
    cells = sorted({c for run in runs for c in run["cells"]}, key=_cell_key)
    deployments = [deployment_of(run, runs) for run in runs]
    return Trend(runs, cells, _boundaries_by_deployment(runs, deployments), list(every), kind,
                 deployments, night_window_h)


def deployment_of(run: Mapping[str, Any], runs: Sequence[Mapping[str, Any]] = ()) -> str:
    """Which deployment a run measured: the history line's own ``deployment`` when it has
    one; else the baseline it was judged against (a concurrency run: its concurrency
    baseline); else (a run that wrote the first baseline,
    or judged nothing) the deployment of the nearest run of the same endpoint that names
    one; else the name its server's fingerprint gives (servers/fingerprint.py)."""
    if run.get("deployment"):
        return str(run["deployment"])
    for base in (run.get("baseline"), run.get("concurrency_baseline")):
        if base and base.get("deployment"):
            return str(base["deployment"])
    same = [r for r in runs if r.get("label") and r.get("label") == run.get("label")
            and (r.get("deployment") or r.get("baseline") or r.get("concurrency_baseline"))]
    if same:
        index = runs.index(run) if run in runs else 0
        near = min(same, key=lambda r: abs(runs.index(r) - index))
        return deployment_of(near)
    fingerprint = run.get("fingerprint") or {}
    return deployment_for(None, str(fingerprint.get("sim_profile") or "?"),
                          {"simulated": run.get("simulated"), "fingerprint": fingerprint})


def _boundaries_by_deployment(runs: Sequence[Mapping[str, Any]], deployments: Sequence[str]
                              ) -> list[tuple[int, str]]:
    """:func:`boundaries` within each deployment's runs, at their places in ``runs``: runs of
    another deployment between two nights of one are no change of that one."""
    names = list(dict.fromkeys(deployments))
    if len(names) <= 1:
        return boundaries(runs)
    out = []
    for name in names:
        where = [i for i, d in enumerate(deployments) if d == name]
        for i, text in boundaries([runs[i] for i in where]):
            out.append((where[i], text if text.startswith("baseline ") else f"{name}: {text}"))
    return sorted(out)


_RUN_ID = re.compile(r"^\d{4}(\d{2})(\d{2})-(\d{2})(\d{2})(\d{2})")


def short_labels(run_ids: Sequence[str]) -> list[str]:
    """'12-03 09:27' for a run id '20261203-092719-8535'; with the seconds, then the id's
    tail, only where two runs would read the same; an id of another shape as it is."""
    def label(run_id: str, detail: int) -> str:
        found = _RUN_ID.match(run_id)
        if found is None:
            return run_id
        month, day, hour, minute, second = found.groups()
        text = f"{month}-{day} {hour}:{minute}" + (f":{second}" if detail else "")
        return text + (f" {run_id[found.end() + 1:]}" if detail > 1 else "")

    out = [label(r, 0) for r in run_ids]
    for detail in (1, 2):
        clash = {x for x in out if out.count(x) > 1}
        out = [label(r, detail) if x in clash else x for r, x in zip(run_ids, out, strict=True)]
    return out


def describe(trend: Trend) -> str:
    """One line for the terminal: what was plotted and what was only listed."""
    others = ", ".join(f"{n} {k}" for k, n in sorted(trend.left_out().items()))
    return (f"{len(trend.runs)} {trend.kind} runs plotted of {len(trend.all_runs)} in the "
            "history" + (f" (listed, not plotted: {others})" if others else ""))


def _cell_key(cell: str) -> tuple[str, int]:
    name, _, ctx = cell.partition("-ctx")
    return (name, int(ctx)) if ctx.isdigit() else (cell, 0)


def boundaries(runs: Sequence[Mapping[str, Any]]) -> list[tuple[int, str]]:
    """(run index, label) where the baseline version or the server fingerprint changed."""
    out: list[tuple[int, str]] = []
    previous: Mapping[str, Any] | None = None
    for i, run in enumerate(runs):
        base = run.get("baseline")
        if base and (previous is None or base != previous.get("baseline")):
            why = f" ({base['reason']})" if base.get("reason") else ""
            out.append((i, f"baseline {base['deployment']} v{base['version']}{why}"))
        if previous is not None:
            changes = fingerprint_differences(previous.get("fingerprint") or {},
                                              run.get("fingerprint") or {})
            if changes:
                out.append((i, "fingerprint: " + "; ".join(changes)))
        previous = run
    return out


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


# -- drift (drift.py): persistent shifts below the per-run tolerance --------------------------
@dataclass(frozen=True)
class Nights:
    """The plotted runs grouped into nights as the noise model groups them (core/noise.py's
    nights_of): per cell a night's geometric mean, the boundaries at the nights they fall in,
    and each night named by its first run."""

    cells: dict[str, list[float | None]]
    boundaries: list[int]
    labels: list[str]


def nights(trend: Trend) -> Nights:
    """``trend``'s runs as nights (a night's runs: back-to-back runs, CI retries, count once)."""
    grouped = nights_of(trend.runs, trend.night_window_h)
    night_of = [n for n, night in enumerate(grouped) for _ in night]
    labels = [str(night[0].get("run_id", n)) for n, night in enumerate(grouped)]
    cells: dict[str, list[float | None]] = {}
    for metric in ("step_ms", "avg_commit"):
        for cell, values in trend.series(metric).items():
            per: list[list[float]] = [[] for _ in grouped]
            for i, value in enumerate(values):
                if value is not None and value > 0:
                    per[night_of[i]].append(math.log(value))
            cells[f"{metric}|{cell}"] = [math.exp(sum(v) / len(v)) if v else None for v in per]
    return Nights(cells, sorted({night_of[i] for i, _ in trend.boundaries}), labels)


def drift_flags(trend: Trend) -> list[drift.DriftFlag]:
    """Change points per factor and per case over nights; the reference restarts at every
    boundary. None without runs or cells (``--kind`` naming a kind the history does not
    hold)."""
    if not trend.runs or not trend.cells:
        return []
    found = nights(trend)
    return drift.detect_all(found.cells, found.boundaries)


def drift_lines(trend: Trend) -> list[str]:
    """One sentence per flag, for the nightly job's log (each deployment scanned alone)."""
    parts = trend.by_deployment()
    out = []
    for name, part in parts.items():
        labels = nights(part).labels if part.runs else []
        who = f"{name}: " if len(parts) > 1 else ""
        out += [f"drift: {who}{flag.sentence(labels)}" for flag in drift_flags(part)]
    return out


def drift_status(trend: Trend) -> list[tuple[str, str]]:
    """Per deployment, what the scan found: ('flag', sentence) per flag; else whether its last
    night could be judged at all: ('undetermined', why) until it has ``min_reference``
    nights since its last boundary and ``window`` after them, else ('pass', …)."""
    scan, out = drift.DRIFT_SCAN, []
    parts = trend.by_deployment()
    for name, part in parts.items():
        if not part.runs or not part.cells:
            continue
        who = f" ({name})" if len(parts) > 1 else ""
        found = nights(part)
        flags = drift.detect_all(found.cells, found.boundaries)
        if flags:
            out += [("flag", f"drift{who}: {f.sentence(found.labels)}") for f in flags]
            continue
        since = len(found.labels) - max(found.boundaries, default=0)
        needed = scan.min_reference + scan.window
        if since < needed:
            out.append(("undetermined", (
                f"Drift undetermined{who}: the scan compares the last {scan.window} nights "
                f"with at least {scan.min_reference} before them, since the last boundary. It "
                f"has {since} of the {needed} nights it needs: {needed - since} more.")))
        else:
            out.append(("pass", (
                f"No persistent shift{who}: no factor or case moved over the last "
                f"{scan.window} nights against the {since - scan.window} before them "
                f"(drift.py).")))
    return out


def _drift(trend: Trend) -> dict[str, Any]:
    return {"lines": drift_status(trend), "window": drift.WINDOW}


# The page's parts, each drawn by the macro of the same name in trend.html.j2.
PARTS: dict[str, Callable[[Trend], Any]] = {
    "runs": _runs_table, "boundaries": _boundaries, "drift": _drift, "metrics": _metrics}
