"""Baselines from several runs: a new version written from this run and the last runs of the
same deployment and fingerprint in the report directory's history, so one night's luck is not
what every later night is judged against (``--specperf-baseline-runs N``).

Per case and metric, request slot by slot (a slot is a repeat index: the first measured
request of every run, the second, ...), the merged value is the median over the runs that
measured that slot; the case's median is the median of those slot values. The spread is kept
as one run shows it: the MAD is the median of the runs' own MADs, and n the number of slots,
so a later comparison does not take the merged requests for independent ones. The file
records the runs it came from (``runs``); :attr:`Baseline.run_count` tells the judge how many
nights its run-to-run term was averaged over.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..core.fingerprint import deployment_for
from ..core.model import ContextFit, fit_repeats
from ..core.stats import Summary, summarize
from ..measure.sample import METRICS, Measurement, mean_context
from ..store.history import read_history
from .store import Baseline, CaseBaseline

HISTORY = "history.jsonl"
# case id -> metric -> request slot (repeat index) -> value
Slots = dict[str, dict[str, dict[int, float]]]


@dataclass(frozen=True)
class PastRun:
    """One earlier run's per-request values of the cases a new baseline holds."""

    run_id: str
    slots: Slots


def slots_of(measurements: Sequence[Measurement]) -> Slots:
    """This run's per-request values by case, metric and slot."""
    out: Slots = {}
    for m in measurements:
        per_metric = out.setdefault(m.case.id, {})
        for sample in m.measured:
            for metric in METRICS:
                value = sample.metric(metric)
                if value is not None:
                    per_metric.setdefault(metric, {})[sample.repeat] = float(value)
    return out


@dataclass(frozen=True)
class LeftOut:
    """An earlier run that would have been merged but regressed, and nothing accepted it:
    per regressed case, the factor its verdict named ('' when none)."""

    run_id: str
    factors: dict[str, str]


@dataclass(frozen=True)
class Selection:
    """The earlier runs a merge takes, newest first, and the regressed ones it left out."""

    runs: list[PastRun]
    left_out: list[LeftOut] = field(default_factory=list)


def past_runs(report_dir: Path, deployment: str, fingerprint: Mapping[str, Any],
              cases: Mapping[str, int], count: int, exclude: str | None = None,
              accepted: Collection[str] = ()) -> Selection:
    """Up to ``count`` runs from ``report_dir``'s history, newest first, of ``deployment``
    with this exact fingerprint, not interrupted, that measured every case of ``cases``
    (case id -> output tokens) with the same output length. Unreadable records are passed by.

    A run judged a regression enters only when it was accepted: it wrote its own baseline
    with --specperf-accept, or this update accepts a regression (``accepted``: the cases it
    accepts) and every merged case the run regressed in is among them (a fit or the sweep
    regresses through its cases); otherwise it is left out, and named."""
    found: list[PastRun] = []
    left_out: list[LeftOut] = []
    for entry in _newest_first(report_dir / HISTORY):
        if len(found) >= count:
            break
        if entry.get("run_id") == exclude or entry.get("interrupted") \
                or entry.get("fingerprint") != dict(fingerprint):
            continue
        doc = _read_json(report_dir / str(entry.get("results", "")))
        run = _eligible(doc, deployment, cases) if doc is not None else None
        if run is None or doc is None:
            continue
        regressed = _regressed(entry)
        covered = bool(accepted) and set(regressed) & set(cases) <= set(accepted)
        if regressed and not (covered or _self_accepted(doc)):
            left_out.append(LeftOut(run.run_id, regressed))
        else:
            found.append(run)
    return Selection(found, left_out)


def _regressed(entry: Mapping[str, Any]) -> dict[str, str]:
    """The cases a history line says regressed, with the factor each named."""
    factors = entry.get("failed_factors") or {}
    return {str(case): str(factors.get(case) or "") for case in entry.get("failed") or ()}


def _self_accepted(doc: Mapping[str, Any]) -> bool:
    """Whether the run itself was an accepted update (its settings carry the reason)."""
    settings = doc.get("settings") or {}
    return bool(settings.get("accept")) and bool(settings.get("update_baselines"))


def _newest_first(history: Path) -> Iterator[dict[str, Any]]:
    # The store beside the file when it holds runs, else the file (a line cut short by a
    # crash is passed by: the runs before it still count).
    yield from reversed(read_history(history))


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _eligible(doc: Mapping[str, Any], deployment: str,
              cases: Mapping[str, int]) -> PastRun | None:
    settings, server = doc.get("settings") or {}, doc.get("server") or {}
    if deployment_for(settings.get("deployment"), str(settings.get("sim_profile") or ""),
                      server) != deployment:
        return None
    measured = doc.get("measurements") or {}
    slots: Slots = {}
    for case_id, output_tokens in cases.items():
        data = measured.get(case_id)
        if not isinstance(data, dict) or \
                (data.get("case") or {}).get("output_tokens") != output_tokens:
            return None
        slots[case_id] = _sample_slots(data.get("samples") or [])
    return PastRun(str(doc.get("run_id")), slots)


def _sample_slots(samples: Sequence[Any]) -> dict[str, dict[int, float]]:
    out: dict[str, dict[int, float]] = {}
    for sample in samples:
        if not isinstance(sample, dict) or sample.get("warmup"):
            continue
        for metric in METRICS:
            value = sample.get(metric)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                out.setdefault(metric, {})[int(sample.get("repeat", 0))] = float(value)
    return out


def merged(baseline: Baseline, current: Slots, run_id: str | None,
           past: Sequence[PastRun]) -> Baseline:
    """``baseline`` (written from this run) with every case's figures merged slot by slot
    with ``past``, its context fits refitted on the merged step times, and its runs named."""
    runs = tuple(r for r in (run_id, *(p.run_id for p in past)) if r)
    if not past:
        return replace(baseline, runs=runs)
    cases = {cid: _merged_case(case, [current.get(cid, {}), *(p.slots[cid] for p in past)])
             for cid, case in baseline.cases.items()}
    return replace(baseline, cases=cases, fits={**baseline.fits, **_fits(cases)}, runs=runs)


def _merged_case(case: CaseBaseline, runs: Sequence[Mapping[str, Mapping[int, float]]]
                 ) -> CaseBaseline:
    metrics: dict[str, Summary] = dict(case.metrics)
    values: dict[str, list[float]] = dict(case.values)
    for metric in case.metrics:
        per_run = [r[metric] for r in runs if r.get(metric)]
        if len(per_run) < 2:
            continue
        slots = sorted({slot for r in per_run for slot in r})
        merged_slots = [statistics.median(r[s] for r in per_run if s in r) for s in slots]
        spread = statistics.median(summarize(list(r.values())).mad for r in per_run)
        metrics[metric] = Summary(statistics.median(merged_slots), spread, len(merged_slots))
        values[metric] = merged_slots
    return replace(case, metrics=metrics, values=values)


def _fits(cases: Mapping[str, CaseBaseline]) -> dict[str, ContextFit]:
    by_class: dict[str, list[tuple[float, list[float]]]] = {}
    for case in cases.values():
        steps = case.values.get("step_ms")
        if steps:
            point = (mean_context(case.context, case.output_tokens), steps)
            by_class.setdefault(case.text_class, []).append(point)
    fits = {name: fit_repeats(points) for name, points in by_class.items()}
    return {name: fit for name, fit in fits.items() if fit is not None}
