"""The sweep's verdict: its factors' statuses combined, in one sentence, with its resolution.

Each factor that is not a plain pass gets a sentence (what moved, where, and what the contract
made of it); a tok/s regression is split into its factors' shares and named by the largest;
the verdict carries, as data, what the sweep could have seen (:meth:`SweepResult.resolution`:
the smallest change per factor it catches with 95 % power), which the closing block, the
report and results.json print.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...core import contract, interval
from ...core.contract import IMPROVED, NOTED, PASS, REGRESSION
from ...core.limits import MINUS, format_ci, format_percent
from ...core.verdict import Scope, Verdict
from ..attribution import SURE_LEVEL
from ..hints import ACCEPTANCE_HINT, PREFILL_HINT, REFRESH_HINT, STEP_HINT, Rerun, plain_rerun
from .estimate import Estimate
from .factor import Factor
from .factortest import SWEEP_BETA, SWEEP_TOLERANCE, FactorResult


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
    beta: float = SWEEP_BETA
    # Cases whose acceptance exact acceptance settled as unchanged (plugin/sweeprun.py leaves
    # their avg commit out of the acceptance factor): in a tok/s drop's split their avg
    # commit moved by nothing, not by an unknown amount.
    settled: int = 0

    @property
    def regressed(self) -> bool:
        return any(r.regressed for r in self.results)

    @property
    def status(self) -> contract.Status:
        """The sweep's status: its factors' combined by the contract's one priority order
        (no factor at all is undetermined: nothing was judged)."""
        return contract.combine(r.status for r in self.results)

    def verdict(self, rerun: Rerun | None = None) -> Verdict:
        """The sweep's own verdict, its status the contract's, naming each factor that is not a
        plain pass; its resolution rides as data (``details["resolution"]``). ``rerun``
        builds the command an undetermined sweep advises (:data:`specperf.judge.hints.Rerun`:
        the plugin's is the run's own)."""
        details = {r.estimate.factor.key: _detail(r) for r in self.results}
        seen = self.resolution_dict()
        status = self.status
        if status == PASS:
            moves = ", ".join(_move_text(r) for r in self.results)
            coarse = [r for r in self.results if r.passed_at is not None]
            at = f" {_coarse_sentence(coarse, self.tolerance)}" if coarse else ""
            return Verdict(self.label, PASS, f"no regression across the {self.label}: "
                           f"{moves}.{at}", None, details, resolution=seen, scope=Scope.SWEEP)
        shown = [r for r in self.results if r.status == status]
        message = _once(" ".join(_status_sentence(r, self.label, self.tolerance, self.results,
                                                  self.settled) for r in shown))
        if status == contract.UNDETERMINED:
            message += f" {_advice(shown, rerun)}"
        rest = [r for r in self.results if r.status != status]
        others = f" Otherwise: {', '.join(_move_text(r) for r in rest)}." \
            if rest and status != REGRESSION else ""
        return Verdict(self.label, status, f"{message}{others}", None, details,
                       resolution=seen, factor=self.factor() if status == REGRESSION else "",
                       scope=Scope.SWEEP)

    def factor(self) -> str:
        """The factor a regressed sweep names (views/headline.py FACTORS): the factors that
        regressed, or for tok/s alone the largest share of its drop."""
        moved = {r.estimate.factor.name for r in self.results if r.regressed} - {"tok/s"}
        rate = next((r.estimate for r in self.results if r.estimate.factor.name == "tok/s"
                     and r.regressed), None)
        shares = _shares(rate, self.results, self.settled) if rate is not None else None
        cause = _cause(shares, _sure(self.results))[0] if shares else ""
        if cause == "prefill" and not moved:
            return cause
        # A tok/s drop's split adds the factors it names (the larger share, and the smaller
        # when sure) to those that regressed on their own: a step rise past its limit beside
        # an acceptance drop that stayed undetermined alone is both, as its sentence says.
        moved |= set(cause.split("+")) - {"prefill", ""}
        if moved == {"step", "acceptance"}:
            return "acceptance+step"
        return next(iter(moved), "")

    def resolution(self) -> dict[str, float]:
        """What the sweep could have seen: per factor, the smallest change in its bad direction
        it catches with 95 % power (signed, e.g. −0.06 for tok/s); acceptance by text class
        (``avg_commit:<class>``), and ``avg_commit`` the coarsest of them."""
        out: dict[str, float] = {}
        for r in self.results:
            f = r.estimate.factor
            key = {"tok/s": "tok_s", "step": "step_ms"}.get(f.name, f"avg_commit:{f.scope}")
            out[key] = r.resolution
        commits = [v for k, v in out.items() if k.startswith("avg_commit:")]
        if commits:
            out["avg_commit"] = min(commits)
        return out

    def resolution_dict(self) -> dict[str, Any]:
        """The resolution as the record keeps it: the factors', the power, the noise's text
        and the requests the sweep added."""
        return {"scope": self.label, "power": 1.0 - self.beta,
                "factors": self.resolution(),
                "noise": next((r.estimate.noise for r in self.results if r.estimate.noise), ""),
                "extra_requests": self.extra, "extra_s": self.extra_s}


RESOLUTION_NAMES = {"tok_s": "tok/s", "step_ms": "step time", "avg_commit": "avg commit"}


def resolution_text(resolution: Mapping[str, Any]) -> str:
    """'this run sees: tok/s −6.1%, step time +5.0%, avg commit −4.2% (95% power; …)', from
    a recorded resolution (:meth:`SweepResult.resolution_dict`)."""
    found = resolution.get("factors") or {}
    parts = [f"{name} {format_percent(found[k])}" for k, name in RESOLUTION_NAMES.items()
             if isinstance(found.get(k), (int, float)) and math.isfinite(found[k])]
    noise = resolution.get("noise") or ""
    power = f"{100 * float(resolution.get('power', 0.95)):g}% power"
    return f"this run sees: {', '.join(parts)} ({power}{'; ' + noise if noise else ''})"


def _once(message: str) -> str:
    """The advice said once: a factor's sentence after the tok/s one that already named the
    same hint ends at its figures."""
    for hint in (STEP_HINT, ACCEPTANCE_HINT, PREFILL_HINT):
        first = message.find(hint)
        if first >= 0:
            head, tail = message[:first + len(hint)], message[first + len(hint):]
            message = head + tail.replace(f" \u2014 {hint}", "")
    return message


def _coarse_sentence(coarse: Sequence[FactorResult], tolerance: float) -> str:
    """Why a pass was judged at the run's resolution and not at the tolerance."""
    what = ", ".join(f"{_what(r.estimate.factor)} beyond {format_percent(r.passed_at or 0.0)}"
                     for r in coarse)
    noise = next((r.estimate.noise for r in coarse if r.estimate.noise), "")
    return (f"It rules out {what}; the run-to-run noise ({noise}) keeps it from telling "
            f"a change of the {_pct(tolerance)} sweep tolerance from none.")


def _advice(shown: Sequence[FactorResult], rerun: Rerun | None = None) -> str:
    """What would decide an undetermined sweep, said once for all its factors: more requests
    only when they are what keeps it wide; otherwise the run-to-run noise is."""
    if any(r.estimate.run_var > r.estimate.request_var for r in shown):
        return ("The run-to-run noise keeps it wide and more requests do not shrink it: "
                "judge a deploy against a same-night reference (specperf gate "
                "--save-reference DIR before it, --reference DIR after it), or merge the "
                "baseline from several nights (--specperf-baseline-runs 5).")
    command = (rerun or plain_rerun)("--specperf-repeats", "6")
    return f"More requests would decide it: {command}."


def _ci_text(est: Estimate, level: float = 0.95) -> str:
    """The interval at ``level`` (the one that decided, see FactorResult.level)."""
    return format_ci(*est.ci(level), level=level)


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
    return f"{100 * fraction:.2g}%"


def _status_sentence(result: FactorResult, label: str, tolerance: float,
                     others: Sequence[FactorResult] = (), settled: int = 0) -> str:
    """One factor's sentence: what moved, where, and what the contract made of it."""
    est = result.estimate
    name = est.factor.name
    worse = est.factor.sign * est.change > 0
    rises_worse = est.factor.sign > 0
    verb = "rose" if worse == rises_worse else "fell"
    what = {"tok/s": "tok/s", "step": "step time"}.get(name, "avg commit")
    scope = f" on {est.factor.scope} text" if name == "acceptance" else ""
    head = (f"{what} {verb} {100 * abs(est.change):.1f}%{scope} across the {label} "
            f"({_ci_text(est, result.level)}, {_where(est)})")
    tol = _pct(tolerance)
    if result.status == REGRESSION:
        if name == "tok/s":
            return f"{head}: {_split(est, others, settled)}."
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
    return (f"{head} \u2014 the interval straddles the {tol} sweep tolerance, so it is "
            f"neither a pass nor a fail.")


def _shares(rate: Estimate, others: Sequence[FactorResult],
            settled: int = 0) -> dict[str, float] | None:
    """A tok/s drop's shares (tok/s = avg commit / step time): each factor's share of the log
    drop, and the rest (prefill, transport) so that they add up; None when a factor is
    missing. ``settled`` cases' acceptance is known unchanged: a change of nothing."""
    total = rate.d  # positive: tok/s fell
    step = next((r.estimate for r in others if r.estimate.factor.name == "step"), None)
    accs = [r.estimate for r in others if r.estimate.factor.name == "acceptance"]
    if step is None or not (accs or settled) or total <= 0:
        return None
    cases = sum(len(a.factor.case_ids) for a in accs) + settled
    acc_d = sum(a.d * len(a.factor.case_ids) for a in accs) / cases
    shares = {"step time": step.d / total, "acceptance": acc_d / total}
    shares[_REST] = 1.0 - sum(shares.values())
    return shares


def _split(rate: Estimate, others: Sequence[FactorResult], settled: int = 0) -> str:
    """A tok/s drop split into its factors' shares, named by the largest."""
    shares = _shares(rate, others, settled)
    step = next((r.estimate for r in others if r.estimate.factor.name == "step"), None)
    if shares is None or step is None:
        return ("acceptance or step time was not measured, so the drop cannot be attributed: "
                "check the acceptance source")
    commit = math.expm1(-shares["acceptance"] * rate.d)
    named = ", ".join(f"{n} {round(100 * v):d}%".replace("-", MINUS) for n, v in shares.items()
                      if abs(v) >= 0.05 or n != _REST)
    return (f"step time {format_percent(step.change)} and avg commit {format_percent(commit)} "
            f"(shares of the drop: {named}) \u2014 {_cause(shares, _sure(others))[1]}")


_REST = "the rest (prefill, transport)"


def _sure(results: Sequence[FactorResult]) -> dict[str, bool]:
    """Per share of a tok/s drop, whether its factor is sure to have worsened: its interval at
    the attribution's SURE_LEVEL lies on the bad side of no change (acceptance: any text
    class's)."""
    def worse(est: Estimate) -> bool:
        return est.d - interval.half_width(est.se, est.df, SURE_LEVEL) > 0

    return {"step time": any(worse(r.estimate) for r in results
                             if r.estimate.factor.name == "step"),
            "acceptance": any(worse(r.estimate) for r in results
                              if r.estimate.factor.name == "acceptance")}


def _cause(shares: dict[str, float], sure: Mapping[str, bool]) -> tuple[str, str]:
    """The drop named by its largest share, as a factor and its words: step time, acceptance,
    or the rest (prefill or transport: what is neither factor); two factors of a quarter or
    more each are both when the smaller one is ``sure`` to have worsened (a smaller share
    inside the run-to-run noise is that noise, judge/attribution.py)."""
    main = max(shares, key=lambda n: shares[n])
    if main == _REST:
        return "prefill", (f"{PREFILL_HINT} (neither step time nor acceptance explains most "
                           f"of it; the cases' prefill (TTFT) figures say whether it is "
                           f"prefill or transport)")
    minor = "acceptance" if main == "step time" else "step time"
    if shares[minor] >= 0.25 and sure.get(minor, False):
        return "acceptance+step", ("acceptance and step-time regression: check the drafter and "
                                   "the text, then the kernels, attention backend and KV cache")
    return ("step", STEP_HINT) if main == "step time" else ("acceptance", ACCEPTANCE_HINT)


def _detail(result: FactorResult) -> dict[str, Any]:
    est = result.estimate
    # The interval that decided, at its level: the one the sentence prints, so a view that
    # shows the figure shows the same interval (one figure, one interval).
    low, high = est.ci(result.level)
    out = {"change": est.change, "low": low, "high": high, "level": result.level,
           "status": str(result.status), "se": est.se,
           "df": est.df if math.isfinite(est.df) else 1e9,
           "power": result.power, "regressed": float(result.regressed),
           "noted": float(result.status == NOTED), "resolution": result.resolution}
    if result.passed_at is not None:
        out["passed_at"] = result.passed_at
    return out
