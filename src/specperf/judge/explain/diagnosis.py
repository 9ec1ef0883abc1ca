"""The sentence of ``specperf explain``: which factor explains an observation's difference
from its prediction, the status that gives, and what to look for.

- the observation is inside the prediction: it is what this deployment does on this traffic
  (the sentence names what makes it slower than the baseline's fastest case);
- a factor is past its tolerance: a step-time or acceptance regression to look for.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...baselines.store import Baseline
from ...core import contract
from ...core.contract import IMPROVED, REGRESSION
from ...core.limits import MINUS, format_percent, format_value
from ...core.model import attribute
from .observation import Observation
from .prediction import Prediction

NIGHTLY = "run the nightly job against this deployment"
STEP_ADVICE = ("a step-time regression: check the kernels, attention backend and KV cache "
               f"({NIGHTLY})")
COMMIT_ADVICE = f"an acceptance regression: check the drafter and the text ({NIGHTLY})"


def _pct(fraction: float) -> str:
    return f"{abs(100.0 * fraction):.0f}%"


def _predicted_text(pred: Prediction) -> str:
    low, high = pred.tok_s.bounds()
    generated = pred.output_tokens // 2
    conc = f" at concurrency {pred.concurrency:.1f}" if pred.concurrency >= 1.5 else ""
    return (f"predicted {low:.1f}–{high:.1f} tok/s (avg commit "
            f"{format_value('avg_commit', pred.avg_commit.value)} for {pred.text_class}, step "
            f"time {format_value('step_ms', pred.step_ms.value)} ms at {pred.context:.0f} tokens "
            f"+ {generated} generated{conc}; {pred.noise})")


def diagnose(obs: Observation, pred: Prediction, factors: Mapping[str, Mapping[str, Any]],
             baseline: Baseline) -> tuple[str, str, str, str]:
    """The status, the factor that explains the difference, the basis (the prediction) and
    the conclusion, from the judged ``factors`` (tok/s, step time and, when observed, avg
    commit). The sentence is ``observed …; {basis}: {conclusion}``; the terminal says the
    conclusion first."""
    tok = factors["tok_s"]
    step, commit = factors["step_ms"], factors.get("avg_commit")
    head = _predicted_text(pred)
    notes = "".join(f" Note: {n}." for n in pred.notes)
    bad = [name for name, f in (("step time", step), ("acceptance", commit))
           if f is not None and f["status"] == REGRESSION]
    if tok["status"] == REGRESSION or bad:
        return REGRESSION, _factor_name(bad, step, commit), head, \
            f"{_regression(tok, step, commit)}.{notes}"
    if tok["status"] == IMPROVED:
        return IMPROVED, "none", head, (f"the observation is {_pct(tok['change'])} faster than "
                                        f"the baseline predicts — the baseline may be stale; "
                                        f"refresh it with --specperf-update-baselines.{notes}")
    if tok["status"] == contract.UNDETERMINED:
        return tok["status"], "none", head, (
            f"the observation is {_pct(tok['change'])} "
            f"{'below' if tok['change'] < 0 else 'above'} the prediction, which the baseline's "
            f"uncertainty cannot tell from its tolerance — undetermined: a longer window, or "
            f"the box's history (--history), would decide.{notes}")
    why = _why_slow(pred, baseline)
    return tok["status"], "none", head, (f"the observation is what this deployment does on "
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
