"""Predict and reconcile: does a case's tok/s follow from its acceptance and step time?

tok/s is predicted twice from this run's avg commit (:func:`specperf.core.model.predict_tok_s`):
with this run's own step time (the model: acceptance × step time, plus prefill and the
baseline's own rest — its client and transport overhead), and with the step time the
baseline's context curve gives at the case's mean context. Each prediction's relative
difference from the observed tok/s carries an interval (z · the run's relative standard
errors, the curve's too), and the verdict contract (:mod:`specperf.core.contract`) judges it
against the case's tok/s tolerance:

- the model itself beyond the tolerance: **regression** (slower) or **improved** (faster) —
  something besides acceptance and step time moved (prefill, transport, the client);
- off the curve beyond the tolerance, while this run's own step time accounts for it:
  **noted** with reason ``explained`` — the model holds, the case's step-time verdict speaks;
- off the curve with no step time measured: regression or improved, as the curve says;
- otherwise the contract's word for the closer of the two (pass, noted, or undetermined when
  the interval straddles the tolerance).

It is decided when the case is judged (:func:`judge`, called by the run's state beside the
case verdict), travels with that verdict, and the record only copies it.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..core import contract, interval
from ..core.contract import EXPLAINED, IMPROVED, NOTED, PASS, REGRESSION, UNDETERMINED
from ..core.limits import format_percent, format_share, format_value
from ..core.model import ContextFit, predict_tok_s, rel_se, rest_ratio
from ..core.verdict import Verdict
from ..measure.sample import mean_context, sample_values

if TYPE_CHECKING:
    from ..baselines.store import CaseBaseline
    from ..measure.sample import Measurement

REFRESH_HINT = "refresh it with --specperf-update-baselines if this is intended"


@dataclass(frozen=True)
class Observed:
    """This run's medians at one case, with the relative standard error of their ratio."""

    tok_s: float
    avg_commit: float
    step_ms: float | None = None
    rel_se: float = 0.0
    z: float = 2.0


def observe(values: Mapping[str, Sequence[float]]) -> Observed | None:
    """This run's :class:`Observed` from its repeats' tok_s, avg_commit and step_ms values."""
    tok, commit, step = (values.get(m) or [] for m in ("tok_s", "avg_commit", "step_ms"))
    if not tok or not commit:
        return None
    errors = [rel_se(v) for v in (tok, commit, step) if v]
    n = min(len(v) for v in (tok, commit, step) if v)
    return Observed(statistics.median(tok), statistics.median(commit),
                    statistics.median(step) if step else None,
                    interval.se_of(*(e * e for e in errors)), interval.quantile(0.95, n - 1))


def base_rest(base: CaseBaseline | None, output_tokens: int, prefill_ms: float) -> float:
    """The baseline case's own rest (client, transport): 1.0 when it has no step time."""
    if base is None:
        return 1.0
    got = {m: base.metrics[m].median for m in ("tok_s", "avg_commit", "step_ms")
           if m in base.metrics}
    if len(got) < 3 or min(got.values()) <= 0:
        return 1.0
    return rest_ratio(got["tok_s"], got["avg_commit"], got["step_ms"], output_tokens,
                      prefill_ms)


@dataclass(frozen=True)
class Reconciled:
    """One case's reconcile row: the curve's prediction, the observation, the contract's
    status (and its reason) and the sentence."""

    case_id: str
    avg_commit: float
    predicted_step_ms: float
    predicted_tok_s: float
    observed_tok_s: float
    status: str
    message: str
    reason: str = ""

    @property
    def change(self) -> float:
        return self.observed_tok_s / self.predicted_tok_s - 1.0

    def to_dict(self) -> dict[str, Any]:
        return {"case_id": self.case_id, "avg_commit": self.avg_commit,
                "predicted_step_ms": self.predicted_step_ms,
                "predicted_tok_s": self.predicted_tok_s, "observed_tok_s": self.observed_tok_s,
                "change": self.change, "status": self.status, "reason": self.reason,
                "message": self.message}


def _judged(change: float, margin: float, tolerance: float) -> str:
    """The contract's status of tok/s ``change`` ± ``margin`` (must not fall)."""
    return contract.status(contract.Change(change, change - margin, change + margin), +1,
                           tolerance)


def reconcile(case_id: str, observed: Observed, base_fit: ContextFit, mean_ctx: float,
              output_tokens: int, tolerance: float, prefill_ms: float = 0.0,
              rest: float = 1.0) -> Reconciled | None:
    """The reconcile row of one case (see the module's docstring); None when the curve
    predicts no positive step time or nothing was committed. ``rest``: the baseline's own
    rest (:func:`base_rest`), so a steady client overhead on both sides is no news."""
    step = base_fit.predict_step_ms(mean_ctx)
    if step <= 0 or observed.avg_commit <= 0:
        return None
    # This run's own time to first token: prefill is no part of the context curve, and
    # leaving it out would call every short-output run "unexplained".
    predicted = predict_tok_s(observed.avg_commit, step, output_tokens, prefill_ms) * rest
    row = Reconciled(case_id, observed.avg_commit, step, predicted, observed.tok_s, PASS, "")
    curve = _judged(row.change, observed.z * interval.combine(
        observed.rel_se, base_fit.predict_se_ms(mean_ctx) / step), tolerance)
    own = _own_model(row, observed, output_tokens, tolerance, prefill_ms, rest)
    if own is not None and (own.status in (REGRESSION, IMPROVED)
                            or curve not in (REGRESSION, IMPROVED)):
        return own
    head = (f"observed tok/s {observed.tok_s:.1f} vs {predicted:.1f} predicted from this run's "
            f"acceptance ({observed.avg_commit:.2f}) and the baseline's context curve "
            f"({format_percent(row.change)})")
    return _curve_row(row, curve, head, observed, step, tolerance)


def _curve_row(row: Reconciled, curve: str, head: str, observed: Observed, step: float,
               tolerance: float) -> Reconciled:
    if curve in (REGRESSION, IMPROVED) and observed.step_ms is not None:
        return _with(row, NOTED, f"{head}: this run's step time "
                     f"{format_value('step_ms', observed.step_ms)} ms vs "
                     f"{format_value('step_ms', step)} ms on the curve explains it.", EXPLAINED)
    if curve == REGRESSION:
        return _with(row, REGRESSION, f"{head}: a slowdown neither acceptance nor the context "
                     f"curve explains — look at the server (KV cache fragmentation, other "
                     f"load, clocks).")
    if curve == IMPROVED:
        return _with(row, IMPROVED, f"{head}: faster than acceptance and the context curve "
                     f"predict — the baseline's fit may be stale; {REFRESH_HINT}.")
    return _with(row, curve, _quiet(head, curve, tolerance))


def _own_model(row: Reconciled, observed: Observed, output_tokens: int, tolerance: float,
               prefill_ms: float, rest: float) -> Reconciled | None:
    """The row judged by this run's own acceptance and step time (None without a step time):
    beyond the tolerance, a regression or an improvement neither explains."""
    if observed.step_ms is None or observed.step_ms <= 0:
        return None
    predicted = predict_tok_s(observed.avg_commit, observed.step_ms, output_tokens,
                              prefill_ms) * rest
    change = observed.tok_s / predicted - 1.0
    found = _judged(change, observed.z * observed.rel_se, tolerance)
    head = (f"observed tok/s {observed.tok_s:.1f} vs {predicted:.1f} predicted from this run's "
            f"acceptance ({observed.avg_commit:.2f}) and step time "
            f"({format_value('step_ms', observed.step_ms)} ms) ({format_percent(change)})")
    if found == REGRESSION:
        return _with(row, found, f"{head}: a slowdown neither acceptance nor step time "
                     f"explains — look at prefill, transport and the client (a proxy, TLS, "
                     f"the network).")
    if found == IMPROVED:
        return _with(row, found, f"{head}: faster than acceptance and step time predict — "
                     f"less client or transport overhead than the baseline's; {REFRESH_HINT}.")
    return _with(row, found, _quiet(head, found, tolerance))


def _quiet(head: str, found: str, tolerance: float) -> str:
    """The sentence of a row inside the tolerance, or undecided (empty for a plain pass)."""
    tol = f"{format_share(tolerance)}"
    if found == NOTED:
        return f"{head}: a difference inside the {tol} tok/s tolerance, beyond its noise: noted."
    if found == UNDETERMINED:
        return (f"{head}: the interval straddles the {tol} tok/s tolerance, so the model "
                f"neither holds nor fails here — measure the case with more repeats.")
    return ""


def _with(row: Reconciled, status: str, message: str, reason: str = "") -> Reconciled:
    return Reconciled(row.case_id, row.avg_commit, row.predicted_step_ms, row.predicted_tok_s,
                      row.observed_tok_s, status, message, reason)


def judge(measured: Measurement, base: CaseBaseline, fit: ContextFit | None,
          tolerance: float) -> Reconciled | None:
    """The reconcile row of a measured case against its baseline entry and the baseline's
    context fit of its text class (None when there is no fit or nothing to predict from).

    The baseline's rest is its own: with its own prefill (older files have none: this run's),
    so a slower prefill is predicted, not called unexplained."""
    case = measured.case
    observed = observe(sample_values(measured.measured))
    if fit is None or observed is None or base.output_tokens != case.output_tokens:
        return None
    ttft = measured.summary("ttft_ms")
    prefill = ttft.median if ttft is not None else 0.0
    base_prefill = base.metrics["ttft_ms"].median if "ttft_ms" in base.metrics else prefill
    return reconcile(case.id, observed, fit, mean_context(case.context, case.output_tokens),
                     case.output_tokens, tolerance, prefill,
                     base_rest(base, case.output_tokens, base_prefill))


def rows(verdicts: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The reconcile rows the case verdicts carry (``Verdict.reconcile``), by case id."""
    found = {str(v["case_id"]): dict(v["reconcile"]) for v in verdicts if v.get("reconcile")}
    return [found[k] for k in sorted(found)]


def attach(verdict: Verdict, measured: Measurement, base: CaseBaseline,
           fit: ContextFit | None, tolerance: float) -> Verdict:
    """The case verdict carrying its reconcile row (:func:`judge`), when there is one."""
    found = judge(measured, base, fit, tolerance)
    return verdict if found is None else replace(verdict, reconcile=found.to_dict())
