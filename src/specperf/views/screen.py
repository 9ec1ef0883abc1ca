"""The closing block's first screen: the decision, its root causes, what the run could see,
then the table — one screen of at most :data:`WIDTH` columns, in plain words.

A person reads this first, so it says each thing once, in the order they act on it:

1. the decision (PASS, FAIL or UNDETERMINED) and the factor that moved;
2. one line per root cause — a factor that regressed, its size, its interval (at the level
   that decided it, the only interval the screen shows for that quantity) and where it moved;
3. what could not decide, what moved inside its tolerance, what errored: one line each;
4. what the run could have seen ("would have caught a step-time rise of 13% or more");
5. what it was compared with, and the table.

Every line is built from the record's fields (statuses, factors, ``details``, ``resolution``,
``persists``), never from a verdict's sentence; the sentences, fits and per-verdict reasons
are the detail (``-v``, :func:`specperf.views.summary.render`) and report.html.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from ..core import contract
from ..core.contract import IMPROVED, NOTED, REGRESSION, UNDETERMINED
from ..core.limits import format_ci, format_percent, format_share, format_value
from ..record.readers import scope_of
from . import decision
from .headline import FACTORS, factor, is_sweep, sweep_factors

WIDTH = 100
# A factor that regressed: the case metric and the sweep factor that carry its size.
_METRIC = {"step": ("step_ms", "step", "step time", " ms"),
           "acceptance": ("avg_commit", "acceptance", "avg commit", ""),
           "prefill": ("ttft_ms", "", "prefill (TTFT)", " ms"),
           "unexplained": ("tok_s", "tok/s", "tok/s", ""),
           "parser": ("tok_s", "", "chat tok/s vs native", ""),
           "stream": ("step_ms", "", "server step time while streaming", " ms"),
           "transport": ("delivery_tok_s", "", "client delivery vs server decode", "")}
# What a resolution's factor would have caught, in plain words.
_CAUGHT = {"tok_s": "a tok/s drop", "step_ms": "a step-time rise",
           "avg_commit": "an avg-commit drop"}


def render(doc: Mapping[str, Any], context: Sequence[str], table: Sequence[str],
           skipped: Mapping[str, str] | None = None, notes: Sequence[str] = ()) -> list[str]:
    """The first screen: decision, root causes, ``notes`` (what makes this server unlike the
    one compared with: a changed fingerprint, an A/B run), the other words, what the run
    could see, ``context`` (what it was compared with, wrapped here) and ``table``."""
    verdicts: list[Mapping[str, Any]] = list(doc.get("verdicts") or [])
    lines = [decision_line(doc)]
    lines += [wrap(f"  {line}") for line in cause_lines(verdicts, list(doc.get("measurements")
                                                                       or {}))]
    lines += [wrap(line) for line in notes]
    lines += [wrap(f"  {line}") for line in other_lines(doc, skipped or {})]
    seen = could_see(doc)
    if seen:
        lines.append(wrap(f"  {seen}"))
    lines += [wrap(line) for line in context]
    return lines + list(table)


def wrap(text: str) -> str:
    """A line of at most :data:`WIDTH` columns, continued four columns further in (so a
    continuation never reads as a line of its own)."""
    indent = " " * (len(text) - len(text.lstrip()) + 4)
    return "\n".join(textwrap.wrap(text, WIDTH, subsequent_indent=indent,
                                   break_on_hyphens=False))


def decision_line(doc: Mapping[str, Any]) -> str:
    """'specperf: FAIL — step time regressed', with a persisting regression's streak."""
    found = decision.decide(doc)
    verdicts: list[Mapping[str, Any]] = list(doc.get("verdicts") or [])
    if found.word == decision.FAIL_WORD:
        names = [FACTORS[name][0] for name in _factors(verdicts)]
        why = f"{' and '.join(names) or 'a check'} regressed"
        streak = decision.persists(doc.get("persists"))
        return wrap(f"specperf: FAIL \u2014 {why}{streak}")
    if found.word == decision.PASS_WORD:
        return wrap(f"specperf: PASS \u2014 nothing regressed ({_checks(verdicts)})")
    return wrap(f"specperf: UNDETERMINED \u2014 {found.why}")


# How a check count names each scope (a concurrency verdict judges a level or their slope).
_KIND_NAMES = {"concurrency": "concurrency check"}


def _checks(verdicts: Sequence[Mapping[str, Any]]) -> str:
    """'11 checks: 8 cases, 2 fits, the sweep'."""
    kinds: dict[str, int] = {}
    for v in verdicts:
        kinds[_kind(v)] = kinds.get(_kind(v), 0) + 1
    parts = [("the sweep" if kind == "sweep" and n == 1 else
              f"{n} {_KIND_NAMES.get(kind, kind)}{'s' if n != 1 and kind != 'sweep' else ''}")
             for kind, n in kinds.items()]
    return f"{len(verdicts)} check{'s' if len(verdicts) != 1 else ''}: {', '.join(parts)}"


def _kind(verdict: Mapping[str, Any]) -> str:
    return scope_of(verdict)


def _factors(verdicts: Sequence[Mapping[str, Any]]) -> list[str]:
    """The factors the regressions name, most regressions first ('acceptance+step' is
    both)."""
    counts: dict[str, int] = {}
    for v in verdicts:
        if v.get("status") != REGRESSION:
            continue
        name = factor(v)
        for part in (name.split("+") if name == "acceptance+step" else [name]):
            counts[part] = counts.get(part, 0) + 1
    return [name for name, _ in sorted(counts.items(), key=lambda kv: -kv[1])
            if name in FACTORS]


def cause_lines(verdicts: Sequence[Mapping[str, Any]], measured: Sequence[str]) -> list[str]:
    """One line per factor that regressed: its size, its interval, where it moved, and
    what to check. ``measured``: the run's case ids (a class's factor pools its own)."""
    lines = []
    for name in _factors(verdicts):
        named = [v for v in verdicts if v.get("status") == REGRESSION
                 and name in factor(v).split("+")]
        sweep = next((v for v in named if is_sweep(v)), None)
        cases = [v for v in named if not is_sweep(v)]
        ids = [str(v["case_id"]) for v in cases]
        figure, alone = _sweep_figure(sweep, name, measured) if sweep is not None else ("", "")
        if cases and figure and ids == [alone]:  # the pooled figure is that case's own
            figure += "; past its limit there"
        elif cases and figure:  # the pooled figure gave the size: name where it passed a limit
            figure += (f"; past its limit in {len(cases)} case{'s' if len(cases) != 1 else ''}"
                       f": {_names(ids)}")
        elif cases:
            figure = _case_figure(cases, name)
        hint = FACTORS[name][2].partition(": ")[2]
        dash = f" \u2014 {hint}" if hint else ""
        lines.append(f"{figure or FACTORS[name][1]}{dash}")
    return lines


def _sweep_figure(sweep: Mapping[str, Any], name: str, measured: Sequence[str]
                  ) -> tuple[str, str]:
    """'step time +17.2% (98% CI +9.9% to +24.8%) over all 8 cases pooled', and the case id
    when the figure is one class's on its only case ('avg commit on reasoning −10.8% (99% CI
    …) in reasoning-ctx3333, its class's one case'), else ''."""
    key = _METRIC.get(name, ("", "", "", ""))[1]
    found = [(label, entry) for status, label, entry in sweep_factors(sweep.get("details") or {})
             if status == REGRESSION and key and label.split(" on ")[0] in (
                 _METRIC[name][2], key)]
    if not found:  # the sweep regressed on another factor's figure (tok/s): name it
        found = [(label, entry) for status, label, entry in
                 sweep_factors(sweep.get("details") or {}) if status == REGRESSION][:1]
    parts, alone = [], ""
    for label, e in found:
        text = f"{label} {format_percent(float(e['change']))}{_interval(e)}"
        _, on, cls = label.partition(" on ")
        mine = [c for c in measured if c.startswith(f"{cls}-")] if on else list(measured)
        if len(mine) == 1 and on:
            alone = mine[0]
            text += f" in {alone}, its class's one case"
        elif mine:
            text += f" over {'all ' if not on else 'its '}{len(mine)} "\
                    f"{cls + ' ' if on else ''}cases pooled"
        else:
            text += " over the sweep"
        parts.append(text)
    return "; ".join(parts), (alone if len(parts) == 1 else "")


def _interval(entry: Mapping[str, Any]) -> str:
    low, high = entry.get("low"), entry.get("high")
    if low is None or high is None:
        return ""
    return f" ({format_ci(float(low), float(high), float(entry.get('level') or 0.95))})"


def _case_figure(cases: Sequence[Mapping[str, Any]], name: str) -> str:
    """One case: 'step time 33 → 38 ms (+15.1%, 95% CI +5.9% to +25.1%) in padding-ctx13';
    several: 'step time +15.0% to +15.3% (limit +10%) in 4 cases: a, b, c, d'."""
    metric, _, label, unit = _METRIC.get(name, ("", "", "", ""))
    entries = [(str(v["case_id"]), (v.get("details") or {}).get(metric or "slope"))
               for v in cases]
    shown = [(case, e) for case, e in entries if isinstance(e, Mapping)
             and e.get("change") is not None]
    label = label or "step time per 1k context"
    if not shown:
        return f"in {_names([case for case, _ in entries])}"
    if len(shown) == 1:
        case, e = shown[0]
        values = ""
        if metric and e.get("base") is not None and e.get("new") is not None:
            values = (f"{format_value(metric, float(e['base']))} \u2192 "
                      f"{format_value(metric, float(e['new']))}{unit} ")
        inside = f"{format_percent(float(e['change']))}{_inline(e)}"
        return f"{label} {values}({inside}) in {case}"
    changes = sorted(float(e["change"]) for _, e in shown)
    size = (format_percent(changes[0]) if changes[0] == changes[-1] else
            f"{format_percent(changes[0])} to {format_percent(changes[-1])}")
    limit = shown[0][1].get("limit")
    sign = "+" if limit and float(limit) > 0 else "\u2212"
    within = f" (limit {sign}{format_share(abs(float(limit)))})" if limit else ""
    return f"{label} {size}{within} in {len(shown)} cases: {_names([c for c, _ in shown])}"


def _inline(entry: Mapping[str, Any]) -> str:
    low, high = entry.get("low"), entry.get("high")
    if low is None or high is None:
        return ""
    return f", {format_ci(float(low), float(high))}"


def other_lines(doc: Mapping[str, Any], skipped: Mapping[str, str],
                why: str = "-v says why for each") -> list[str]:
    """Undetermined, noted and improved checks, errors and checks not judged: a line each
    (``why``: where each one's reason is, in this view)."""
    verdicts: list[Mapping[str, Any]] = list(doc.get("verdicts") or [])
    lines = []
    for status, what in ((UNDETERMINED, "each interval reaches across its limit, so none is "
                                        "a pass or a fail yet"),
                         (NOTED, "each a change we are sure of, inside its tolerance"),
                         (IMPROVED, "each better than the baseline beyond its tolerance")):
        found = [str(v["case_id"]) for v in verdicts if v.get("status") == status]
        if found:
            lines.append(f"{contract.NAMES[status]} {len(found)} ({_names(found)}): {what}; "
                         f"{why}.")
    errors = doc.get("errors") or {}
    if errors:
        n = len(errors)
        lines.append(f"errored {n} test{'s' if n != 1 else ''} ({_names(sorted(errors))}): "
                     "an infrastructure problem, not a regression.")
    if skipped:
        lines.append(f"not judged {len(skipped)} ({_names(sorted(skipped))}): "
                     f"{next(iter(skipped.values())).split('. ')[0].rstrip('.')}.")
    return lines


def could_see(doc: Mapping[str, Any]) -> str:
    """'would have caught a tok/s drop of 12% or more, a step-time rise of 14% or more (on
    95 of 100 runs)', and, when the sweep could not see its own tolerance, that it could
    not."""
    found = doc.get("resolution")
    if not isinstance(found, Mapping):
        return ""
    factors = found.get("factors") or {}
    parts = [f"{what} of {abs(100 * float(factors[key])):.0f}%"
             for key, what in _CAUGHT.items()
             if isinstance(factors.get(key), (int, float)) and math.isfinite(factors[key])]
    if not parts:
        return ""
    listed = parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} or {parts[-1]}"
    runs = round(100 * float(found.get("power", 0.95)))
    text = f"Would have caught {listed} or more ({runs} runs in 100)"
    sweep = next((v for v in doc.get("verdicts") or [] if is_sweep(v)), None)
    if sweep is not None and any(isinstance(d, Mapping) and "passed_at" in d
                                 for d in (sweep.get("details") or {}).values()):
        tolerance = decision.sweep_tolerance(doc)
        text += (f"; smaller changes, down to the {100 * tolerance:g}% sweep tolerance, hide in "
                 "the noise between nights")
    return text + "."


def _names(cases: Sequence[str], most: int = 4) -> str:
    if len(cases) <= most:
        return ", ".join(cases)
    return f"{', '.join(cases[:most])} and {len(cases) - most} more"
