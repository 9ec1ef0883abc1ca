"""``specperf explain``'s views: the short text, the JSON and the HTML card of an outcome.

The explanation is made by the command (:mod:`specperf.cli.explainrun`: the baseline, the
live /metrics reading) and judged by :mod:`specperf.judge.explain`; this module only renders
it. The card is report.html's style (the same frame, table and figure macros): the verdict
sentence, the observation as a point on the baseline's tok/s-vs-context curve for the class
with the prediction's band, and a table of every figure with where it came from.
"""

from __future__ import annotations

import json
from typing import Any

from ..core import contract
from ..core.limits import LABELS, format_percent, format_value
from ..judge.explain import explanation as judge
from ..judge.explain import prediction
from . import plots, template
from .screen import wrap
from .template import Cell, Table, num

SIMULATED = "SIMULATED"


def distance(outcome: judge.Outcome) -> str:
    """How far the observed tok/s is from the prediction and from its range: '32.0 tok/s:
    13.4% above the predicted 28.2 tok/s, 3.7% above the top of its range (30.9)'."""
    e, figure = outcome.explanation, outcome.explanation.prediction.tok_s
    seen, low, high = e.observation.tok_s, *figure.bounds()
    side = "above" if seen >= figure.value else "below"
    head = (f"{seen:.1f} tok/s: {abs(seen / figure.value - 1.0):.1%} {side} the predicted "
            f"{figure.value:.1f} tok/s")
    if seen > high:
        return f"{head}, {seen / high - 1.0:.1%} above the top of its range ({high:.1f})"
    if seen < low:
        return f"{head}, {1.0 - seen / low:.1%} below the bottom of its range ({low:.1f})"
    return f"{head}, inside its range ({low:.1f}–{high:.1f})"


def text(outcome: judge.Outcome) -> str:
    """The short explanation the command prints."""
    e = outcome.explanation
    mark = f"{SIMULATED} " if outcome.simulated else ""
    word = f"specperf explain: {mark}{contract.NAMES.get(e.status, e.status)} — "
    lines = [wrap(word + e.conclusion), wrap(f"  {e.basis}"),
             wrap(f"  observed {distance(outcome)}")] if e.conclusion else \
        [f"{word}{e.message}", f"  observed {distance(outcome)}"]
    lines += [f"  ({n})" for n in outcome.notes]
    if outcome.live is not None:
        lv = outcome.live
        commit = "n/a" if lv.avg_commit is None else format_value("avg_commit", lv.avg_commit)
        step = "n/a" if lv.step_ms is None else f"{format_value('step_ms', lv.step_ms)} ms"
        clock = " of simulated time" if outcome.simulated else ""
        lines.append(f"  live over {lv.window_s:.0f} s{clock} ({lv.requests:g} requests "
                     f"finished): {lv.tok_s:.1f} tok/s per request, avg commit {commit}, step "
                     f"time {step}, context {e.observation.context:.0f}, concurrency "
                     f"{lv.concurrency:.1f}")
    if outcome.simulated:
        lines.append(f"  {SIMULATED}: the server is the simulator; its times are simulated "
                     "time, not a real box's.")
    return "\n".join(lines)


def as_json(outcome: judge.Outcome) -> str:
    return json.dumps(outcome.to_dict(), indent=2, sort_keys=True, default=str) + "\n"


_BADGES: dict[str, str] = {contract.PASS: "pass", contract.NOTED: "pass",
                           contract.IMPROVED: "improved", contract.REGRESSION: "fail",
                           contract.UNDETERMINED: "error"}


def _row(label: str, factor: dict[str, Any] | None, predicted: prediction.Figure, metric: str,
         unit: str = "") -> list[Cell]:
    low, high = predicted.bounds()
    band = f"{format_value(metric, low)}–{format_value(metric, high)}{unit}"
    pred = format_value(metric, predicted.value) + unit
    if factor is None:
        return [Cell(label), num("—"), num(pred), num(band), Cell("not observed")]
    observed = format_value(metric, factor["observed"]) + unit
    if factor["implied"]:
        observed += " (implied)"
    return [Cell(label), num(observed), num(pred), num(band),
            Cell(f"{format_percent(factor['change'])} — {contract.NAMES[factor['status']]}")]


def _factor_word(outcome: judge.Outcome) -> str:
    """Beside the card's status: the factor that explains it; with none, where the observed
    tok/s lies against its predicted range ("as predicted" only inside it)."""
    e = outcome.explanation
    if e.factor != "none":
        return f"factor: {e.factor}"
    if e.status not in (contract.PASS, contract.NOTED):
        return ""
    low, high = e.prediction.tok_s.bounds()
    seen = e.observation.tok_s
    if seen > high:
        return "above its predicted range"
    if seen < low:
        return "below its predicted range"
    return "as predicted"


def card(outcome: judge.Outcome) -> str:
    """The HTML card."""
    e, p = outcome.explanation, outcome.explanation.prediction
    low, high = p.tok_s.bounds()
    svg = plots.band_plot("explain", f"{p.text_class}: tok/s vs context ({p.deployment} "
                          f"v{p.version})", e.curve,
                          [(q["context"], q["tok_s"]) for q in e.points],
                          (e.observation.context, e.observation.tok_s), (p.context, low, high))
    factors = {k: dict(v) for k, v in e.factors.items()}
    figures = Table(["figure", "observed", "predicted", "band (95 %)", "change"], [
        _row("tok/s per request", factors.get("tok_s"), p.tok_s, "tok_s"),
        _row("avg commit", factors.get("avg_commit"), p.avg_commit, "avg_commit"),
        _row("step time", factors.get("step_ms"), p.step_ms, "step_ms", " ms")])
    names = {**LABELS, "output_tokens": "output tokens", "ttft_ms": "time to first token"}
    sources = {**{f"observed {names.get(k, k)}": v for k, v in e.observation.sources.items()},
               "predicted avg commit": p.avg_commit.source, "predicted step time":
               p.step_ms.source, "run-to-run noise": p.noise,
               **{f"note {i + 1}": n for i, n in enumerate([*p.notes, *outcome.notes])}}
    where = "live " + outcome.live.endpoint if outcome.live else "offline"
    if outcome.live and outcome.simulated:
        where += f", {outcome.live.window_s:.0f} s of simulated time"
    view = {"title": f"{p.deployment}, {p.text_class} at {p.context:.0f} tokens ({where})",
            "status": e.status, "status_word": contract.NAMES.get(e.status, e.status),
            "badge": _BADGES.get(e.status, "error"),
            "factor": _factor_word(outcome),
            # The answer first, then the prediction it rests on, as the terminal prints it.
            "message": e.conclusion or e.message, "basis": e.basis if e.conclusion else "",
            "plot": template.figure("explain", svg, "The observation (red) on the baseline's "
                                    "predicted tok/s for this class, with its 95 % band; squares "
                                    "are the baseline's measured cases."),
            "figures": figures,
            "sources": Table(["figure", "source"], [[Cell(k), Cell(v)]
                                                    for k, v in sources.items()]),
            "baseline": f"{p.deployment} v{p.version}", "simulated": outcome.simulated,
            "distance": distance(outcome)}
    return template.render("explain.html.j2", title=f"specperf explain — {p.deployment}",
                           card=view)
