"""Reading the parts of a results document the record and its views both need: a recorded
case's medians, its mean context, the baseline's summaries of it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.stats import MAD_TO_SIGMA, median_se
from ..judge.pathverdict import COMPARISONS
from ..measure import sample


def median(measurement: Mapping[str, Any], metric: str) -> float | None:
    """A recorded measurement's median of ``metric`` (None when it was not measured)."""
    entry = measurement["summaries"].get(metric)
    return None if entry is None else float(entry["median"])


def median_rel_se(measurement: Mapping[str, Any], metric: str) -> float | None:
    """The relative standard error of a recorded median, from its requests' MAD (None when
    it was not measured or has no spread recorded)."""
    entry = measurement["summaries"].get(metric)
    if entry is None or not entry.get("median") or not entry.get("n"):
        return None
    sd = MAD_TO_SIGMA * float(entry.get("mad", 0.0)) / float(entry["median"])
    return median_se(abs(sd), int(entry["n"]))


def mean_context(case: Mapping[str, Any]) -> float:
    """A recorded case's context averaged over its decode (``measure.sample.mean_context``)."""
    return sample.mean_context(case["context"], case["output_tokens"])


def baseline_metrics(doc: Mapping[str, Any], case: Mapping[str, Any]) -> dict[str, Any]:
    """The baseline's summaries of a case, if it measured the same case (output length too)."""
    entry = ((doc.get("baseline") or {}).get("cases") or {}).get(case["id"])
    if not entry or entry["output_tokens"] != case["output_tokens"]:
        return {}
    metrics: dict[str, Any] = entry["metrics"]
    return metrics


def scope_of(verdict: Mapping[str, Any]) -> str:
    """What a recorded verdict judged (core/verdict.py Scope: case, fit, sweep, path,
    concurrency): its ``scope`` field. A record written before 0.3 has none; its kind is read
    from its id and details the way those records wrote them (a sweep's details are per
    factor, a path's id ends with its comparison, a slope's with "-fit")."""
    scope = verdict.get("scope")
    if scope:
        return str(scope)
    case = str(verdict.get("case_id", ""))
    details = verdict.get("details") or {}
    if case == "sweep" or any(k in ("tok/s", "step") or str(k).startswith("acceptance:")
                              for k in details):
        return "sweep"
    if case.endswith(COMPARISONS):
        return "path"
    return "fit" if case.endswith("-fit") else "case"
