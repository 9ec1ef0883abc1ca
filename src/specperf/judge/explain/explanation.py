"""Explain a production observation from the deployment's baseline (``specperf explain``).

A dashboard shows a tok/s figure; :func:`specperf.judge.explain.prediction.predict` says what the
baseline predicts for that traffic, with its interval. :func:`explain` then judges the
observation and each of its two factors with the contract
(:func:`specperf.core.contract.status`) and :mod:`specperf.judge.explain.diagnosis` says which
factor explains the difference, in one sentence.

Exit codes are the gate's (:data:`EXIT_OK`, :data:`EXIT_REGRESSION`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...baselines.concurrency import ConcurrencyBaseline
from ...baselines.store import Baseline
from ...core import contract
from ...core.contract import REGRESSION, Change
from ...core.limits import tolerance
from ...core.noise import NoiseModel
from ...servers.livemetrics import LiveObservation
from .diagnosis import diagnose
from .observation import Observation
from .prediction import Figure, Prediction, Z, curve_of, predict

EXIT_OK, EXIT_REGRESSION = 0, 1


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
    # The sentence's parts: the prediction, and what the observation means against it (the
    # terminal prints the meaning first).
    basis: str = ""
    conclusion: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"status": contract.NAMES.get(self.status, self.status), "factor": self.factor,
                "message": self.message, "exit_code": self.exit_code,
                "observation": self.observation.to_dict(),
                "prediction": self.prediction.to_dict(),
                "factors": {k: {**v, "status": contract.NAMES.get(v["status"], v["status"])}
                            for k, v in self.factors.items()},
                "curve": [dict(p) for p in self.curve], "points": [dict(p) for p in self.points]}


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
    status, factor, basis, conclusion = diagnose(obs, pred, factors, baseline)
    regressed = any(f["status"] == REGRESSION for f in factors.values())
    code = EXIT_REGRESSION if regressed else EXIT_OK
    curve, points = curve_of(baseline, pred, noise, conc)
    message = f"observed {obs.tok_s:.1f} tok/s; {basis}: {conclusion}"
    return Explanation(status, factor, message, code, obs, pred, factors, curve, points, basis,
                       conclusion)


@dataclass(frozen=True)
class Outcome:
    """An explanation and what the live form read (None offline)."""

    explanation: Explanation
    live: LiveObservation | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    simulated: bool = False  # the live server is a simulator: its times are simulated

    def to_dict(self) -> dict[str, Any]:
        out = self.explanation.to_dict()
        out["live"] = None if self.live is None else self.live.to_dict()
        out["notes"] = list(self.notes)
        out["simulated"] = self.simulated
        return out
