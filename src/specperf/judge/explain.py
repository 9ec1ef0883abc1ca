"""Explain a production observation from the deployment's baseline (``specperf explain``).

A dashboard shows a tok/s figure; the baseline knows what this deployment does on a text
class at a context: its avg commit per class and context, its step-time fit over context,
its prefill and the concurrency baseline's batch slope. :func:`predict` turns those into the
tok/s a request should see, with the judges' own model (:func:`specperf.core.model.
predict_tok_s` and the context fit) and an interval that carries the baseline's spreads and
the run-to-run noise (:mod:`specperf.core.noise`: production is another "night" than the
baseline's). :func:`explain` then judges the observation and each of its two factors with the
contract (:func:`specperf.core.contract.status`) and says which factor explains the
difference, in one sentence:

- the observation is inside the prediction: it is what this deployment does on this traffic
  (the sentence names what makes it slower than the baseline's fastest case);
- a factor is past its tolerance: a step-time or acceptance regression to look for.

Exit codes are the gate's (:data:`EXIT_OK`, :data:`EXIT_REGRESSION`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..baselines.concurrency import ConcurrencyBaseline, ConcurrencyStore
from ..baselines.store import Baseline, BaselineStore, CaseBaseline
from ..core import contract
from ..core.contract import IMPROVED, REGRESSION, Change
from ..core.errors import BaselineError, ConfigError
from ..core.limits import DEFAULT_TOLERANCES, MINUS, format_percent, format_value, tolerance
from ..core.model import ContextFit, attribute, predict_tok_s
from ..core.noise import NoiseModel
from ..core.stats import MAD_TO_SIGMA, MEDIAN_SE_FACTOR
from ..measure.sample import mean_context
from .reconcile import base_rest

EXIT_OK, EXIT_REGRESSION = 0, 1
Z = 1.96  # two-sided 95 % interval of the prediction
# A context further outside the fitted range than this share of the range is extrapolated.
FAR_OUTSIDE = 0.25
NIGHTLY = "run the nightly job against this deployment"
STEP_ADVICE = ("a step-time regression: check the kernels, attention backend and KV cache "
               f"({NIGHTLY})")
COMMIT_ADVICE = f"an acceptance regression: check the drafter and the text ({NIGHTLY})"


@dataclass(frozen=True)
class Observation:
    """What production did: tok/s per request, and what is known of its two factors.

    ``context`` is the prompt length in tokens; ``sources`` says where each figure came from
    (a flag, or the server's metric)."""

    text_class: str
    context: float
    tok_s: float
    avg_commit: float | None = None
    step_ms: float | None = None
    output_tokens: int | None = None
    concurrency: float = 1.0
    sources: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"text_class": self.text_class, "context": self.context, "tok_s": self.tok_s,
                "avg_commit": self.avg_commit, "step_ms": self.step_ms,
                "output_tokens": self.output_tokens, "concurrency": self.concurrency,
                "sources": dict(self.sources)}


@dataclass(frozen=True)
class Figure:
    """A predicted figure and the σ of its log (≈ relative), with where it came from."""

    value: float
    sd: float
    source: str

    def bounds(self) -> tuple[float, float]:
        return self.value * math.exp(-Z * self.sd), self.value * math.exp(Z * self.sd)

    def to_dict(self) -> dict[str, Any]:
        low, high = self.bounds()
        return {"value": self.value, "low": low, "high": high, "sd": self.sd,
                "source": self.source}


@dataclass(frozen=True)
class Prediction:
    """What the baseline says a request of this class, context and output should see."""

    deployment: str
    version: int
    text_class: str
    context: float
    output_tokens: int
    concurrency: float
    avg_commit: Figure
    step_ms: Figure
    tok_s: Figure
    prefill_ms: float
    rest: float
    noise: str
    notes: tuple[str, ...] = ()
    tolerances: Mapping[str, float] = field(default_factory=dict)

    @property
    def mean_context(self) -> float:
        return mean_context(self.context, self.output_tokens)

    def to_dict(self) -> dict[str, Any]:
        return {"deployment": self.deployment, "version": self.version,
                "text_class": self.text_class, "context": self.context,
                "output_tokens": self.output_tokens, "mean_context": self.mean_context,
                "concurrency": self.concurrency, "avg_commit": self.avg_commit.to_dict(),
                "step_ms": self.step_ms.to_dict(), "tok_s": self.tok_s.to_dict(),
                "prefill_ms": self.prefill_ms, "rest": self.rest, "noise": self.noise,
                "notes": list(self.notes), "tolerances": dict(self.tolerances)}


@dataclass(frozen=True)
class Explanation:
    """The verdict on one observation: its status, the factor and the sentence."""

    status: str
    factor: str  # "none", "step time", "acceptance", "both", "rest"
    message: str
    exit_code: int
    observation: Observation
    prediction: Prediction
    factors: Mapping[str, Mapping[str, Any]]
    curve: Sequence[Mapping[str, float]] = ()
    points: Sequence[Mapping[str, float]] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"status": contract.NAMES.get(self.status, self.status), "factor": self.factor,
                "message": self.message, "exit_code": self.exit_code,
                "observation": self.observation.to_dict(),
                "prediction": self.prediction.to_dict(),
                "factors": {k: {**v, "status": contract.NAMES.get(v["status"], v["status"])}
                            for k, v in self.factors.items()},
                "curve": [dict(p) for p in self.curve], "points": [dict(p) for p in self.points]}


# -- the baseline ------------------------------------------------------------------------------


def load(root: Path, deployment: str, version: int | None = None
         ) -> tuple[Baseline, ConcurrencyBaseline | None]:
    """The deployment's baseline (the latest unless ``version``) and its concurrency baseline."""
    return BaselineStore(root).load(deployment, version), ConcurrencyStore(root).load(deployment)


def class_cases(baseline: Baseline, text_class: str) -> list[CaseBaseline]:
    """The baseline's cases of ``text_class`` (by context); a usage error naming the classes
    the baseline has when it has none."""
    cases = sorted((c for c in baseline.cases.values() if c.text_class == text_class),
                   key=lambda c: c.context)
    if not cases:
        have = ", ".join(sorted({c.text_class for c in baseline.cases.values()})) or "none"
        raise ConfigError(f"the baseline of {baseline.deployment!r} (v{baseline.version}) has no "
                          f"text class {text_class!r} (it has: {have}): pick one of those, or "
                          f"measure {text_class} with --specperf-text-classes {text_class} "
                          f"--specperf-update-baselines.")
    return cases


def _rel_se(case: CaseBaseline, metric: str) -> float:
    """Relative standard error of a baseline median (0 when its spread is unknown: n = 1)."""
    summary = case.metrics.get(metric)
    if summary is None or summary.n < 2 or not summary.median:
        return 0.0
    rel_sd = MAD_TO_SIGMA * summary.mad / abs(summary.median)
    return MEDIAN_SE_FACTOR * rel_sd / math.sqrt(summary.n)


def _commit_at(cases: Sequence[CaseBaseline], x: float) -> tuple[float, float, str]:
    """Avg commit at mean context ``x``: linear between the two cases around it, the nearest
    case's outside them; with its relative standard error and a source."""
    known = [(mean_context(c.context, c.output_tokens), c) for c in cases
             if c.metrics.get("avg_commit") is not None]
    if not known:
        raise BaselineError(f"the baseline has no avg commit for {cases[0].text_class}: write a "
                            f"new one with a server that reports acceptance.")
    for (x0, c0), (x1, c1) in zip(known, known[1:], strict=False):
        if x0 <= x <= x1 and x1 > x0:
            w = (x - x0) / (x1 - x0)
            v0, v1 = c0.metrics["avg_commit"].median, c1.metrics["avg_commit"].median
            se = math.hypot((1 - w) * _rel_se(c0, "avg_commit"), w * _rel_se(c1, "avg_commit"))
            return (1 - w) * v0 + w * v1, se, f"baseline cases {c0.id} and {c1.id}"
    _, near = min(known, key=lambda p: abs(p[0] - x))
    return (near.metrics["avg_commit"].median, _rel_se(near, "avg_commit"),
            f"baseline case {near.id}")


def _fit_for(baseline: Baseline, text_class: str) -> tuple[str, ContextFit, list[str]]:
    """The class's own context fit, else another class's (step time depends on the context,
    not on the text); a BaselineError saying what to measure when there is none."""
    fit = baseline.fits.get(text_class)
    if fit is not None:
        return text_class, fit, []
    if not baseline.fits:
        raise BaselineError(f"the baseline of {baseline.deployment!r} (v{baseline.version}) has "
                            f"no context fit: measure one with -m context_scaling "
                            f"--specperf-update-baselines (two or more contexts per text class).")
    name = max(baseline.fits, key=lambda n: (baseline.fits[n].n_points, n))
    return name, baseline.fits[name], [
        f"step time from the {name} fit: the baseline has no {text_class} fit (step time "
        f"depends on the context, not on the text)"]


def _fit_range(baseline: Baseline, fit_class: str) -> tuple[float, float]:
    xs = [mean_context(c.context, c.output_tokens) for c in baseline.cases.values()
          if c.text_class == fit_class]
    return (min(xs), max(xs)) if xs else (0.0, 0.0)


def _extrapolation(baseline: Baseline, fit_class: str, x: float, context: float) -> list[str]:
    low, high = _fit_range(baseline, fit_class)
    margin = FAR_OUTSIDE * (high - low)
    if high <= low or low - margin <= x <= high + margin:
        return []
    return [f"context {context:.0f} is far outside the fitted range (mean contexts "
            f"{low:.0f}–{high:.0f}): its step time is extrapolated; measure it with "
            f"--specperf-contexts {context:.0f} --specperf-update-baselines"]


def _batch_scale(conc: ConcurrencyBaseline | None, concurrency: float
                 ) -> tuple[float, float, list[str]]:
    """Step-time factor at ``concurrency`` from the concurrency baseline's batch fit (its
    relative standard error, and a note)."""
    if concurrency < 1.5:
        return 1.0, 0.0, []
    if conc is None or conc.fit is None:
        return 1.0, 0.0, [f"concurrency {concurrency:.1f}: the deployment has no concurrency "
                          f"baseline, so step time is predicted as at concurrency 1; measure "
                          f"one with -m concurrency_scaling --specperf-update-baselines"]
    one, here = conc.fit.predict_step_ms(1.0), conc.fit.predict_step_ms(concurrency)
    if one <= 0 or here <= 0:
        return 1.0, 0.0, []
    se = conc.fit.predict_se_ms(concurrency) / here
    return here / one, se, [f"step time ×{here / one:.2f} at concurrency {concurrency:.1f} "
                            f"from the concurrency baseline's batch fit"]


def predict(baseline: Baseline, text_class: str, context: float, *,
            output_tokens: int | None = None, concurrency: float = 1.0,
            noise: NoiseModel | None = None,
            conc: ConcurrencyBaseline | None = None) -> Prediction:
    """The tok/s (and its factors) the baseline predicts for this traffic, with intervals."""
    noise = noise or NoiseModel.prior()
    cases = class_cases(baseline, text_class)
    near = min(cases, key=lambda c: abs(c.context - context))
    n_out = int(output_tokens or near.output_tokens)
    x = mean_context(context, n_out)
    commit, commit_se, commit_src = _commit_at(cases, x)
    fit_class, fit, notes = _fit_for(baseline, text_class)
    notes += _extrapolation(baseline, fit_class, x, context)
    scale, batch_se, batch_notes = _batch_scale(conc, concurrency)
    step = fit.predict_step_ms(x) * scale
    if step <= 0:
        raise BaselineError(f"the {fit_class} fit predicts a step time of {step:.1f} ms at "
                            f"context {context:.0f}: measure that context with --specperf-contexts "
                            f"{context:.0f} --specperf-update-baselines.")
    # A fit without standard errors (hand-entered) carries its residual as a point's error.
    fit_se = (fit.predict_se_ms(x) or fit.residual_ms) / (step / scale)
    prefill = near.metrics["ttft_ms"].median if "ttft_ms" in near.metrics else 0.0
    rest = base_rest(near, near.output_tokens, prefill)
    commit_sd = math.sqrt(commit_se**2 + noise.of("avg_commit").comparison_var())
    step_sd = math.sqrt(fit_se**2 + batch_se**2 + noise.of("step_ms").comparison_var())
    # tok/s carries its own run-to-run noise once (not each factor's again) and both
    # factors' baseline errors.
    tok_sd = math.sqrt(commit_se**2 + fit_se**2 + batch_se**2
                       + noise.of("tok_s").comparison_var())
    tok = predict_tok_s(commit, step, n_out, prefill) * rest
    tol = {**DEFAULT_TOLERANCES, **baseline.tolerances, **near.tolerances}
    return Prediction(
        baseline.deployment, baseline.version, text_class, float(context), n_out, concurrency,
        Figure(commit, commit_sd, commit_src),
        Figure(step, step_sd, f"the baseline's {fit_class} context fit at {x:.0f} tokens"),
        Figure(tok, tok_sd, "predict_tok_s(avg commit, step time)"),
        prefill, rest, noise.of("tok_s").text(), tuple(notes + batch_notes), tol)


# -- the verdict -------------------------------------------------------------------------------


def _change(observed: float, figure: Figure) -> Change:
    r = math.log(observed / figure.value)
    return Change(math.exp(r) - 1.0, math.exp(r - Z * figure.sd) - 1.0,
                  math.exp(r + Z * figure.sd) - 1.0)


def implied_step_ms(tok_s: float, avg_commit: float, pred: Prediction) -> float:
    """The step time that, with ``avg_commit``, gives ``tok_s`` in the prediction's model
    (its output, prefill and rest): predict_tok_s solved for step time."""
    n = pred.output_tokens
    total_ms = 1000.0 * n * pred.rest / tok_s
    return (total_ms - pred.prefill_ms) * avg_commit / (n - 1)


def _judged(metric: str, observed: float, figure: Figure, tol: Mapping[str, float],
            direction: int, implied: bool = False) -> dict[str, Any]:
    change = _change(observed, figure)
    limit = tolerance(tol, metric)
    return {"observed": observed, "predicted": figure.value, "change": change.estimate,
            "low": change.low, "high": change.high, "limit": limit, "implied": implied,
            "status": contract.status(change, direction, limit)}


def _pct(fraction: float) -> str:
    return f"{abs(100.0 * fraction):.0f} %"


def explain(baseline: Baseline, obs: Observation, *, noise: NoiseModel | None = None,
            conc: ConcurrencyBaseline | None = None) -> Explanation:
    """Predict ``obs``'s traffic from ``baseline``, judge tok/s and each factor by the
    contract, and say which factor explains the difference."""
    pred = predict(baseline, obs.text_class, obs.context, output_tokens=obs.output_tokens,
                   concurrency=obs.concurrency, noise=noise, conc=conc)
    tol = pred.tolerances
    factors = {"tok_s": _judged("tok_s", obs.tok_s, pred.tok_s, tol, +1)}
    commit = obs.avg_commit if obs.avg_commit is not None else pred.avg_commit.value
    if obs.avg_commit is not None:
        factors["avg_commit"] = _judged("avg_commit", obs.avg_commit, pred.avg_commit, tol, +1)
    step = obs.step_ms if obs.step_ms is not None else implied_step_ms(obs.tok_s, commit, pred)
    factors["step_ms"] = _judged("step_ms", step, pred.step_ms, tol, -1, obs.step_ms is None)
    status, factor, message = _sentence(obs, pred, factors, baseline)
    regressed = any(f["status"] == REGRESSION for f in factors.values())
    code = EXIT_REGRESSION if regressed else EXIT_OK
    curve, points = curve_of(baseline, pred, noise, conc)
    return Explanation(status, factor, message, code, obs, pred, factors, curve, points)


def _predicted_text(pred: Prediction) -> str:
    low, high = pred.tok_s.bounds()
    generated = pred.output_tokens // 2
    conc = f" at concurrency {pred.concurrency:.1f}" if pred.concurrency >= 1.5 else ""
    return (f"predicted {low:.1f}–{high:.1f} tok/s (avg commit "
            f"{format_value('avg_commit', pred.avg_commit.value)} for {pred.text_class}, step "
            f"time {format_value('step_ms', pred.step_ms.value)} ms at {pred.context:.0f} tokens "
            f"+ {generated} generated{conc}; {pred.noise})")


def _sentence(obs: Observation, pred: Prediction, factors: Mapping[str, Mapping[str, Any]],
              baseline: Baseline) -> tuple[str, str, str]:
    tok = factors["tok_s"]
    step, commit = factors["step_ms"], factors.get("avg_commit")
    head = f"observed {obs.tok_s:.1f} tok/s; {_predicted_text(pred)}"
    notes = "".join(f" Note: {n}." for n in pred.notes)
    bad = [name for name, f in (("step time", step), ("acceptance", commit))
           if f is not None and f["status"] == REGRESSION]
    if tok["status"] == REGRESSION or bad:
        return REGRESSION, _factor_name(bad, step, commit), \
            f"{head}: {_regression(tok, step, commit)}.{notes}"
    if tok["status"] == IMPROVED:
        return IMPROVED, "none", (f"{head}: the observation is {_pct(tok['change'])} faster than "
                                  f"the baseline predicts — the baseline may be stale; refresh "
                                  f"it with --specperf-update-baselines.{notes}")
    if tok["status"] == contract.UNDETERMINED:
        return tok["status"], "none", (
            f"{head}: the observation is {_pct(tok['change'])} "
            f"{'below' if tok['change'] < 0 else 'above'} the prediction, which the baseline's "
            f"uncertainty cannot tell from its tolerance — undetermined: a longer window, or "
            f"the box's history (--history), would decide.{notes}")
    why = _why_slow(pred, baseline)
    return tok["status"], "none", (f"{head}: the observation is what this deployment does on "
                                   f"this traffic{why}, not a regression.{notes}")


def _factor_name(bad: list[str], step: Mapping[str, Any],
                 commit: Mapping[str, Any] | None) -> str:
    if len(bad) == 2:
        return "both"
    if bad:
        return bad[0]
    if commit is None:
        return "step time"
    shares = attribute(1.0, 1.0 + commit["change"], 1.0 + step["change"])
    return "acceptance" if abs(shares.acceptance_log) >= abs(shares.step_log) else "step time"


def _move(label: str, f: Mapping[str, Any], unit: str, where: str) -> str:
    obs = format_value("step_ms" if unit else "avg_commit", f["observed"])
    pred = format_value("step_ms" if unit else "avg_commit", f["predicted"])
    lim = ("+" if label == "step time" else MINUS) + f"{100 * f['limit']:g}%"
    return (f"{label} {obs}{unit} vs {pred}{unit} {where} ({format_percent(f['change'])}, limit "
            f"{lim}, {contract.NAMES[f['status']]})")


def _regression(tok: Mapping[str, Any], step: Mapping[str, Any],
                commit: Mapping[str, Any] | None) -> str:
    below = (f"observed tok/s is {_pct(tok['change'])} "
             f"{'below' if tok['change'] < 0 else 'above'} the prediction")
    if commit is None:  # offline, tok/s alone: the step time it implies
        word = "above" if step["change"] >= 0 else "below"
        advice = STEP_ADVICE if step["status"] == REGRESSION else \
            "inside the step-time tolerance: measure avg commit (--observed-commit) to decide"
        return (f"{below}; with avg commit as predicted, step time is {_pct(step['change'])} "
                f"{word} the fit at this context: {advice}")
    parts = [_move("step time", step, " ms", "on the fit"),
             _move("avg commit", commit, "", "as predicted")]
    step_bad, commit_bad = step["status"] == REGRESSION, commit["status"] == REGRESSION
    if step_bad and commit_bad:
        advice = f"both factors regressed: {STEP_ADVICE}; and {COMMIT_ADVICE}"
    elif step_bad:
        advice = STEP_ADVICE
    elif commit_bad:
        advice = COMMIT_ADVICE
    else:
        advice = ("neither factor alone is past its tolerance: look at prefill, concurrency and "
                  "the client")
    return f"{below}: {'; '.join(parts)} — {advice}"


def _why_slow(pred: Prediction, baseline: Baseline) -> str:
    """What separates this prediction from the baseline's fastest case (the headline figure
    people remember): long context (step time) and low-acceptance text (avg commit)."""
    best = max((c for c in baseline.cases.values() if "tok_s" in c.metrics),
               key=lambda c: c.metrics["tok_s"].median, default=None)
    if best is None or "step_ms" not in best.metrics or "avg_commit" not in best.metrics:
        return ""
    step_ratio = pred.step_ms.value / best.metrics["step_ms"].median
    commit_ratio = pred.avg_commit.value / best.metrics["avg_commit"].median
    reasons = []
    if step_ratio > 1.1:
        reasons.append(f"long context (step time "
                       f"{format_value('step_ms', best.metrics['step_ms'].median)} → "
                       f"{format_value('step_ms', pred.step_ms.value)} ms)")
    if commit_ratio < 0.9:
        reasons.append(f"low-acceptance text (avg commit "
                       f"{format_value('avg_commit', best.metrics['avg_commit'].median)} → "
                       f"{format_value('avg_commit', pred.avg_commit.value)})")
    if not reasons:
        return ""
    return (f" — {' and '.join(reasons)} against the baseline's fastest case {best.id} "
            f"({best.metrics['tok_s'].median:.1f} tok/s)")


def curve_of(baseline: Baseline, pred: Prediction, noise: NoiseModel | None = None,
             conc: ConcurrencyBaseline | None = None, steps: int = 40
             ) -> tuple[list[dict[str, float]], list[dict[str, float]]]:
    """The prediction's tok/s and band over prompt context for its class and concurrency (the
    card's curve), and the baseline's measured cases of the class (its points)."""
    cases = class_cases(baseline, pred.text_class)
    top = max([pred.context, *(c.context for c in cases)]) * 1.15
    curve = []
    for i in range(steps + 1):
        ctx = top * i / steps
        p = predict(baseline, pred.text_class, ctx, output_tokens=pred.output_tokens,
                    concurrency=pred.concurrency, noise=noise, conc=conc)
        low, high = p.tok_s.bounds()
        curve.append({"context": ctx, "tok_s": p.tok_s.value, "low": low, "high": high})
    points = [{"context": float(c.context), "tok_s": c.metrics["tok_s"].median}
              for c in cases if "tok_s" in c.metrics and c.output_tokens == pred.output_tokens]
    return curve, points


def closest_class(baseline: Baseline, context: float, output_tokens: int,
                  avg_commit: float | None) -> tuple[str, str]:
    """The baseline's text class whose avg commit at this context is nearest the observed one
    (live traffic does not say its class), and the sentence saying so."""
    names = sorted({c.text_class for c in baseline.cases.values()})
    if len(names) == 1:
        return names[0], f"class {names[0]}: the baseline's only one"
    if avg_commit is None:
        raise ConfigError("the server reports no avg commit, so explain cannot tell the "
                          f"traffic's text class: give --class (one of {', '.join(names)}).")
    x = mean_context(context, output_tokens)
    commits = {n: _commit_at(class_cases(baseline, n), x)[0] for n in names}
    best = min(names, key=lambda n: abs(math.log(avg_commit / commits[n])))
    return best, (f"class {best}: its avg commit at this context "
                  f"({format_value('avg_commit', commits[best])}) is the nearest to the observed "
                  f"{format_value('avg_commit', avg_commit)} (--class to choose)")
