"""The sweep's verdict: its factors' statuses combined, in one sentence with the power reached.

Each factor that is not a plain pass gets a sentence (what moved, where, and what the contract
made of it); a tok/s regression is split into its factors' shares; every sweep verdict ends
with the power it reached against the effect it looks for.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..core import contract
from ..core.contract import IMPROVED, NOTED, PASS, REGRESSION
from ..core.limits import MINUS, format_percent
from .estimate import Estimate
from .factor import Factor
from .factortest import SWEEP_TOLERANCE, FactorResult
from .hints import ACCEPTANCE_HINT, REFRESH_HINT, STEP_HINT
from .outcome import Verdict


@dataclass(frozen=True)
class SweepResult:
    """The sweep's tests, the requests they added, and the verdict sentence."""

    label: str
    results: tuple[FactorResult, ...]
    extra: int
    extra_s: float
    alpha: float
    effect: float
    tolerance: float = SWEEP_TOLERANCE

    @property
    def regressed(self) -> bool:
        return any(r.regressed for r in self.results)

    @property
    def status(self) -> str:
        """The sweep's status: its factors' combined by the contract's one priority order."""
        return contract.combine(r.status for r in self.results) if self.results else PASS

    def verdict(self) -> Verdict:
        """The sweep's own verdict, its status the contract's, naming each factor that is not a
        plain pass."""
        details = {r.estimate.factor.key: _detail(r) for r in self.results}
        power = self._power_clause()
        status = self.status
        if status == PASS:
            moves = ", ".join(_move_text(r) for r in self.results)
            return Verdict(self.label, PASS, f"no regression across the {self.label}: "
                           f"{moves}. {power}", None, details)
        shown = [r for r in self.results if r.status == status]
        message = " ".join(_status_sentence(r, self.label, self.tolerance, self.results)
                           for r in shown)
        rest = [r for r in self.results if r.status != status]
        others = f" Otherwise: {', '.join(_move_text(r) for r in rest)}." \
            if rest and status != REGRESSION else ""
        return Verdict(self.label, status, f"{message}{others} {power}", None, details)

    def _power_clause(self) -> str:
        size = f"{100 * self.effect:g}%"
        rate = [r.power for r in self.results if r.estimate.factor.name == "tok/s"]
        step = [r.power for r in self.results if r.estimate.factor.name == "step"]
        acc = [f"{r.power:.2f} on {r.estimate.factor.scope}" for r in self.results
               if r.estimate.factor.name == "acceptance"]
        parts = [f"a {size} tok/s fall with {rate[0]:.2f}"] if rate else []
        if step:
            parts.append(f"a {size} step-time rise with {step[0]:.2f}")
        if acc:
            parts.append(f"a {size} acceptance fall with {' and '.join(acc)}")
        parts[0] = parts[0].replace(" with ", " with probability ", 1)
        noise = next((r.estimate.noise for r in self.results if r.estimate.noise), "")
        return (f"Would have caught {', '.join(parts)} ({self.extra} extra requests, "
                f"{self.extra_s:.0f} s; false alarms \u2264 {100 * self.alpha:g}% per sweep at "
                f"a change of the {_pct(self.tolerance)} sweep tolerance; {noise}).")


def _ci_text(est: Estimate) -> str:
    low, high = est.ci()
    return f"95% CI {format_percent(low)} to {format_percent(high)}"


def _what(factor: Factor) -> str:
    return {"tok/s": "tok/s", "step": "step time"}.get(factor.name, f"avg commit {factor.scope}")


def _move_text(result: FactorResult) -> str:
    est = result.estimate
    return f"{_what(est.factor)} {format_percent(est.change)} ({_ci_text(est)})"


def _where(est: Estimate) -> str:
    """Every case moved the bad way, or which did: a change at some contexts only is a
    different regression (the slope: attention, KV cache) than one at every context."""
    worse = [cid for cid, d in est.per_case.items() if d > 0]
    if len(worse) == len(est.per_case):
        return "every context" if est.factor.name == "step" else "every case"
    if not worse:
        return "no case moved the bad way"
    return f"{len(worse)} of {len(est.per_case)} cases: {', '.join(worse)}"


def _pct(fraction: float) -> str:
    return f"{round(100 * fraction, 1):g}%"


def _status_sentence(result: FactorResult, label: str, tolerance: float,
                     others: Sequence[FactorResult] = ()) -> str:
    """One factor's sentence: what moved, where, and what the contract made of it."""
    est = result.estimate
    name = est.factor.name
    worse = est.factor.sign * est.change > 0
    rises_worse = est.factor.sign > 0
    verb = "rose" if worse == rises_worse else "fell"
    what = {"tok/s": "tok/s", "step": "step time"}.get(name, "avg commit")
    scope = f" on {est.factor.scope} text" if name == "acceptance" else ""
    head = (f"{what} {verb} {100 * abs(est.change):.1f}%{scope} across the {label} "
            f"({_ci_text(est)}, {_where(est)})")
    tol = _pct(tolerance)
    if result.status == REGRESSION:
        if name == "tok/s":
            return f"{head}: {_split(est, others)}."
        return f"{head} \u2014 {STEP_HINT if name == 'step' else ACCEPTANCE_HINT}."
    if result.status == NOTED:
        low, high = est.ci()
        if contract.inside(contract.Change(est.change, low, high), -est.factor.sign, tolerance):
            return (f"{head} \u2014 a change inside the {tol} sweep tolerance: noted, not a "
                    f"regression.")
        return (f"{head} \u2014 the sequential test ruled out the effect it looks for, "
                f"though the 95% interval reaches past the {tol} sweep tolerance: noted, not "
                f"a regression.")
    if result.status == IMPROVED:
        return f"{head} \u2014 better than the baseline beyond the {tol} sweep tolerance: " \
            f"{REFRESH_HINT}."
    return f"{head} \u2014 {_undecided(est, tol)}"


def _undecided(est: Estimate, tol: str) -> str:
    """What would decide an interval that straddles the tolerance: more requests only when
    they are what keeps it wide; otherwise the run-to-run noise is, and another night is."""
    if est.run_var > est.request_var:
        return (f"the interval straddles the {tol} sweep tolerance and is wide from the "
                f"run-to-run noise ({est.noise}), which more requests do not shrink: judge a "
                f"deploy against a same-night reference (specperf gate --save-reference DIR "
                f"before it, --reference DIR after it), write the baseline from several nights "
                f"(--specperf-update-baselines --specperf-baseline-runs 5), or set "
                f"--specperf-sweep-tolerance to the change that matters.")
    return (f"the interval straddles the {tol} sweep tolerance after the request budget, so "
            f"it is neither a pass nor a fail: measure again with more repeats (pytest "
            f"perf_tests -m context_scaling --specperf-repeats 6), or set "
            f"--specperf-sweep-tolerance to the change that matters.")


def _split(rate: Estimate, others: Sequence[FactorResult]) -> str:
    """A tok/s drop split into its factors (tok/s = avg commit / step time): each factor's
    share of the log drop, and the rest (prefill, transport) so that the shares add up."""
    total = rate.d  # positive: tok/s fell
    step = next((r.estimate for r in others if r.estimate.factor.name == "step"), None)
    accs = [r.estimate for r in others if r.estimate.factor.name == "acceptance"]
    if step is None or not accs or total <= 0:
        return ("acceptance or step time was not measured, so the drop cannot be attributed: "
                "check the acceptance source")
    cases = sum(len(a.factor.case_ids) for a in accs)
    acc_d = sum(a.d * len(a.factor.case_ids) for a in accs) / cases
    commit = math.expm1(-acc_d)
    shares = {"step time": step.d / total, "acceptance": acc_d / total}
    shares["the rest (prefill, transport)"] = 1.0 - sum(shares.values())
    named = ", ".join(f"{n} {round(100 * v):d}%".replace("-", MINUS) for n, v in shares.items()
                      if abs(v) >= 0.05 or n != "the rest (prefill, transport)")
    main = max(("step time", "acceptance"), key=lambda n: shares[n])
    hint = STEP_HINT if main == "step time" else ACCEPTANCE_HINT
    if min(shares["step time"], shares["acceptance"]) >= 0.25:
        hint = ("acceptance and step-time regression: check the drafter and the text, then the "
                "kernels, attention backend and KV cache")
    return (f"step time {format_percent(step.change)} and avg commit {format_percent(commit)} "
            f"(shares of the drop: {named}) \u2014 {hint}")


def _detail(result: FactorResult) -> dict[str, float]:
    est = result.estimate
    low, high = est.ci()
    return {"change": est.change, "low": low, "high": high, "se": est.se, "df": est.df,
            "power": result.power, "regressed": float(result.regressed),
            "noted": float(result.status == NOTED)}
