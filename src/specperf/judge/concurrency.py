"""Concurrency verdicts: each level like a case, plus its aggregate; the batch slope like a fit.

A level (C concurrent requests of one case) is judged with the case judge
(:func:`specperf.judge.verdict.judge_case`) on its per-request medians — tok/s, avg commit,
step time, decode tok/s, attributed to acceptance or step time — and then on its aggregate
tok/s (all tokens over the burst wall), which falls when the server batches worse even if
no single request shows it clearly. The slope of step time against batch size carries its
interval and is judged by the contract like the context slope: a regression only when the
whole interval is past the tolerance.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from ..baselines.store import CaseBaseline
from ..core import contract, interval
from ..core.contract import IMPROVED, NOTED, PASS, REGRESSION, UNDETERMINED
from ..core.limits import ARROW, Move, format_percent, tolerance
from ..core.model import ContextFit
from ..core.noise import NoiseModel
from ..core.stats import Summary
from ..core.verdict import NotJudged, Scope, Verdict
from .fit import slope_limit_text
from .hints import REFRESH_HINT, STEP_HINT, Rerun, plain_rerun
from .verdict import case_se, judge_case

AGGREGATE = "aggregate tok/s"
BATCH_HINT = ("batching regression: step time grows faster with batch size than in the "
              "baseline; check the batched kernels, the scheduler and the KV cache")


def judge_level(level: str, current: Mapping[str, Summary], base: Mapping[str, Summary],
                tolerances: Mapping[str, float], case: CaseBaseline,
                noise: NoiseModel | None = None) -> Verdict:
    """One level against its baseline medians: the case judge, then the aggregate; both
    with the run-to-run noise of ``noise`` (None: point estimates)."""
    entry = CaseBaseline(case.text_class, case.context, case.output_tokens,
                         {m: s for m, s in base.items() if m != "agg_tok_s"}, {})
    verdict = judge_case(level, {m: s for m, s in current.items() if m != "agg_tok_s"},
                         entry, tolerances, noise=noise)
    if "agg_tok_s" not in current or not base.get("agg_tok_s"):
        return verdict
    se, df = case_se(current["agg_tok_s"], base["agg_tok_s"], noise, "tok_s", 1)
    agg = Move("tok_s", base["agg_tok_s"].median, current["agg_tok_s"].median,
               tolerance(tolerances, "tok_s"), label=AGGREGATE, se=se, df=df)
    details = {**verdict.details, "agg_tok_s": agg.detail()}
    status = contract.combine([verdict.status, agg.status])
    if verdict.status == REGRESSION or status != REGRESSION:
        return Verdict(level, status, _join(verdict.message, f"; {agg.text()}"),
                       verdict.attribution, details, scope=Scope.CONCURRENCY)
    return Verdict(level, REGRESSION,
                   f"{agg.text(limit=True)} while every request stayed within its limits "
                   f"({verdict.message.removeprefix(level + ': ')}) — the burst as a whole "
                   f"got slower: {STEP_HINT}.", verdict.attribution, details,
                   scope=Scope.CONCURRENCY)


def _join(message: str, extra: str) -> str:
    """The case sentence with the aggregate move added before its closing dash clause."""
    head, sep, tail = message.partition(" — ")
    return f"{head}{extra}{sep}{tail}" if sep else f"{message}{extra}"


def judge_batch_fit(name: str, current: ContextFit, base: ContextFit,
                    slope_tolerance: float, step_tolerance: float | None = None,
                    far: float = 0.0, rerun: Rerun | None = None) -> Verdict | NotJudged:
    """The slope of step time per extra request in the batch against the baseline's; its limit
    is at least what moves the baseline's step time at the largest batch ``far`` by
    ``step_tolerance`` (:func:`specperf.core.contract.slope_limit`); ``rerun`` builds the
    command an undetermined verdict advises (:data:`specperf.judge.hints.Rerun`)."""
    case_id = f"{name}-batch-fit"
    old, new = base.b_ms_per_token, current.b_ms_per_token
    if old <= 0:
        return NotJudged(f"{name}: the baseline's step time does not grow with batch size "
                         f"({old:.2f} ms per request), so its slope cannot be compared — "
                         f"write a new version with --specperf-update-baselines.")
    limit = contract.slope_limit(slope_tolerance, old, base.predict_step_ms(far), far,
                                 step_tolerance)
    se_new, se_old = current.b_se_ms_per_token or 0.0, base.b_se_ms_per_token or 0.0
    margin = interval.half_width(interval.combine(se_new, (1.0 + limit) * se_old), current.dof) \
        if current.b_se_ms_per_token is not None else 0.0
    change = new / old - 1.0
    head = (f"{name}: step time per extra request in the batch {old:.2f} {ARROW} {new:.2f} ± "
            f"{margin:.2f} ms ({format_percent(change)}, limit "
            f"{slope_limit_text(limit, slope_tolerance, step_tolerance, f'C = {far:.0f}')})")
    details = {"slope": {"base": old, "new": new, "change": change, "limit": limit,
                         "base_se": se_old, "new_se": se_new, "margin": margin}}
    bounds = contract.Change(change, (new - margin) / old - 1.0, (new + margin) / old - 1.0) \
        if math.isfinite(margin) else contract.Change(change, -math.inf, math.inf)
    found = contract.status(bounds, -1, limit)
    words = {REGRESSION: BATCH_HINT, IMPROVED: f"flatter than the baseline: {REFRESH_HINT}",
             NOTED: "a change beyond its uncertainty but within tolerance: noted",
             PASS: "within tolerance"}
    if found in words:
        return Verdict(case_id, found, f"{head} — {words[found]}.", None, details,
                       scope=Scope.CONCURRENCY)
    # Undetermined is a verdict like the others: recorded, then skipped (plugin/conclude.py).
    # ``rerun``: the run's own command (settings/hints.py); alone, the bare suite's.
    command = rerun or (lambda *a: plain_rerun(*a, marker="concurrency_scaling"))
    return Verdict(case_id, UNDETERMINED, f"{head}: the slope's uncertainty straddles the "
                   f"limit, so it is neither a pass nor a fail — measure again with more "
                   f"repeats: {command('--specperf-repeats', '10')}.",
                   None, details, scope=Scope.CONCURRENCY)
