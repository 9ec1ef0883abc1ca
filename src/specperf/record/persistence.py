"""A regression that persists: tonight's failure, and the nights before it that failed the same
way against the same baseline.

A persistent regression fails every night, as it must; what tells a reader it is not a new one
is the streak: the same cases (and, where both nights' records name it, the same factor) failed
on every night back to the streak's first, against the same baseline version of the same box.
Nights are :func:`specperf.core.noise.nights_of`'s (runs back to back are one night), so a run
repeated tonight never lengthens the streak. The record keeps the streak as data
(``persists``); the views say it in words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..core.contract import REGRESSION
from ..core.noise import DEFAULT_NIGHT_WINDOW_H, nights_of


def failed_factors(verdicts: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Each regressed verdict's case id and the factor it names ('' when it names none)."""
    return {str(v["case_id"]): str(v.get("factor") or "") for v in verdicts
            if v.get("status") == REGRESSION}


def failed_sizes(verdicts: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, list[float]]]:
    """Each regressed verdict's size: per metric beyond its limit, [change, low, high]."""
    out: dict[str, dict[str, list[float]]] = {}
    for v in verdicts:
        if v.get("status") != REGRESSION:
            continue
        out[str(v["case_id"])] = {
            m: [round(float(d[k]), 5) for k in ("change", "low", "high")]
            for m, d in (v.get("details") or {}).items()
            if isinstance(d, Mapping) and all(isinstance(d.get(k), (int, float))
                                              for k in ("change", "low", "high", "limit"))
            and d["limit"] != 0 and d["change"] / d["limit"] > 1.0}
    return out


def streak(doc: Mapping[str, Any], entries: Sequence[Mapping[str, Any]],
           window_h: float = DEFAULT_NIGHT_WINDOW_H) -> dict[str, Any] | None:
    """The nights, tonight's included, on which the cases that regressed tonight regressed too,
    back to the first night that did not, against the same baseline on the same box; None when
    tonight regressed nowhere or no earlier night shares it.

    ``entries``: the history's lines (oldest first) of this box (its label); tonight's run is
    not among them, earlier runs of tonight may be."""
    tonight = failed_factors(doc.get("verdicts") or [])
    base = doc.get("baseline") or {}
    if not tonight or not base:
        return None
    sizes = failed_sizes(doc.get("verdicts") or [])
    same = [e for e in entries if e.get("run_id") != doc.get("run_id")
            and _baseline(e) == (base.get("deployment"), base.get("version"))
            and not e.get("interrupted") and not e.get("outage")]
    nights = nights_of([*same, {"created": doc.get("created")}], window_h)
    nights[-1] = nights[-1][:-1]  # tonight's earlier runs, without tonight's own
    cases, since, count, runs = set(tonight), str(doc.get("created")), 1, 1
    for i, night in enumerate(reversed(nights)):
        matched = [(e, found) for e in night if (found := _shared(e, tonight, sizes) & cases)]
        if not matched:
            if i == 0:
                continue
            break
        if i > 0:  # tonight's own earlier runs: the same night, never a night more
            cases = {c for _, found in matched for c in found}  # found ⊆ cases already
            count += 1
        since, runs = str(matched[0][0].get("created")), runs + len(matched)
    if count < 2:
        return None
    factors = {tonight[c] for c in cases}
    return {"since": since, "nights": count, "runs": runs, "cases": sorted(cases),
            "factor": factors.pop() if len(factors) == 1 else ""}


def _baseline(entry: Mapping[str, Any]) -> tuple[Any, Any]:
    base = entry.get("baseline") or {}
    return base.get("deployment"), base.get("version")


def _shared(entry: Mapping[str, Any], tonight: Mapping[str, str],
            sizes: Mapping[str, Mapping[str, Sequence[float]]]) -> set[str]:
    """Tonight's regressed cases that ``entry`` failed too, by the same factor and size where
    both records name them."""
    factors = entry.get("failed_factors") or {}
    then_sizes = entry.get("failed_sizes") or {}
    found: set[str] = set()
    for case in entry.get("failed") or ():
        then = str(factors.get(case) or "")
        if case in tonight and (not then or not tonight[case] or then == tonight[case]) \
                and _same_size(sizes.get(case), then_sizes.get(case)):
            found.add(case)
    return found


def _same_size(now: Mapping[str, Sequence[float]] | None,
               then: Mapping[str, Sequence[float]] | None) -> bool:
    """Whether two regressions are one size: on every metric both name, either change lies in
    the other's interval (a record without sizes, written before them, matches)."""
    if not now or not then:
        return True
    common = set(now) & set(then)
    return bool(common) and all(_within(now[m], then[m]) for m in common)


def _within(a: Sequence[float], b: Sequence[float]) -> bool:
    return b[1] <= a[0] <= b[2] or a[1] <= b[0] <= a[2]
