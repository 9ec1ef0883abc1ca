"""``specperf explain``'s views: the observation (offline, or live from /metrics), the short
text, the JSON and the HTML card.

The card is report.html's style (the same frame, table and figure macros): the verdict
sentence, the observation as a point on the baseline's tok/s-vs-context curve for the class
with the prediction's band, and a table of every figure with where it came from. The
explanation itself is :mod:`specperf.judge.explain`; the live figures are
:mod:`specperf.servers.livemetrics` (this module only connects them for the command line).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core import contract
from ..core.errors import ConfigError
from ..core.limits import LABELS, format_percent, format_value
from ..core.noise import NoiseModel
from ..judge import explain as judge
from ..judge import prediction
from ..judge.observation import Observation
from ..servers import livemetrics
from ..servers.client import Client
from . import plots, template
from .template import Cell, Table, num


@dataclass(frozen=True)
class Outcome:
    """An explanation and what the live form read (None offline)."""

    explanation: judge.Explanation
    live: livemetrics.LiveObservation | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        out = self.explanation.to_dict()
        out["live"] = None if self.live is None else self.live.to_dict()
        out["notes"] = list(self.notes)
        return out


def offline(root: Path, deployment: str, text_class: str, context: float, tok_s: float, *,
            avg_commit: float | None = None, concurrency: float = 1.0,
            output_tokens: int | None = None, noise: NoiseModel | None = None) -> Outcome:
    """Explain figures a dashboard showed (``--observed-tok-s``, ``--observed-commit``)."""
    baseline, conc = prediction.load(root, deployment)
    sources = {"tok_s": "--observed-tok-s", "context": "--context"}
    if avg_commit is not None:
        sources["avg_commit"] = "--observed-commit"
    obs = Observation(text_class, context, tok_s, avg_commit, None, output_tokens, concurrency,
                      sources)
    return Outcome(judge.explain(baseline, obs, noise=noise, conc=conc))


def live(root: Path, deployment: str, endpoint: str, window_s: float, *,
         text_class: str | None = None, context: float | None = None,
         noise: NoiseModel | None = None, poll_s: float = 1.0) -> Outcome:
    """Read the server's /metrics over ``window_s`` and explain what production did."""
    baseline, conc = prediction.load(root, deployment)
    if text_class is not None:
        # an unknown class before the window, not after
        prediction.class_cases(baseline, text_class)
    client = Client(endpoint, retries=0)
    try:
        seen = livemetrics.observe(client, window_s, poll_s=poll_s, context=context)
    finally:
        client.close()
    ctx = context if context is not None else seen.context
    if math.isnan(ctx):
        raise ConfigError(f"{seen.family} does not export the prompt length of its "
                                f"requests: give --context (the traffic's prompt tokens).")
    output = None if math.isnan(seen.output_tokens) else max(2, round(seen.output_tokens))
    notes: list[str] = []
    if text_class is None:
        text_class, why = prediction.closest_class(baseline, ctx, output or 600, seen.avg_commit)
        notes.append(why)
    sources = dict(seen.sources)
    if context is not None:
        sources["context"] = "--context"
    obs = Observation(text_class, ctx, seen.tok_s, seen.avg_commit, seen.step_ms, output,
                      seen.concurrency, sources)
    return Outcome(judge.explain(baseline, obs, noise=noise, conc=conc), seen, tuple(notes))


def text(outcome: Outcome) -> str:
    """The short explanation the command prints."""
    e = outcome.explanation
    lines = [f"specperf explain: {contract.NAMES.get(e.status, e.status)} — {e.message}"]
    lines += [f"  ({n})" for n in outcome.notes]
    if outcome.live is not None:
        lv = outcome.live
        commit = "n/a" if lv.avg_commit is None else format_value("avg_commit", lv.avg_commit)
        step = "n/a" if lv.step_ms is None else f"{format_value('step_ms', lv.step_ms)} ms"
        lines.append(f"  live over {lv.window_s:.0f} s ({lv.requests:g} requests finished): "
                     f"{lv.tok_s:.1f} tok/s per request, avg commit {commit}, step time "
                     f"{step}, context {e.observation.context:.0f}, concurrency "
                     f"{lv.concurrency:.1f}")
    return "\n".join(lines)


def as_json(outcome: Outcome) -> str:
    return json.dumps(outcome.to_dict(), indent=2, sort_keys=True, default=str) + "\n"


_BADGES = {contract.PASS: "pass", contract.NOTED: "pass", contract.IMPROVED: "improved",
           contract.REGRESSION: "fail", contract.UNDETERMINED: "error"}


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


def card(outcome: Outcome) -> str:
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
    view = {"title": f"{p.deployment}, {p.text_class} at {p.context:.0f} tokens ({where})",
            "status": e.status, "status_word": contract.NAMES.get(e.status, e.status),
            "badge": _BADGES.get(e.status, "error"),
            "factor": "as predicted" if e.factor == "none" else f"factor: {e.factor}",
            "message": e.message,
            "plot": template.figure("explain", svg, "The observation (red) on the baseline's "
                                    "predicted tok/s for this class, with its 95 % band; squares "
                                    "are the baseline's measured cases."),
            "figures": figures,
            "sources": Table(["figure", "source"], [[Cell(k), Cell(v)]
                                                    for k, v in sources.items()]),
            "baseline": f"{p.deployment} v{p.version}"}
    return template.render("explain.html.j2", title=f"specperf explain — {p.deployment}",
                           card=view)
