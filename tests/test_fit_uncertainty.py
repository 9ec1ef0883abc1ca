"""Verdicts that know their uncertainty (issue 13): the context fit carries its standard
errors, the slope check is judged against the run's and the baseline's, an undetermined
slope is neither a pass nor a fail (the reconcile line: tests/test_reconcile.py).
"""

from __future__ import annotations

import math

import pytest

from specperf.core.model import CASE_DRIFT, ContextFit, fit_repeats
from specperf.judge.fit import judge_fit

# Mean contexts (prompt + output/2 at 600 output tokens) of the default contexts.
BASE = fit_repeats([(313, [33.0, 33.05, 32.98]), (1963, [61.9, 62.0, 62.1]),
                    (3633, [91.4, 91.5, 91.6]), (5853, [130.6, 130.7, 130.8])])
CLOSE = fit_repeats([(313, [33.00, 33.10, 32.95]), (320, [33.12, 33.02, 33.20])])


def test_two_close_contexts_give_a_slope_error_no_smaller_than_the_case_drift() -> None:
    assert CLOSE is not None and CLOSE.b_se_ms_per_1k is not None
    # Medians 33.00 and 33.12 ms, 7 tokens apart: the slope is ~17 ms per 1k, but a 0.1 ms
    # wobble of either median moves it by ~14: its error must say so. The repeats alone
    # (scatter ~0.1 %) would say ~12; each case may drift by CASE_DRIFT of its median as a
    # whole, so the error is that drift carried over 7 tokens.
    assert CLOSE.b_ms_per_1k == pytest.approx(17.1, abs=0.1)
    drift = math.hypot(CASE_DRIFT * 33.00, CASE_DRIFT * 33.12) / 7 * 1000
    assert CLOSE.b_se_ms_per_1k == pytest.approx(drift, rel=0.01)
    assert CLOSE.dof == 4  # two contexts of three repeats, pooled


def test_the_weighted_fit_recovers_a_known_line_and_its_error_shrinks_with_span() -> None:
    assert BASE is not None and BASE.b_se_ms_per_1k is not None
    assert BASE.b_ms_per_1k == pytest.approx(17.62, abs=0.05)
    assert BASE.b_se_ms_per_1k < 0.1  # 0.5 % case drift over 5540 tokens
    assert BASE.predict_se_ms(1963) < 0.2
    assert fit_repeats([(313, [33.0, 33.1, 32.9])]) is None  # one context: no slope


def test_an_undetermined_slope_names_the_context_to_add() -> None:
    assert BASE is not None and CLOSE is not None
    verdict = judge_fit("reasoning", CLOSE, BASE, 0.15, [13, 20])
    assert verdict.status == "undetermined" and verdict.fails() is None
    assert verdict.message == (
        "reasoning: step time per 1k context 17.6 ± 0.1 → 17.1 ± 33.4 ms (−2.7%, limit +15%): "
        "contexts 13,20 lie too close together to determine the slope (±92.7 ms per 1k "
        "against a 2.6 ms band), so it is neither a pass nor a fail — add a longer context: "
        "pytest perf_tests -m context_scaling --specperf-text-classes reasoning "
        "--specperf-contexts 13,20,1663")


def test_a_determined_slope_passes_or_fails_with_its_error_shown() -> None:
    assert BASE is not None
    clean = fit_repeats([(313, [33.00, 33.10, 32.95]), (5853, [130.6, 130.9, 130.4])])
    regressed = fit_repeats([(313, [33.00, 33.10, 32.95]), (5853, [167.0, 167.3, 166.8])])
    assert clean is not None and regressed is not None
    assert judge_fit("reasoning", clean, BASE, 0.15, [13, 5553]).message == (
        "reasoning: step time per 1k context 17.6 ± 0.1 → 17.6 ± 0.1 ms (+0.0%, limit "
        "+15%) — within tolerance.")
    assert judge_fit("reasoning", regressed, BASE, 0.15, [13, 5553]).fails() == (
        "reasoning: step time per 1k context 17.6 ± 0.1 → 24.2 ± 0.2 ms (+37.3%, limit "
        "+15%) — attention scaling regression: step time grows faster with context than in "
        "the baseline.")


def test_a_uniform_step_rise_is_step_time_not_attention_scaling() -> None:
    """Intercept and slope up by the same factor: every step is slower (kernels, clocks, the
    verify pass); only a slope that rises alone is attention scaling."""
    assert BASE is not None
    uniform = fit_repeats([(313, [s * 1.3 for s in (33.00, 33.10, 32.95)]),
                           (5853, [s * 1.3 for s in (130.6, 130.9, 130.4)])])
    assert uniform is not None
    verdict = judge_fit("reasoning", uniform, BASE, 0.15, [13, 5553])
    assert verdict.status == "fail"
    assert verdict.message.endswith(
        "— step-time regression: the intercept rose too (27.5 → 35.7 ms, +30.1%), so every "
        "step is slower, not only long contexts: check the kernels, clocks and verify pass.")
    assert "attention scaling" not in verdict.message


def test_a_slope_within_its_error_of_the_limit_asks_for_more_repeats() -> None:
    assert BASE is not None
    edge = fit_repeats([(313, [33.0, 33.4, 32.6]), (5853, [144.0, 146.5, 141.5])])
    assert edge is not None
    verdict = judge_fit("reasoning", edge, BASE, 0.15, [13, 5553])
    assert verdict.status == "undetermined"
    assert verdict.message == (
        "reasoning: step time per 1k context 17.6 ± 0.1 → 20.0 ± 0.3 ms (+13.7%, limit +15%): "
        "the slope sits within its uncertainty (±0.9 ms per 1k) of the limit, so it is "
        "neither a pass nor a fail — measure again with more repeats: pytest perf_tests -m "
        "context_scaling --specperf-text-classes reasoning --specperf-repeats 10")


def test_an_uncertain_baseline_slope_asks_for_a_wider_baseline() -> None:
    assert BASE is not None and CLOSE is not None
    verdict = judge_fit("reasoning", BASE, CLOSE, 0.15, [13, 1663, 3333, 5553])
    assert verdict.status == "undetermined"
    assert verdict.message.endswith(
        ": the baseline's slope is too uncertain (±33.4 ms per 1k) to judge against a 2.6 ms "
        "band, so it is neither a pass nor a fail — write a baseline with more repeats over "
        "the default contexts: pytest perf_tests -m context_scaling --specperf-update-baselines "
        "--specperf-baseline-repeats 20")


def test_a_baseline_fit_without_errors_is_judged_on_the_runs_error_alone() -> None:
    old = ContextFit(40.0, 0.0208, 1.0, 4)  # written before fits had errors
    assert judge_fit("reasoning", ContextFit(40.0, 0.0287, 1.0, 4), old, 0.15).fails() == (
        "reasoning: step time per 1k context 20.8 → 28.7 ms (+38.0%, limit +15%) — attention "
        "scaling regression: step time grows faster with context than in the baseline.")
    assert ContextFit.from_dict(old.to_dict()) == old
    assert BASE is not None and ContextFit.from_dict(BASE.to_dict()) == BASE


def test_one_repeat_per_context_leaves_the_slope_undetermined_and_asks_for_repeats() -> None:
    assert BASE is not None
    single = fit_repeats([(313, [33.0]), (1963, [62.1])])
    assert single is not None and single.dof == 0
    verdict = judge_fit("padding", single, BASE, 0.15, [13, 1663])
    assert verdict.status == "undetermined" and verdict.fails() is None
    assert verdict.message.endswith(
        ": one repeat per context gives the slope no error estimate, so it is neither a pass "
        "nor a fail — measure with repeats: pytest perf_tests -m context_scaling "
        "--specperf-text-classes padding --specperf-repeats 3")


def test_a_nearly_flat_slope_is_judged_by_the_step_time_it_adds_not_by_a_hair() -> None:
    # What a CPU vLLM did in CI: 0.3 → 2.3 ms per 1k (+621 %, limit +60 %) over contexts 13
    # and 1500, while every case's step time (8 → 11 ms) stayed inside its 100 % tolerance.
    base = fit_repeats([(113, [7.60, 7.70, 7.65]), (1600, [8.10, 8.05, 8.15])])
    run = fit_repeats([(113, [7.80, 7.85, 7.75]), (1600, [11.2, 11.3, 11.1])])
    assert base is not None and run is not None
    assert judge_fit("padding", run, base, 0.6, [13, 1500]).status == "fail"
    verdict = judge_fit("padding", run, base, 0.6, [13, 1500], 1.0, 1600.0)
    assert verdict.status == "noted", verdict.message
    assert "the step-time tolerance 100% at context 1600, wider than the slope's 60%" in (
        verdict.message)
    # past what the step tolerance allows at the farthest context, it fails as before
    worse = fit_repeats([(113, [7.80, 7.85, 7.75]), (1600, [19.0, 19.1, 18.9])])
    assert worse is not None
    assert judge_fit("padding", worse, base, 0.6, [13, 1500], 1.0, 1600.0).status == "fail"
    # a slope that grows well (the simulator's 17.6 ms per 1k) keeps its own 15 % limit
    assert "limit +15%)" in judge_fit("reasoning", BASE, BASE, 0.15, [13, 5553], 0.10,
                                      5853.0).message


def test_the_advice_is_the_runs_own_command_and_an_ab_run_is_not_told_to_write_a_baseline(
        ) -> None:
    """The plugin passes the command built from the run's flags (same server, deployment and
    baselines): the advice uses it as given. An A/B run's "baseline" is the other arm, so an
    uncertain one asks to measure both again, never to write a baseline."""
    assert BASE is not None and CLOSE is not None
    own = judge_fit("reasoning", CLOSE, BASE, 0.15, [13, 20],
                    rerun=lambda *a: "RUN " + " ".join(a))
    assert own.message.endswith(
        "add a longer context: RUN --specperf-text-classes reasoning --specperf-contexts "
        "13,20,1663")
    alone = judge_fit("reasoning", BASE, CLOSE, 0.15, [13, 1663, 3333, 5553])
    paired = judge_fit("reasoning", BASE, CLOSE, 0.15, [13, 1663, 3333, 5553], paired=True)
    assert "--specperf-update-baselines" in alone.message
    assert paired.status == "undetermined"
    assert "baseline" not in paired.message.split(":", 2)[-1]
    assert "--specperf-update-baselines" not in paired.message


def test_a_slope_the_nights_noise_keeps_from_its_limit_passes_at_the_rise_it_could_catch(
        ) -> None:
    """Against a baseline of another night the run-to-run noise widens the slope's interval;
    an estimate inside the limit whose interval still reaches past it passes as far as the
    run can see and says what it rules out (as the sweep does), where on the same night it
    stays undetermined. A first night at 3 % read undetermined on most clean runs for this
    (benchmarks/record_power.py, docs/benchmarks.md §13)."""
    from specperf.core.noise import NoiseModel

    assert BASE is not None
    edge = fit_repeats([(313, [33.0, 33.4, 32.6]), (5853, [144.0, 146.5, 141.5])])
    assert edge is not None
    nights = judge_fit("reasoning", edge, BASE, 0.15, [13, 5553], noise=NoiseModel.prior(0.03))
    assert nights.status == "pass", nights.message
    reach = nights.details["slope"]["passed_at"]
    assert 0.15 < reach < 0.30
    assert nights.message.endswith(
        "— pass as far as this run can see: it rules out a rise beyond "
        f"+{math.ceil(100 * reach)}%; the noise between nights hides one as small as the limit.")
    # what it rules out is what it would catch: the limit plus its margin, plus 1.645 errors
    margin = nights.details["slope"]["margin"] / nights.details["slope"]["base"]
    assert reach > 0.15 + margin
    same = judge_fit("reasoning", edge, BASE, 0.15, [13, 5553], noise=NoiseModel.same_night())
    assert same.status == "undetermined"
    # an estimate past the limit is never passed at a resolution
    beyond = fit_repeats([(313, [33.0, 33.4, 32.6]), (5853, [150.0, 152.5, 147.5])])
    assert beyond is not None
    over = judge_fit("reasoning", beyond, BASE, 0.15, [13, 5553], noise=NoiseModel.prior(0.03))
    assert over.status in ("undetermined", "fail") and "passed_at" not in over.details["slope"]
    # a slope too uncertain to rule out doubling keeps its advice (here: a longer context)
    assert CLOSE is not None
    close = judge_fit("reasoning", CLOSE, BASE, 0.15, [13, 20], noise=NoiseModel.prior(0.03))
    assert close.status == "undetermined" and "add a longer context" in close.message
