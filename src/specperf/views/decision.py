"""What a run decided, said first: PASS, FAIL or UNDETERMINED, the sweep's decision (or why
there is none) and which factor moved; then every verdict's word, one line each.

report.html opens with :func:`decide`'s line and the terminal's closing block ends with it,
after :func:`verdict_words` (pass, noted, undetermined and not-judged cases; the regressions
have their own block, :mod:`specperf.views.summary`). Both read the record's fields: statuses,
details, the sweep's factors, errors, the run's kind and ``resolution`` (what the run could
have seen: :func:`resolution_line`). The words are the verdict contract's
(:mod:`specperf.core.contract`): a regression anywhere fails the run; otherwise an undecided
part, an error or nothing judged leaves it undetermined.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core import contract
from ..core.contract import IMPROVED, NOTED, PASS, REGRESSION, UNDETERMINED, UNMEASURED
from ..core.limits import format_percent
from ..judge.sweep.factortest import SWEEP_TOLERANCE
from ..judge.sweep.verdict import RESOLUTION_NAMES, resolution_text
from ..record.readers import scope_of
from .headline import FACTORS, factor, headline, is_sweep, one_line, reason

FAIL_WORD, PASS_WORD, UNDETERMINED_WORD = "FAIL", "PASS", "UNDETERMINED"
# The order verdict words are counted in: what needs a look first.
_ORDER = (REGRESSION, UNDETERMINED, IMPROVED, NOTED, PASS)


@dataclass(frozen=True)
class Decision:
    """The run's word, why (what moved), the sweep's decision, and the verdicts counted."""

    word: str  # PASS, FAIL or UNDETERMINED
    why: str  # 'step time moved (9 regressions)', 'nothing moved past its tolerance', …
    sweep: str  # the sweep's decision, or why it has none
    counts: str  # 'regression 8, pass 2' (the contract's words)

    def line(self) -> str:
        """'FAIL — step time moved (9 regressions). Sweep: regression — …. Verdicts: …'"""
        return f"{self.word} \u2014 {self.why}. Sweep: {self.sweep}. Verdicts: {self.counts}."


def decide(doc: Mapping[str, Any]) -> Decision:
    """The run's decision from its record (a regression fails it; an undetermined verdict, an
    error, or nothing judged leaves it undetermined; otherwise it passes)."""
    verdicts: list[Mapping[str, Any]] = doc.get("verdicts") or []
    statuses = [str(v["status"]) for v in verdicts]
    errors = len(doc.get("errors") or {})
    run = doc.get("run") or {}
    stopped = run.get("outage") or run.get("stopped_by") or run.get("interrupted") or \
        doc.get("interrupted")
    counts = _counts(statuses, errors)
    sweep = _sweep_text(doc, verdicts)
    if REGRESSION in statuses:
        return Decision(FAIL_WORD, _moved(verdicts) + persists(doc.get("persists")), sweep,
                        counts)
    open_ = statuses.count(UNDETERMINED)
    why = [f"{errors} test{'s' if errors != 1 else ''} errored" if errors else "",
           "the run was cut short" if stopped else "",
           f"{open_} verdict{'s' if open_ != 1 else ''} could not decide" if open_ else "",
           "nothing was compared with a baseline" if not verdicts else ""]
    if any(why):
        return Decision(UNDETERMINED_WORD, "; ".join(w for w in why if w), sweep, counts)
    sure = [f"{statuses.count(s)} {contract.NAMES[s]}" for s in (IMPROVED, NOTED)
            if s in statuses]
    return Decision(PASS_WORD, "nothing moved past its tolerance in the bad direction"
                    + (f" ({' and '.join(sure)}: see the verdicts)" if sure else ""),
                    sweep, counts)


def _counts(statuses: Sequence[str], errors: int) -> str:
    parts = [f"{contract.NAMES[s]} {statuses.count(s)}" for s in _ORDER if s in statuses]
    if errors:
        parts.append(f"errored {errors} (infrastructure: see Errors)")
    return ", ".join(parts) or "none"


def sweep_tolerance(doc: Mapping[str, Any]) -> float:
    value = (doc.get("settings") or {}).get("sweep_tolerance")
    return float(value) if isinstance(value, (int, float)) else SWEEP_TOLERANCE


def _sweep_text(doc: Mapping[str, Any], verdicts: Sequence[Mapping[str, Any]]) -> str:
    """The sweep's decision in words; without a sweep verdict, why there is none."""
    sweep = next((v for v in verdicts if is_sweep(v)), None)
    if sweep is None:
        return f"none \u2014 {_why_no_sweep(doc)}"
    status = str(sweep["status"])
    tolerance = sweep_tolerance(doc)
    if status == REGRESSION:
        return f"regression \u2014 {headline(sweep)}"
    if status == PASS:
        coarse = _coarse(sweep.get("details") or {})
        # passed at the run's resolution, not at the tolerance (judge/sweep/factortest.py)
        if coarse:
            return (f"pass as far as this run can see \u2014 it rules out {coarse}; the "
                    f"run-to-run noise hides a change as small as the {100 * tolerance:g}% "
                    f"sweep tolerance")
        return f"pass \u2014 no factor moved past the {100 * tolerance:g}% sweep tolerance"
    return f"{contract.NAMES[status]} \u2014 {reason(sweep, tolerance)}"


def _coarse(details: Mapping[str, Any]) -> str:
    """The changes a sweep that passed at its resolution rules out, from its factors'
    ``passed_at`` fields: 'tok/s beyond −11.8%, step time beyond +13.3%'."""
    names = {"tok/s": "tok/s", "step": "step time"}
    found = [f"{names.get(key, 'avg commit ' + key.partition(':')[2])} beyond "
             f"{format_percent(float(d['passed_at']))}"
             for key, d in details.items() if isinstance(d, Mapping) and "passed_at" in d]
    return ", ".join(found)


def _why_no_sweep(doc: Mapping[str, Any]) -> str:
    settings = doc.get("settings") or {}
    run = doc.get("run") or {}
    if settings.get("update_baselines"):
        # Its cases were judged against the current baseline before it was written (or not:
        # plugin/updatecheck.py), the sweep was not.
        return "a baseline-updating run judges its cases, not the sweep"
    if run.get("outage") or run.get("stopped_by"):
        return f"the run stopped before judging ({run.get('label') or run.get('stopped_by')})"
    if settings.get("compare_endpoint"):
        return "no sweep verdict in this A/B run; its cases were judged against production"
    if doc.get("baseline") is None:
        if doc.get("concurrency_baseline") is not None:  # levels, not a context sweep
            return ("a concurrency run has no sweep; its levels were judged against the "
                    "concurrency baseline")
        return "no baseline to compare with"
    sweep_tests = [o for node, o in (doc.get("outcomes") or {}).items() if "test_sweep" in node]
    if sweep_tests:
        return f"its test {sweep_tests[0]} without a verdict"
    return "no sweep test ran; the cases were judged alone"


def _moved(verdicts: Sequence[Mapping[str, Any]]) -> str:
    """Which factor the regressions name: 'step time moved (9 regressions)'."""
    found: dict[str, list[str]] = {}
    for v in verdicts:
        if v["status"] == REGRESSION:
            found.setdefault(factor(v), []).append(str(v["case_id"]))
    parts = [f"{FACTORS[name][0] if name in FACTORS else _named(cases)}"
             f" moved ({len(cases)} regression{'s' if len(cases) != 1 else ''})"
             for name, cases in sorted(found.items(), key=lambda kv: -len(kv[1]))]
    return "; ".join(parts)


def _named(cases: Sequence[str]) -> str:
    """What a regression whose record names no factor moved: its checks, by name (an older
    record's verdict)."""
    shown = ", ".join(cases[:3]) + (f" and {len(cases) - 3} more" if len(cases) > 3 else "")
    return f"what {shown} measure{'s' if len(cases) == 1 else ''}"


def persists(streak: Any) -> str:
    """'; the same step-time regression as on every night since 2026-12-02 (4 nights, 5
    runs)': a regression that is not new (the record's ``persists``, record/persistence.py)."""
    if not isinstance(streak, Mapping) or not streak.get("nights"):
        return ""
    name = str(streak.get("factor") or "")
    what = f"the same {FACTORS[name][1]}" if name in FACTORS else "the same regression"
    cases = list(streak.get("cases") or ())
    where = f" in {_names(cases)}" if cases else ""
    return (f"; {what}{where} as on every night since {str(streak['since'])[:10]} "
            f"({int(streak['nights'])} nights, {_runs(streak)})")


def _runs(streak: Mapping[str, Any]) -> str:
    """'5 runs' (a record written before runs were counted: 'tonight's included')."""
    runs = streak.get("runs")
    return f"{int(runs)} runs" if isinstance(runs, int) else "tonight's included"


def resolution_line(doc: Mapping[str, Any]) -> str:
    """'This run sees: tok/s −6.0%, step time +5.0%, avg commit −4.0% (95% power; <noise>).':
    the smallest change per factor the run would catch, from the record's ``resolution``
    (worded by judge/sweep/verdict.py); '' when the record has none."""
    found = doc.get("resolution")
    if not isinstance(found, Mapping):
        return ""
    factors = found.get("factors")
    if not isinstance(factors, Mapping) or not any(
            isinstance(factors.get(key), (int, float)) and math.isfinite(factors[key])
            for key in RESOLUTION_NAMES):
        return ""
    text = resolution_text(found)
    return f"{text[:1].upper()}{text[1:]}."


def verdict_words(doc: Mapping[str, Any], skipped: Mapping[str, str] | None = None) -> list[str]:
    """Every verdict's word for the closing block: a count line, then the passes on one line,
    each noted or undetermined verdict with its one-line reason, and the tests skipped without
    a verdict grouped by their reason (regressions, improvements and paths have their own
    lines)."""
    verdicts: list[Mapping[str, Any]] = doc.get("verdicts") or []
    own = [v for v in verdicts if scope_of(v) != "path" and v.get("reason") != UNMEASURED]
    skipped = dict(skipped or {})
    if not verdicts and (not skipped or doc.get("baseline") is None):
        return []  # nothing judged at all: the closing block's NOT JUDGED line says why
    # Counted as they are listed: the paths and unmeasured comparisons have their own lines.
    counts = _counts([str(v["status"]) for v in own], 0)
    others = len(verdicts) - len(own)
    lines = [f"verdicts: {counts}" + (f", not judged {len(skipped)}" if skipped else "")
             + (f" (and {others} path comparison{'s' if others != 1 else ''}, above)"
                if others else "")]
    passed = [str(v["case_id"]) for v in own if v["status"] == PASS]
    if passed:
        lines.append(f"  pass: {', '.join(passed)}")
    tolerance = sweep_tolerance(doc)
    lines += [f"  {contract.NAMES[str(v['status'])]} {v['case_id']}: {reason(v, tolerance)}"
              for v in own if v["status"] in (NOTED, UNDETERMINED)]
    by_reason: dict[str, list[str]] = {}
    for case, why in skipped.items():
        by_reason.setdefault(one_line(why), []).append(case)
    lines += [f"  not judged ({_names(cases)}): {why}" for why, cases in by_reason.items()]
    return lines


def _names(cases: Sequence[str], most: int = 4) -> str:
    """'a, b' or, past ``most``, '9: a, b, c, d, …'."""
    if len(cases) <= most:
        return ", ".join(cases)
    return f"{len(cases)}: {', '.join(cases[:most])}, \u2026"
