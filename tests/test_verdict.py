"""Verdict sentences, attribution, tolerance layering and adaptive repeats (no plugin)."""

from __future__ import annotations

import pytest

from specperf.baselines.store import CaseBaseline
from specperf.core.errors import ConfigError
from specperf.core.limits import (
    DEFAULT_TOLERANCES,
    check_tolerance,
    format_percent,
    format_value,
)
from specperf.core.model import ContextFit
from specperf.core.noise import NoiseModel
from specperf.core.stats import Summary, summarize
from specperf.judge.fit import judge_fit
from specperf.judge.verdict import judge_case
from specperf.measure.repeats import decide_repeats

TOL = dict(DEFAULT_TOLERANCES)


def base_case(tok_s: float, commit: float, step: float, **extra: float) -> CaseBaseline:
    metrics = {"tok_s": Summary(tok_s, 0.0, 1), "avg_commit": Summary(commit, 0.0, 1),
               "step_ms": Summary(step, 0.0, 1)}
    metrics.update({k: Summary(v, 0.0, 1) for k, v in extra.items()})
    return CaseBaseline("padding", 5553, 600, metrics, {})


def current(tok_s: float, commit: float, step: float, **extra: float) -> dict[str, Summary]:
    out = {"tok_s": Summary(tok_s, 0.1, 5), "avg_commit": Summary(commit, 0.01, 5),
           "step_ms": Summary(step, 1.0, 5)}
    out.update({k: Summary(v, 0.1, 5) for k, v in extra.items()})
    return out


def judge(base: tuple[float, float, float], now: tuple[float, float, float]) -> tuple[str, str]:
    verdict = judge_case("padding-ctx5553", current(*now), base_case(*base), TOL)
    return verdict.status, verdict.message


# --- case sentences -----------------------------------------------------------------------


def test_acceptance_regression_sentence() -> None:
    verdict = judge_case("padding-ctx5553", current(38.1, 5.64, 148),
                         base_case(54.5, 7.85, 144), TOL)
    assert verdict.status == "fail"
    assert verdict.fails() == (
        "tok/s 54.5 → 38.1 (−30.1%, limit −10%): avg commit 7.85 → 5.64 (−28.2%) explains it; "
        "step time 144 → 148 ms (+2.8%, within noise) — acceptance regression: check the "
        "drafter and the text.")


def test_acceptance_only_drop_attributes_at_least_90_percent() -> None:
    # acceptance ×0.6 with the step time unchanged, as the injected fault does
    verdict = judge_case("padding-ctx5553", current(54.5 * 0.6, 7.85 * 0.6, 144),
                         base_case(54.5, 7.85, 144), TOL)
    assert verdict.attribution is not None
    assert verdict.attribution.share("acceptance") >= 0.9
    assert "avg commit 7.85 → 4.71 (−40.0%) explains it" in verdict.message


def test_step_time_regression_sentence() -> None:
    assert judge((54.5, 7.85, 144), (46.1, 7.80, 170)) == ("fail", (
        "tok/s 54.5 → 46.1 (−15.4%, limit −10%): step time 144 → 170 ms (+18.1%) explains it; "
        "avg commit 7.85 → 7.80 (−0.6%, within noise) — step-time regression: check the "
        "kernels, attention backend and KV cache."))


def test_both_moved_names_both_shares() -> None:
    assert judge((54.5, 7.85, 144), (35.0, 6.40, 170)) == ("fail", (
        "tok/s 54.5 → 35.0 (−35.8%, limit −10%): avg commit 7.85 → 6.40 (−18.5%) and step time "
        "144 → 170 ms (+18.1%) both moved, acceptance explains 46%, step time 37%, prefill and "
        "client time 16% (they add to the drop) — acceptance and step-time regression: check "
        "the drafter and the text, then the kernels, attention backend and KV cache."))


@pytest.mark.parametrize(("step", "factor", "words"), [
    # step time +6 % under the 3 % run-to-run prior: a quarter of the drop, but inside the
    # noise; the failure follows the larger share (issue 47: such labels sent a third of
    # an acceptance drop's failures to the kernels)
    (1.06, "acceptance", "avg commit 7.85 → 6.67 (−15.0%) explains it; step time 144 → 153 ms "
                         "(+6.0%, within noise) — acceptance regression"),
    # +15 %: its own interval excludes no change, so both are named with their shares
    (1.15, "acceptance+step", "both moved, acceptance explains 54%, step time 46%"),
])
def test_a_smaller_share_is_named_only_when_its_own_move_is_sure(step, factor, words) -> None:
    verdict = judge_case("padding-ctx5553", current(54.5 * 0.85 / step, 7.85 * 0.85, 144 * step),
                         base_case(54.5, 7.85, 144), TOL, noise=NoiseModel())
    assert verdict.status == "fail" and verdict.factor == factor, verdict
    assert words in verdict.message, verdict.message


def test_neither_explains_it() -> None:
    assert judge((54.5, 7.85, 144), (40.0, 7.80, 146)) == ("fail", (
        "tok/s 54.5 → 40.0 (−26.6%, limit −10%): avg commit 7.85 → 7.80 (−0.6%, within noise); "
        "step time 144 → 146 ms (+1.4%, within noise) — neither acceptance nor step time "
        "explains it (prefill, transport or client overhead?)."))


def test_pass_sentence() -> None:
    verdict = judge_case("padding-ctx3333", current(78.3, 7.88, 101), base_case(77.9, 7.90, 101),
                         TOL)
    assert verdict.status == "pass"
    assert verdict.fails() is None
    assert verdict.message == ("tok/s 77.9 → 78.3 (+0.5%, limit −10%); avg commit 7.90 → 7.88; "
                               "step time 101 → 101 ms — within tolerance.")


def test_improvement_passes_with_refresh_hint() -> None:
    status, message = judge((54.5, 7.85, 144), (65.0, 7.85, 120))
    assert status == "improved"
    assert message == ("tok/s 54.5 → 65.0 (+19.3%, limit −10%); avg commit 7.85 → 7.85; "
                       "step time 144 → 120 ms — faster than the baseline: refresh it with "
                       "--specperf-update-baselines if this is intended.")


def test_step_time_alone_breaks_its_limit() -> None:
    assert judge((54.5, 7.85, 144), (52.0, 7.85, 160)) == ("fail", (
        "step time 144 → 160 ms (+11.1%, limit +10%) while tok/s 54.5 → 52.0 (−4.6%) stayed "
        "within its limit — step-time regression: check the kernels, attention backend and "
        "KV cache."))


def test_avg_commit_alone_breaks_its_limit() -> None:
    assert judge((54.5, 7.85, 144), (52.0, 6.90, 133)) == ("fail", (
        "avg commit 7.85 → 6.90 (−12.1%, limit −10%) while tok/s 54.5 → 52.0 (−4.6%) stayed "
        "within its limit — acceptance regression: check the drafter and the text."))


def test_tolerance_widens_the_limit() -> None:
    tolerances = {**DEFAULT_TOLERANCES, "step_ms": 0.15}
    verdict = judge_case("c", current(52.0, 7.85, 160), base_case(54.5, 7.85, 144), tolerances)
    assert verdict.status == "pass"
    assert verdict.details["step_ms"]["limit"] == pytest.approx(0.15)
    assert verdict.details["tok_s"]["limit"] == pytest.approx(-0.10)


def test_details_record_base_new_change() -> None:
    verdict = judge_case("c", current(38.1, 5.64, 148), base_case(54.5, 7.85, 144), TOL)
    assert verdict.details["tok_s"]["base"] == 54.5
    assert verdict.details["tok_s"]["new"] == 38.1
    assert verdict.details["tok_s"]["change"] == pytest.approx(38.1 / 54.5 - 1)


def test_without_acceptance_data_the_drop_is_not_attributed() -> None:
    base = base_case(54.5, 7.85, 144)
    verdict = judge_case("c", {"tok_s": Summary(38.1, 0.1, 3)}, base, TOL)
    assert verdict.status == "fail"
    assert verdict.attribution is None
    assert verdict.message == ("tok/s 54.5 → 38.1 (−30.1%, limit −10%) — acceptance or step "
                               "time was not measured, so the drop cannot be attributed: check "
                               "the acceptance source.")


def test_nothing_comparable_is_no_baseline() -> None:
    base = CaseBaseline("padding", 13, 600, {}, {})
    verdict = judge_case("padding-ctx13", current(1, 1, 1), base, TOL)
    assert (verdict.status, verdict.reason) == ("undetermined", "no-baseline")
    assert verdict.fails() is None


def test_number_formats() -> None:
    assert format_value("step_ms", 9.46) == "9.5"
    assert format_value("step_ms", 144.4) == "144"
    assert format_value("avg_commit", 2.9) == "2.90"
    assert format_value("tok_s", 139.64) == "139.6"
    assert format_percent(-0.3009) == "−30.1%"
    assert format_percent(0.0) == "+0.0%"
    assert format_percent(-0.0001) == "+0.0%"


# --- fit ------------------------------------------------------------------------


def test_fit_regression_sentence() -> None:
    base = ContextFit(40.0, 0.0208, 1.0, 4)
    now = ContextFit(40.0, 0.0287, 1.0, 4)
    verdict = judge_fit("reasoning", now, base, 0.15)
    assert verdict.case_id == "reasoning-fit"
    assert verdict.fails() == (
        "reasoning: step time per 1k context 20.8 → 28.7 ms (+38.0%, limit +15%) — attention "
        "scaling regression: step time grows faster with context than in the baseline.")


def test_fit_within_tolerance_passes() -> None:
    verdict = judge_fit("padding", ContextFit(30, 0.021, 1, 4), ContextFit(30, 0.0208, 1, 4), 0.15)
    assert verdict.status == "pass"
    assert verdict.message == ("padding: step time per 1k context 20.8 → 21.0 ms (+1.0%, "
                               "limit +15%) — within tolerance.")


# --- tolerances ---------------------------------------------------------------------------


# (Their layering is RunState.tolerances_for's: tests/test_one_definition.py.)
def test_unknown_tolerance_names_the_accepted_keys() -> None:
    with pytest.raises(ConfigError) as info:
        check_tolerance("tok", 0.1, "marker tolerance(tok=0.1)", form="tolerance(metric=x)",
                        example="tolerance(step_ms=0.15)")
    assert str(info.value) == ("marker tolerance(tok=0.1) names no tolerance: expected one of "
                               "avg_commit, decode_tok_s, slope, step_ms, tok_s, ttft_ms as "
                               "'tolerance(metric=x)', e.g. tolerance(step_ms=0.15).")


@pytest.mark.parametrize("value", [0, 0.0, -0.1, 1.5, float("nan"), "1e999", True, None, "x"])
def test_a_tolerance_is_a_fraction_in_0_1(value: object) -> None:
    with pytest.raises(ConfigError, match=r"^step_ms=.* is not valid: expected 'metric = "
                                          r"fraction' with a fraction in \(0, 1\], e\.g\. "
                                          r"step_ms = 0\.15 for 15%\.$"):
        check_tolerance("step_ms", value, f"step_ms={value!r}")


@pytest.mark.parametrize(("value", "number"), [(0.1, 0.1), (1, 1.0), ("0.15", 0.15)])
def test_a_tolerance_may_be_written_as_a_number_or_its_text(value: object,
                                                            number: float) -> None:
    assert check_tolerance("step_ms", value, "x") == number


# --- adaptive repeats ---------------------------------------------------------------------


def steady(value: float, n: int, wobble: float = 0.005) -> list[float]:
    """n values with median ``value`` and relative MAD ``wobble`` (for n a multiple of 3)."""
    return [value * (1 + wobble * (0, -1, 1)[i % 3]) for i in range(n)]


def test_too_few_repeats_asks_for_more() -> None:
    decision = decide_repeats({"tok_s": [50.0, 51.0]}, None, TOL, min_repeats=3, max_repeats=9)
    assert decision.action == "more"
    assert decision.reason == "2 of at least 3 repeats taken."


def test_stable_without_baseline_stops() -> None:
    decision = decide_repeats({"tok_s": steady(50, 3)}, None, TOL, min_repeats=3, max_repeats=9)
    assert decision.action == "stop"


def test_noisy_cell_takes_more_then_is_unstable() -> None:
    noisy = {"tok_s": steady(50, 3), "step_ms": steady(100, 3, wobble=0.2)}
    more = decide_repeats(noisy, None, TOL, min_repeats=3, max_repeats=9)
    assert more.action == "more"
    noisy = {"tok_s": steady(50, 9), "step_ms": steady(100, 9, wobble=0.2)}
    unstable = decide_repeats(noisy, None, TOL, min_repeats=3, max_repeats=9)
    assert unstable.action == "unstable"
    assert unstable.reason == (
        "step time spreads too widely: relative MAD 0.20 > 0.10 after 9 repeats (the bound): "
        "the cell cannot be judged — quiet the server (other load, clocks) or raise the repeat "
        "bound.")


def test_a_spread_just_past_the_bound_never_reads_as_equal_to_it() -> None:
    # A real llama-server cell once read "relative MAD 0.10 > 0.10": rounded alike.
    from specperf.measure import repeats
    assert repeats._above(0.1004, 0.10) == "0.1004 > 0.1000"
    assert repeats._above(0.2, 0.1) == "0.20 > 0.10"


def test_a_wider_spread_limit_judges_a_cell_the_default_calls_unstable() -> None:
    noisy = {"tok_s": steady(50, 9), "step_ms": steady(100, 9, wobble=0.2)}
    assert decide_repeats(noisy, None, TOL, min_repeats=3, max_repeats=9,
                          max_spread=0.3).action == "stop"
    tight = decide_repeats(noisy, None, TOL, min_repeats=3, max_repeats=9, max_spread=0.15)
    assert tight.action == "unstable" and "0.20 > 0.15 after 9 repeats" in tight.reason


def test_clear_verdict_stops_early() -> None:
    base = base_case(54.5, 7.85, 144)
    values = {"tok_s": steady(54.5, 3), "avg_commit": steady(7.85, 3), "step_ms": steady(144, 3)}
    decision = decide_repeats(values, base, TOL, min_repeats=3, max_repeats=9)
    assert decision.action == "stop"
    assert decision.reason.startswith("verdict clear after 3 repeats")


def test_near_the_limit_takes_more_until_the_bound() -> None:
    base = base_case(54.5, 7.85, 144)
    # tok/s 9.5% down: 0.5% from its limit while the median's uncertainty is ~3%
    near = {"tok_s": steady(54.5 * 0.905, 3, wobble=0.04)}
    assert decide_repeats(near, base, TOL, min_repeats=3, max_repeats=9).action == "more"
    near = {"tok_s": steady(54.5 * 0.905, 9, wobble=0.04)}
    at_bound = decide_repeats(near, base, TOL, min_repeats=3, max_repeats=9)
    assert at_bound.action == "stop"
    assert "at the repeat bound" in at_bound.reason


def test_repeats_stop_once_what_they_cannot_shrink_dominates() -> None:
    """Near its limit, a median known to a third of the comparison's fixed part (the baseline
    median's and the run-to-run term's) stops: more repeats would narrow the verdict's
    interval by under 6 %. A fixed part the median's own error still matters against takes
    more, as without one."""
    base = base_case(54.5, 7.85, 144)
    near = {"tok_s": steady(54.5 * 0.905, 3, wobble=0.01)}
    own = decide_repeats(near, base, TOL, min_repeats=3, max_repeats=9)
    assert own.action == "more" and "0.5% from its limit" in own.reason, own
    from specperf.core.stats import MAD_TO_SIGMA, median_se, summarize
    s = summarize(near["tok_s"])
    uncertainty = median_se(MAD_TO_SIGMA * s.mad, s.n) / 54.5
    stop = decide_repeats(near, base, TOL, min_repeats=3, max_repeats=9,
                          fixed={"tok_s": 3.0 * uncertainty * 1.01})
    assert stop.action == "stop", stop
    assert stop.reason == (
        f"after 3 repeats more cannot narrow the verdict: near its limit, the median's "
        f"uncertainty is under a third of what repeats cannot shrink (the baseline's and the "
        f"run-to-run noise): tok/s ({uncertainty:.1%} against {3.03 * uncertainty:.1%}).")
    more = decide_repeats(near, base, TOL, min_repeats=3, max_repeats=9,
                          fixed={"tok_s": 3.0 * uncertainty * 0.99})
    assert more.action == "more", more
    # A fixed part of another metric decides nothing for this one.
    assert decide_repeats(near, base, TOL, min_repeats=3, max_repeats=9,
                          fixed={"step_ms": 1.0}).action == "more"


def test_a_dominating_fixed_part_does_not_skip_confirming_a_failure() -> None:
    base = base_case(54.5, 7.85, 144)
    values = {"tok_s": steady(38.0, 3), "avg_commit": steady(7.85, 3), "step_ms": steady(144, 3)}
    first = decide_repeats(values, base, TOL, min_repeats=3, max_repeats=9,
                           fixed={m: 0.5 for m in values})
    assert first.action == "more" and "confirming with 6" in first.reason


def test_a_clear_regression_is_confirmed_before_it_fails() -> None:
    base = base_case(54.5, 7.85, 144)
    # 30% down, three samples in agreement: clear, yet confirmed with twice the minimum.
    values = {"tok_s": steady(38.0, 3), "avg_commit": steady(5.5, 3), "step_ms": steady(144, 3)}
    first = decide_repeats(values, base, TOL, min_repeats=3, max_repeats=9)
    assert first.action == "more"
    assert first.reason == "tok/s is past its limit after 3 repeats; confirming with 6."
    values = {k: steady(v[0], 6) for k, v in values.items()}
    assert decide_repeats(values, base, TOL, min_repeats=3, max_repeats=9).action == "stop"
    # The bound wins over confirmation.
    values = {k: steady(v[0], 4) for k, v in values.items()}
    assert decide_repeats(values, base, TOL, min_repeats=3, max_repeats=4).action == "stop"


def test_every_metric_beyond_its_limit_is_named() -> None:
    """A case whose TTFT rose 96 % against a 25 % limit once failed on step time alone."""
    base = CaseBaseline("reasoning", 3333, 600, {
        "tok_s": summarize([30.0] * 5), "avg_commit": summarize([2.9] * 5),
        "step_ms": summarize([100.0] * 5), "ttft_ms": summarize([500.0] * 5)}, {})
    now = {"tok_s": summarize([22.0] * 3), "avg_commit": summarize([2.9] * 3),
           "step_ms": summarize([130.0] * 3), "ttft_ms": summarize([980.0] * 3)}
    verdict = judge_case("c", now, base, {})
    assert verdict.status == "fail"
    assert verdict.message.endswith(
        "— step-time regression: check the kernels, attention backend and KV cache; also "
        "beyond its limit: prefill (TTFT) 500 → 980 ms (+96.0%, limit +25%) — prefill "
        "regression: check prompt processing (the batch size, e.g. llama.cpp -ub; chunked "
        "prefill; the prefix and attention kernels).")


def test_an_undetermined_tok_s_is_never_said_to_stay_within_its_limit() -> None:
    from specperf.core.noise import NoiseModel
    base = CaseBaseline("reasoning", 1663, 600, {
        "tok_s": summarize([72.4] * 5), "avg_commit": summarize([2.9] * 5),
        "step_ms": summarize([62.0] * 5)}, {})
    now = {"tok_s": summarize([65.0] * 3), "avg_commit": summarize([2.9] * 3),
           "step_ms": summarize([90.0] * 3)}
    verdict = judge_case("c", now, base, {}, noise=NoiseModel.prior(0.03))
    assert verdict.status == "fail"
    assert "stayed within its limit" not in verdict.message
    assert "is undetermined (its interval straddles the limit)" in verdict.message


@pytest.mark.parametrize("commit", [4.97, 4.30])  # +2.5 % (noted alone), −11.3 % (a fail alone)
def test_acceptance_an_exact_comparison_settled_is_not_rejudged_from_medians(commit) -> None:
    # A same-night gate: the candidate re-sent 4 of the reference's 12 prompts and each took
    # the reference's verify steps (exact: unchanged), yet the two medians of avg commit differ
    # (other draws of the same prompts, quantised commits, a tight spread). Judged from the
    # medians that is a change "we are sure of" (or a regression); the exact comparison
    # settles acceptance, so the case answers for its other figures only.
    from specperf.core.noise import NoiseModel
    spread = (0.995, 1.0, 1.0, 1.005)
    base = CaseBaseline("padding", 13, 200, {
        "tok_s": summarize([170.0 * f for f in spread * 3]),
        "avg_commit": summarize([4.85 * f for f in spread * 3]),
        "step_ms": summarize([28.5 * f for f in spread * 3])}, {})
    now = {"tok_s": summarize([170.0 * f for f in spread]),
           "avg_commit": summarize([commit * f for f in spread]),
           "step_ms": summarize([28.5 * f for f in spread])}
    noise = NoiseModel.same_night()
    alone = judge_case("padding-ctx13", now, base, {}, noise=noise)
    assert alone.status in ("noted", "fail")
    settled = judge_case("padding-ctx13", now, base, {}, noise=noise, exact="unchanged")
    assert settled.status == "pass", settled.message
    assert "a change we are sure of" not in settled.message
    # The medians are still shown, marked exact, with no interval a view could judge by.
    assert settled.details["avg_commit"]["new"] == pytest.approx(commit)
    assert settled.details["avg_commit"]["exact"] and "low" not in settled.details["avg_commit"]


def test_a_regressed_case_names_its_factor_as_data_as_its_sentence_does() -> None:
    # Noisy medians of every shape a regression takes (acceptance, step time, both, prefill,
    # neither): the record's factor is the one the sentence's advice names, so the decision
    # line never says "a factor its record does not name moved".
    import random

    from specperf.judge.hints import ACCEPTANCE_HINT, PREFILL_HINT, STEP_HINT
    from specperf.views.decision import decide
    words = {"acceptance": ACCEPTANCE_HINT, "step": STEP_HINT, "prefill": PREFILL_HINT,
             "acceptance+step": "acceptance and step-time regression",
             "unexplained": "neither acceptance nor step time"}
    rng = random.Random(4711)
    seen = set()
    for _ in range(400):
        commit = 7.85 * rng.uniform(0.6, 1.05)
        step = 144 * rng.uniform(0.97, 1.45)
        ttft = 500 * rng.choice([1.0, 1.0, rng.uniform(1.0, 4.0)])
        tok = 1000 * 600 / (ttft + 599 / commit * step) * rng.uniform(0.9, 1.03)
        base = base_case(54.5, 7.85, 144, ttft_ms=500)
        base = CaseBaseline(base.text_class, base.context, 600, base.metrics, {})
        verdict = judge_case("padding-ctx5553", current(tok, commit, step, ttft_ms=ttft),
                             base, TOL)
        if verdict.status != "fail":
            continue
        assert verdict.factor in words, verdict.message
        seen.add(verdict.factor)
        hint = words[verdict.factor]
        assert hint in verdict.message, (verdict.factor, verdict.message)
        line = decide({"verdicts": [verdict.to_dict()], "run": {}}).line()
        assert "does not name" not in line, line
    assert {"acceptance", "step", "acceptance+step"} <= seen, seen
