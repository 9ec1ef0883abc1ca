"""What the deployment's baseline predicts a request should see (``specperf explain``).

The baseline knows what this deployment does on a text class at a context: its avg commit
per class and context, its step-time fit over context, its prefill and the concurrency
baseline's batch slope. :func:`predict` turns those into the tok/s a request should see, with
the judges' own model (:func:`specperf.core.model.predict_tok_s` and the context fit) and an
interval that carries the baseline's spreads and the run-to-run noise
(:mod:`specperf.core.noise`: production is another "night" than the baseline's).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...baselines.concurrency import ConcurrencyBaseline, ConcurrencyStore
from ...baselines.store import Baseline, BaselineStore, CaseBaseline
from ...core import interval
from ...core.errors import BaselineError, ConfigError
from ...core.limits import DEFAULT_TOLERANCES, format_value
from ...core.model import ContextFit, predict_tok_s
from ...core.noise import NoiseModel
from ...measure.sample import mean_context
from ..reconcile import base_rest

Z = interval.quantile(0.95)  # two-sided 95 % interval of the prediction
# A context further outside the fitted range than this share of the range is extrapolated.
FAR_OUTSIDE = 0.25


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
    return interval.median_se(summary)


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
            se = interval.combine((1 - w) * _rel_se(c0, "avg_commit"),
                                  w * _rel_se(c1, "avg_commit"))
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
    commit_sd = interval.se_of(commit_se**2, noise.of("avg_commit").comparison_var())
    step_sd = interval.se_of(fit_se**2, batch_se**2, noise.of("step_ms").comparison_var())
    # tok/s carries its own run-to-run noise once (not each factor's again) and both
    # factors' baseline errors.
    tok_sd = interval.se_of(commit_se**2, fit_se**2, batch_se**2,
                            noise.of("tok_s").comparison_var())
    tok = predict_tok_s(commit, step, n_out, prefill) * rest
    tol = {**DEFAULT_TOLERANCES, **baseline.tolerances, **near.tolerances}
    return Prediction(
        baseline.deployment, baseline.version, text_class, float(context), n_out, concurrency,
        Figure(commit, commit_sd, commit_src),
        Figure(step, step_sd, f"the baseline's {fit_class} context fit at {x:.0f} tokens"),
        Figure(tok, tok_sd, "predict_tok_s(avg commit, step time)"),
        prefill, rest, noise.of("tok_s").text(), tuple(notes + batch_notes), tol)


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
