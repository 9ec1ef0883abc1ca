"""The nightly trend as data: the runs of the history (history.jsonl or the results store,
read by :func:`specperf.store.history.read_history`), grouped into comparable kinds, their
cells, the boundaries where a comparison changed meaning, each run's deployment, and the drift
scan's finding per deployment (:func:`specperf.core.drift.scan`). The page is
:mod:`specperf.views.trend`'s; it renders these fields and decides nothing.

Boundaries mark where the comparison changed meaning: a new baseline version, or a server
fingerprint that differs from the previous run's (a drafter deploy shows as
``fingerprint: draft model: a → b``).

Like is compared with like: the plots hold only complete runs of one kind (full sweeps by
default; ``--kind gate`` for the gate's runs). Every run is still listed, with its kind, so
an outage (every case errored: the box was down), a lock timeout, a missing baseline, a usage
error, an interrupted run, a gate run, a custom context list or a subset shows as such instead
of as a silent gap or a misleading point. A concurrency run (only the concurrency_scaling
tests) is its own kind, listed with the concurrency baseline it was judged against; its levels
live in its results.json, not in the history's cells.

Runs of different deployments are never one series: each deployment (:func:`deployment_of`)
gets its own boundaries and its own drift scan, which says *undetermined* until a deployment
has the nights it needs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..core import drift
from ..core.fingerprint import deployment_for, fingerprint_differences
from ..core.noise import DEFAULT_NIGHT_WINDOW_H, nights_of

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
    # The drift scan's finding per deployment (core/drift.py scan), computed by build().
    drift: tuple[drift.ScanLine, ...] = ()

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
    found = Trend(runs, cells, _boundaries_by_deployment(runs, deployments), list(every), kind,
                  deployments, night_window_h)
    return replace(found, drift=tuple(drift_scan(found)))


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



def nights(trend: Trend) -> drift.Nights:
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
    return drift.Nights(cells, sorted({night_of[i] for i, _ in trend.boundaries}), labels)


def drift_scan(trend: Trend) -> list[drift.ScanLine]:
    """The drift scan of each deployment's nights (each scanned alone, its own boundaries);
    nothing for a deployment without runs or cells (``--kind`` naming a kind the history
    does not hold)."""
    parts = trend.by_deployment()
    out: list[drift.ScanLine] = []
    for name, part in parts.items():
        if part.runs and part.cells:
            out += drift.scan(nights(part), name if len(parts) > 1 else "")
    return out
