"""The context fit's verdict: does step time grow faster with context than in the baseline?

The slope b of step time over context (:class:`specperf.core.model.ContextFit`) carries its
standard error, so its change is judged as an interval by the contract
(:mod:`specperf.core.contract`): a regression only when the whole interval is past the limit;
an interval that straddles it is undetermined, and the sentence says what would decide it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..core import contract, interval
from ..core.contract import IMPROVED, NOTED, PASS, REGRESSION, UNDETERMINED
from ..core.limits import ARROW, format_percent, format_share
from ..core.model import ContextFit
from ..core.noise import NoiseModel
from ..core.verdict import Scope, Verdict
from .hints import REFRESH_HINT, Rerun, plain_rerun


def _change(base: float, new: float) -> float:
    return new / base - 1.0 if base else 0.0


def judge_fit(text_class: str, current: ContextFit, base: ContextFit,
              slope_tolerance: float, contexts: Sequence[int] = (),
              step_tolerance: float | None = None, far: float = 0.0,
              noise: NoiseModel | None = None, base_runs: int = 1,
              rerun: Rerun = plain_rerun, paired: bool = False) -> Verdict:
    """Compare the context slope b (step time per 1k context) with the baseline's, judged
    against both slopes' standard errors and, with ``noise``, the run-to-run noise: a night
    that slows every step by a factor scales the slope by it too (the part common to the
    cases; each case's own part is in the fits' residuals already).

    With z the 95 % t quantile of the run's repeats, the interval b ± z·se is judged by the
    contract (:func:`specperf.core.contract.status`): fail when b − z·se is past the limit,
    improved when b + z·se is below the lower bound, pass when b + z·se is within the limit
    (noted when the interval also excludes the baseline's slope). Anything else is
    "undetermined" (never a pass or a fail): the errors are wider than the tolerance band (the
    contexts lie too close together) or straddle the limit; its message says which contexts
    to add, or to take more repeats.

    The limit is ``slope_tolerance``, or what moves the baseline's step time at the farthest
    context measured (``far``, in the fit's tokens) by ``step_tolerance`` when that is wider
    (:func:`specperf.core.contract.slope_limit`): a nearly flat slope is not judged by a hair.

    ``rerun`` builds the command an undetermined verdict advises
    (:data:`specperf.judge.hints.Rerun`); ``paired``: the "baseline" is the other arm of an
    A/B run, measured now, so no advice writes one.
    """
    case_id = f"{text_class}-fit"
    old, new = base.b_ms_per_1k, current.b_ms_per_1k
    if old <= 0:
        return Verdict(case_id, UNDETERMINED,
                       f"{text_class}: the baseline's step time does not grow with context "
                       f"({old:.1f} ms per 1k), so its slope cannot be compared — write a new "
                       f"version with --specperf-update-baselines.", reason=contract.NO_BASELINE,
                       scope=Scope.FIT)
    change = _change(old, new)
    limit = contract.slope_limit(slope_tolerance, base.b_ms_per_token,
                                 base.predict_step_ms(far), far, step_tolerance)
    se_new, se_old = current.b_se_ms_per_1k or 0.0, base.b_se_ms_per_1k or 0.0
    run_sd = 0.0 if noise is None else \
        noise.of("step_ms").parts(base_runs)[0] ** 0.5 * old
    margin = interval.half_width(interval.combine(se_new, (1.0 + limit) * se_old, run_sd),
                                 current.dof) \
        if current.b_se_ms_per_token is not None else 0.0
    head = (f"{text_class}: step time per 1k context {_pm(old, base.b_se_ms_per_1k)} {ARROW} "
            f"{_pm(new, current.b_se_ms_per_1k)} ms ({format_percent(change)}, limit "
            f"{slope_limit_text(limit, slope_tolerance, step_tolerance, f'context {far:.0f}')})")
    details = {"slope": {"base": old, "new": new, "change": change, "limit": limit,
                         "base_se": se_old, "new_se": se_new, "margin": margin,
                         "run_sd": run_sd}}
    found = contract.status(_slope_change(old, new, margin, current), -1, limit)
    if noise is not None:
        head = f"{head[:-1]}; {noise.of('step_ms').text()})"
    reach = _reach(margin, current.dof, old, limit, run_sd, change)
    if found == UNDETERMINED and reach is not None:
        details["slope"]["passed_at"] = reach
        return Verdict(case_id, PASS, f"{head} — pass as far as this run can see: it rules out "
                       f"a rise beyond +{math.ceil(100 * reach)}%; the noise between nights hides "
                       f"one as small as the limit.", None, details, scope=Scope.FIT)
    if found == REGRESSION:
        named, why = _cause(base, current, change)
        return Verdict(case_id, REGRESSION, f"{head} — {why}", None, details, factor=named,
                       scope=Scope.FIT)
    if found == IMPROVED:
        return Verdict(case_id, IMPROVED, f"{head} — flatter than the baseline: "
                       f"{REFRESH_HINT}.", None, details, scope=Scope.FIT)
    if found == NOTED:
        return Verdict(case_id, NOTED, f"{head} — a change beyond its uncertainty but within "
                       f"tolerance: noted.", None, details, scope=Scope.FIT)
    if found == PASS:
        return Verdict(case_id, PASS, f"{head} — within tolerance.", None, details, scope=Scope.FIT)
    why = _undetermined(text_class, margin, old * limit, se_new, 0.0 if paired else se_old,
                        contexts, rerun)
    return Verdict(case_id, UNDETERMINED, f"{head}: {why}", None, details, scope=Scope.FIT)


def _reach(margin: float, dof: float, old: float, limit: float, run_sd: float,
           change: float) -> float | None:
    """The slope rise this run would call a regression 95 times in 100, when it passes at
    that resolution rather than at its limit; None when it does not.

    As the sweep does (judge/sweep/factortest.py ``factor_result``): where the comparison
    carries the noise between nights (``run_sd`` > 0: a baseline of another night), the
    estimate lies inside the limit and the interval still reaches past it, the slope passes
    at the rise it could have caught — the limit plus its decisive margin plus the one-sided
    95 % quantile of its error — and says so. Each case's own night term scatters the points
    of both fits, so more repeats or a longer context would not narrow it much. A decisive
    rise beyond the limit still fails; on the same night it stays undetermined, and so does
    a slope too uncertain to rule out doubling (its advice, contexts or repeats, helps
    there)."""
    if run_sd <= 0 or not 0 < margin < math.inf or change >= limit or old <= 0:
        return None
    se = margin / interval.half_width(1.0, dof)
    reach = limit + (margin + interval.one_sided(0.95) * se) / old
    return reach if reach <= 1.0 else None


def _cause(base: ContextFit, current: ContextFit, slope_change: float) -> tuple[str, str]:
    """What a slope that rose means, as a factor and its words: every step slower (the
    intercept rose in proportion too: kernels, clocks, the verify pass) or only long contexts
    (attention scaling)."""
    intercept = _change(base.a_ms, current.a_ms) if base.a_ms > 0 else 0.0
    if intercept >= 0.5 * slope_change:
        return "step", (f"step-time regression: the intercept rose too ({base.a_ms:.1f} {ARROW} "
                f"{current.a_ms:.1f} ms, {format_percent(intercept)}), so every step is "
                f"slower, not only long contexts: check the kernels, clocks and verify pass.")
    return "slope", ("attention scaling regression: step time grows faster with context than "
                     "in the baseline.")


def slope_limit_text(limit: float, slope_tolerance: float, step_tolerance: float | None,
                where: str) -> str:
    """The slope's limit as the sentence shows it, saying why when the step tolerance set it."""
    text = f"+{format_share(limit)}"
    if limit > slope_tolerance and step_tolerance is not None:
        text += (f": the step-time tolerance {format_share(step_tolerance)} at {where}, "
                 f"wider than the slope's {format_share(slope_tolerance)}")
    return text


def _slope_change(old: float, new: float, margin: float, current: ContextFit) -> contract.Change:
    """The slope's relative change with its interval; a point when the fit states no error."""
    if current.b_se_ms_per_token is None:
        return contract.Change(_change(old, new))
    return contract.Change(_change(old, new), (new - margin) / old - 1.0,
                           (new + margin) / old - 1.0)


def _pm(value: float, se: float | None) -> str:
    if se is None:
        return f"{value:.1f}"
    return f"{value:.1f} ± {se:.1f}" if se >= 0.05 else f"{value:.1f} ± {se:.2f}"


def _undetermined(text_class: str, margin: float, band: float, se_new: float, se_old: float,
                  contexts: Sequence[int], rerun: Rerun = plain_rerun) -> str:
    """Why a slope cannot be judged, and the command that would judge it."""
    classes = ("--specperf-text-classes", text_class)
    if math.isinf(margin):
        return (f"one repeat per context gives the slope no error estimate, so it is neither "
                f"a pass nor a fail — measure with repeats: "
                f"{rerun(*classes, '--specperf-repeats', '3')}")
    if margin <= band:
        return (f"the slope sits within its uncertainty (±{margin:.1f} ms per 1k) of the "
                f"limit, so it is neither a pass nor a fail — measure again with more repeats: "
                f"{rerun(*classes, '--specperf-repeats', '10')}")
    if se_old > se_new:
        return (f"the baseline's slope is too uncertain (±{se_old:.1f} ms per 1k) to judge "
                f"against a {band:.1f} ms band, so it is neither a pass nor a fail — write a "
                f"baseline with more repeats over the default contexts: "
                f"{rerun('--specperf-update-baselines', '--specperf-baseline-repeats', '20')}")
    wanted = _wider(contexts, margin / band)
    listed = ",".join(str(c) for c in contexts)
    return (f"contexts {listed} lie too close together to determine the slope (±{margin:.1f} "
            f"ms per 1k against a {band:.1f} ms band), so it is neither a pass nor a fail — "
            f"add a longer context: "
            f"{rerun(*classes, '--specperf-contexts', ','.join(str(c) for c in wanted))}")


def _wider(contexts: Sequence[int], shrink: float) -> list[int]:
    """The contexts plus one far enough out for the slope's error to fit the band.

    A slope's error falls with the spread of the contexts; aim for twice the needed span
    (errors are themselves estimates), in whole hundreds, between the defaults 1663 and 5553
    (the incident's longest context, which determines a slope at ordinary noise).
    """
    if not contexts:
        return [13, 1663]
    low, high = min(contexts), max(contexts)
    span = max(high - low, 1) * shrink * 2.0
    far = min(5553, max(1663, int(math.ceil((low + span) / 100.0)) * 100))
    return sorted({*contexts, far})
