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
from ..core.errors import BaselineError, ConfigError
from ..core.limits import LABELS, format_percent, format_value
from ..core.noise import NoiseModel
from ..judge import explain as judge
from ..judge import prediction
from ..judge.observation import Observation
from ..servers import livemetrics, probe
from ..servers.client import Client
from ..servers.fingerprint import deployment_for
from ..settings.hints import perf_command
from ..settings.options import OPTIONS_BY_NAME
from . import plots, template
from .template import Cell, Table, num

SIMULATED = "SIMULATED"


@dataclass(frozen=True)
class Server:
    """The live form's server as its GET routes name it (no generation request)."""

    url: str
    deployment: str  # named by its fingerprint, as the gate and the main job name it
    simulated: bool

    @property
    def label(self) -> str:
        """How the run history labels this box (a simulator: 'SIMULATED (url)')."""
        return f"{SIMULATED} ({self.url})" if self.simulated else self.url


@dataclass(frozen=True)
class Outcome:
    """An explanation and what the live form read (None offline)."""

    explanation: judge.Explanation
    live: livemetrics.LiveObservation | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    simulated: bool = False  # the live server is a simulator: its times are simulated

    def to_dict(self) -> dict[str, Any]:
        out = self.explanation.to_dict()
        out["live"] = None if self.live is None else self.live.to_dict()
        out["notes"] = list(self.notes)
        out["simulated"] = self.simulated
        return out


def identify(endpoint: str) -> Server:
    """Check ``endpoint`` is an LLM server (NotAnLlmServer when it is not, before any
    /metrics reading) and name its deployment from its fingerprint."""
    client = Client(endpoint, retries=0)
    try:
        found = probe.identify(client, simulated=False, endpoint_source="--endpoint")
    finally:
        client.close()
    profile = str(OPTIONS_BY_NAME["sim_profile"].default)
    return Server(client.base_url, deployment_for(None, profile, found),
                  bool(found["simulated"]))


def _load(root: Path, deployment: str, endpoint: str | None) -> tuple[Any, Any]:
    """The deployment's baseline; none yet is one sentence with the command that writes it
    for this server and this deployment name, working as printed."""
    try:
        return prediction.load(root, deployment)
    except BaselineError as exc:
        if any((root / deployment).glob("v*.json")):  # there is one: unreadable, not missing
            raise
        where = [] if root == Path("baselines") else ["--specperf-baseline-dir", str(root)]
        command = perf_command("-m", "context_scaling", "--specperf-endpoint",
                               endpoint or "URL", "--specperf-deployment", deployment, *where,
                               "--specperf-update-baselines")
        url = "" if endpoint else " (URL: the deployment's server)"
        raise BaselineError(f"no baseline for deployment {deployment!r} in {root / deployment}: "
                            f"create one with `{command}` against a quiet server{url}.") from exc


def offline(root: Path, deployment: str, text_class: str, context: float, tok_s: float, *,
            avg_commit: float | None = None, concurrency: float = 1.0,
            output_tokens: int | None = None, noise: NoiseModel | None = None) -> Outcome:
    """Explain figures a dashboard showed (``--observed-tok-s``, ``--observed-commit``)."""
    baseline, conc = _load(root, deployment, None)
    sources = {"tok_s": "--observed-tok-s", "context": "--context"}
    if avg_commit is not None:
        sources["avg_commit"] = "--observed-commit"
    obs = Observation(text_class, context, tok_s, avg_commit, None, output_tokens, concurrency,
                      sources)
    return Outcome(judge.explain(baseline, obs, noise=noise, conc=conc))


def live(root: Path, deployment: str, server: Server | str, window_s: float, *,
         text_class: str | None = None, context: float | None = None,
         noise: NoiseModel | None = None, poll_s: float = 1.0) -> Outcome:
    """Read the server's /metrics over ``window_s`` and explain what production did
    (``server``: :func:`identify`'s, or a URL it is then called on)."""
    if isinstance(server, str):
        server = identify(server)
    baseline, conc = _load(root, deployment, server.url)
    if text_class is not None:
        # an unknown class before the window, not after
        prediction.class_cases(baseline, text_class)
    client = Client(server.url, retries=0)
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
    return Outcome(judge.explain(baseline, obs, noise=noise, conc=conc), seen, tuple(notes),
                   server.simulated)


def distance(outcome: Outcome) -> str:
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


def text(outcome: Outcome) -> str:
    """The short explanation the command prints."""
    e = outcome.explanation
    mark = f"{SIMULATED} " if outcome.simulated else ""
    lines = [f"specperf explain: {mark}{contract.NAMES.get(e.status, e.status)} — {e.message}",
             f"  observed {distance(outcome)}"]
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


def as_json(outcome: Outcome) -> str:
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
    if outcome.live and outcome.simulated:
        where += f", {outcome.live.window_s:.0f} s of simulated time"
    view = {"title": f"{p.deployment}, {p.text_class} at {p.context:.0f} tokens ({where})",
            "status": e.status, "status_word": contract.NAMES.get(e.status, e.status),
            "badge": _BADGES.get(e.status, "error"),
            "factor": f"factor: {e.factor}" if e.factor != "none" else
            "as predicted" if e.status in (contract.PASS, contract.NOTED) else "",
            "message": e.message,
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
