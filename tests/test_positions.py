"""Acceptance per draft position and along the output: conditional rates from the servers'
unconditional counters, the sentences that locate a change, and the acceptance tolerance
they are judged with (no plugin, no server)."""

from __future__ import annotations

import json

import pytest

from specperf.baselines.store import Baseline, CaseBaseline
from specperf.core.errors import BaselineError, MalformedResponse
from specperf.core.limits import DEFAULT_TOLERANCES
from specperf.core.stats import Summary
from specperf.judge.positions import Shape, along_sentence, position_sentence
from specperf.judge.verdict import judge_case
from specperf.servers import positions as draft_positions
from specperf.servers import vllm

TOL = dict(DEFAULT_TOLERANCES, avg_commit=0.15)

# One llama-server request with --spec-synth-rates 0.9,0.8,0.1 (this build, measured): a fresh
# server exports no per-position series until something was accepted there.
LLAMA_BEFORE = """# TYPE llamacpp:spec_decode_num_drafts_total counter
llamacpp:spec_decode_num_drafts_total 0
"""
LLAMA_AFTER = """# TYPE llamacpp:spec_decode_num_drafts_total counter
llamacpp:spec_decode_num_drafts_total 69
# TYPE llamacpp:spec_decode_num_accepted_tokens_per_pos_total counter
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 67
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="1"} 54
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="2"} 8
"""


def vllm_text(drafts: int, per_pos: list[int]) -> str:
    lines = ["# TYPE vllm:spec_decode_num_drafts_total counter",
             f'vllm:spec_decode_num_drafts_total{{engine="0",model_name="m"}} {drafts}',
             "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter"]
    lines += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",'
              f'position="{i}"}} {n}' for i, n in enumerate(per_pos)]
    return "\n".join(lines) + "\n"


def test_conditional_rates_from_unconditional_llamacpp_counters() -> None:
    counts = draft_positions.positions_from_metrics(LLAMA_BEFORE, LLAMA_AFTER)
    assert counts is not None
    assert counts.accepted == (67, 54, 8) and counts.drafts == 69
    assert counts.conditional() == pytest.approx([67 / 69, 54 / 67, 8 / 54])
    assert counts.raw() == {"accepted_per_pos": [67, 54, 8], "drafts": 69,
                            "positions_from": "per-position /metrics counters"}


def test_vllm_counters_are_deltas_over_the_bracket() -> None:
    counts = draft_positions.positions_from_metrics(vllm_text(100, [90, 80, 70]),
                                               vllm_text(150, [135, 100, 71]))
    assert counts is not None and counts.accepted == (45, 20, 1) and counts.drafts == 50
    assert counts.conditional() == pytest.approx([0.9, 20 / 45, 1 / 20])


def test_a_first_miss_removes_every_deeper_acceptance() -> None:
    # Unconditional 0.5, 0.45, 0.4 per position: conditionally only position 1 is low.
    assert draft_positions.conditional_rates([50, 45, 40], 100) == pytest.approx(
        [0.5, 0.9, 40 / 45])
    assert draft_positions.conditional_rates([10, 0, 0], 20) == [0.5, 0.0, None]


def test_no_per_position_counters_give_none() -> None:
    plain = "# TYPE llamacpp:spec_decode_num_drafts_total counter\n" \
            "llamacpp:spec_decode_num_drafts_total 5\n"
    assert draft_positions.positions_from_metrics(plain, plain) is None
    assert draft_positions.positions_from_metrics("", LLAMA_AFTER) is None


def test_counts_no_chain_can_give_are_an_error() -> None:
    with pytest.raises(MalformedResponse, match=r"accepted drafts per position \[5, 9\] over "
                                                r"10 drafting steps"):
        draft_positions.positions_from_metrics(vllm_text(0, [0, 0]), vllm_text(10, [5, 9]))


def test_histograms_give_positions() -> None:
    # SGLang spec_correct_drafts_histogram: index = drafts accepted in a step, value = steps
    counts = draft_positions.positions_from_histogram([2, 3, 5], "accept histogram")
    assert counts is not None and counts.accepted == (8, 5) and counts.drafts == 10
    assert draft_positions.positions_from_histogram([], "h") is None
    spec = {"acceptance_histogram": [1, 0, 2, 7], "per_step_accepted": [3, 2, 3]}
    found = vllm.positions_of(spec, "case")
    assert found is not None and found.accepted == (9, 9, 7) and found.drafts == 10
    assert vllm.step_commits(spec) == [4, 3, 4]


def test_commit_along_the_output() -> None:
    # the first token comes from prefill; each step counts where its first token falls
    assert draft_positions.commit_along([4] * 25 + [1] * 100) == [4.0, 1.0, 1.0]
    assert draft_positions.commit_along([2] * 150) == [2.0, 2.0, 2.0]
    assert draft_positions.mean_by_index([[1.0, None, 3.0], [3.0, 4.0]]) == [2.0, 4.0, 3.0]


def test_the_deepest_position_is_located() -> None:
    assert position_sentence([0.9, 0.889, 0.875], [0.9, 0.889, 0.125], 0.15, True) == (
        "Draft position 3 (conditional acceptance) fell from 0.88 to 0.12 (−85.7%, limit "
        "−15%); positions 1–2 held.")


def test_the_first_position_is_located() -> None:
    assert position_sentence([0.9, 0.889, 0.875], [0.5, 0.9, 0.889], 0.15, True) == (
        "Draft position 1 (conditional acceptance) fell from 0.90 to 0.50 (−44.4%, limit "
        "−15%); positions 2–3 held.")


def test_several_positions_and_a_spread_fall() -> None:
    assert position_sentence([0.9, 0.9, 0.9], [0.5, 0.9, 0.3], 0.15, True) == (
        "Draft positions 1 and 3 (conditional acceptance) fell (limit −15%): 1 from 0.90 to "
        "0.50 (−44.4%), 3 from 0.90 to 0.30 (−66.7%); position 2 held.")
    assert position_sentence([0.9, 0.9], [0.8, 0.8], 0.15, True) == (
        "No single draft position moved beyond the 15% limit (conditional acceptance per "
        "position 0.90 → 0.80, 0.90 → 0.80): the fall is spread over every position.")


def test_positions_are_judged_with_the_acceptance_tolerance() -> None:
    base, now = [0.9, 0.9, 0.9], [0.9, 0.9, 0.8]  # position 3 −11.1 %
    assert position_sentence(base, now, 0.15, False) is None
    assert position_sentence(base, now, 0.10, False) == (
        "Draft position 3 (conditional acceptance) fell from 0.90 to 0.80 (−11.1%, limit "
        "−10%); positions 1–2 held.")


def test_a_position_past_the_deepest_reported_is_undetermined_never_a_fall() -> None:
    # An SGLang histogram ends at the deepest accepted count: [4, 6] has no position 2. That
    # may be a drafter that stopped accepting there, or a small subset's few requests that
    # never reached it (a clean gate once printed "fell from 0.27 to 0.00"): no sample
    # vouches for the 0, so it is never judged a fall.
    assert position_sentence([0.9, 0.5], [0.6], 0.15, True) == (
        "Draft position 1 (conditional acceptance) fell from 0.90 to 0.60 (−33.3%, limit "
        "−15%); position 2 undetermined (0.50 → not reached by this run's requests).")
    assert position_sentence([0.9, 0.27], [0.9], 0.10, False) is None


def test_a_position_interval_holds_the_baseline_side_and_the_night() -> None:
    """0.27 → 0.20 with this run's half-width 0.02: −25.9 % beyond a 10 % limit alone, but
    the baseline's side and a 3 % night widen it; a 0.27 → 0.05 fall stays a fall."""
    assert position_sentence([0.9, 0.27], [0.9, 0.20], 0.10, False, [0.01, 0.06]) is None
    assert position_sentence([0.9, 0.27], [0.9, 0.20], 0.10, True, [0.01, 0.06]) == (
        "No draft position is sure to have moved beyond the 10% limit (conditional acceptance "
        "per position 0.90 → 0.90, 0.27 → 0.20; position 2 undetermined).")
    sentence = position_sentence([0.9, 0.27], [0.9, 0.05], 0.10, False, [0.01, 0.02], 0.03)
    assert sentence is not None and sentence.startswith(
        "Draft position 2 (conditional acceptance) fell from 0.27 to 0.05")


def test_late_output_acceptance_fell_while_early_held() -> None:
    assert along_sentence([4.0] * 6, [4.0, 4.0, 4.0, 2.0, 2.0, 2.0], 0.15, 600) == (
        "Acceptance along the output changed shape: late-output avg commit fell (tokens "
        "300–600: 4.00 → 2.00, −50.0%) while tokens 0–300 held (4.00 → 4.00).")
    assert along_sentence([4.0] * 3, [2.0] * 3, 0.15, 300) is None  # same shape, lower
    assert along_sentence([4.0] * 3, [], 0.15, 300) is None  # not reported


def case(positions: list[float | None], along: list[float | None] = ()) -> CaseBaseline:
    metrics = {"tok_s": Summary(50.0, 0.0, 3), "avg_commit": Summary(3.4, 0.0, 3),
               "step_ms": Summary(60.0, 0.0, 3)}
    return CaseBaseline("padding", 16, 600, metrics, {}, positions=positions, along=list(along))


def now(commit: float) -> dict[str, Summary]:
    return {"tok_s": Summary(50.0 * commit / 3.4, 0.1, 3), "avg_commit": Summary(commit, 0.0, 3),
            "step_ms": Summary(60.0, 0.1, 3)}


def test_the_case_verdict_names_the_position() -> None:
    verdict = judge_case("padding-ctx16", now(2.8), case([0.9, 0.889, 0.875]), TOL,
                         Shape((0.9, 0.889, 0.125)))
    assert verdict.status == "fail"
    assert verdict.message.endswith(
        "acceptance regression: check the drafter and the text. Draft position 3 (conditional "
        "acceptance) fell from 0.88 to 0.12 (−85.7%, limit −15%); positions 1–2 held.")


def test_a_position_beyond_the_tolerance_notes_a_passing_case() -> None:
    verdict = judge_case("padding-ctx16", now(3.3), case([0.9, 0.9, 0.9]), TOL,
                         Shape((0.9, 0.9, 0.7)))
    assert verdict.status == "noted" and verdict.fails() is None
    assert verdict.message.endswith("positions 1–2 held.")
    same = judge_case("padding-ctx16", now(3.4), case([0.9, 0.9]), TOL, Shape((0.9, 0.88)))
    assert same.status == "pass" and "position" not in same.message
    unreported = judge_case("padding-ctx16", now(3.4), case([]), TOL, Shape())
    assert unreported == judge_case("padding-ctx16", now(3.4), case([]), TOL)


def test_the_baseline_keeps_the_shape() -> None:
    entry = case([0.9, None, 0.123456], [4.0, 3.5])
    base = Baseline("d", 1, "2026-12-02T00:00:00Z", "0", "rev", {}, "p", True,
                    {"padding-ctx16": entry}, {}, {})
    data = json.loads(base.to_json())["cases"]["padding-ctx16"]
    assert data["acceptance_positions"] == [0.9, None, 0.1235]
    assert data["commit_along"] == [4.0, 3.5]
    back = Baseline.from_json(base.to_json(), "v1.json").cases["padding-ctx16"]
    assert back.positions == [0.9, None, 0.1235] and back.along == [4.0, 3.5]
    data["acceptance_positions"] = ["x"]
    broken = json.loads(base.to_json())
    broken["cases"]["padding-ctx16"] = data
    with pytest.raises(BaselineError, match="acceptance_positions should be a list of numbers"):
        Baseline.from_json(json.dumps(broken), "v1.json")


def test_a_case_shape_is_the_mean_over_its_samples() -> None:
    raws = [{"accepted_per_pos": [9, 8], "drafts": 10, "commit_along": [3.0, 2.0]},
            {"accepted_per_pos": [7, 7], "drafts": 10, "commit_along": [3.0, 4.0, 1.0]}, {}]
    shape = Shape.of(raws)
    assert shape.positions == pytest.approx((0.8, (8 / 9 + 1.0) / 2))
    assert shape.along == (3.0, 3.0, 1.0)


def test_a_position_this_run_is_unsure_of_is_undetermined() -> None:
    # position 2: −13 % with ±0.20 over the repeats straddles the −15 % limit
    assert position_sentence([0.9, 0.3], [0.5, 0.26], 0.15, True, [0.02, 0.2]) == (
        "Draft position 1 (conditional acceptance) fell from 0.90 to 0.50 (−44.4%, limit "
        "−15%); position 2 undetermined (0.30 → 0.26 ± 0.28).")
    rows = [[0.5, 0.1], [0.5, 0.5]]
    assert draft_positions.half_width_by_index(rows) == pytest.approx([0.0, 12.706 * 0.2], rel=1e-3)
    assert draft_positions.half_width_by_index([[0.5]]) == [None]


def test_production_in_ab_mode_keeps_its_shape_as_the_baseline() -> None:
    # A/B: production's samples are the baseline, per draft position too (judge/ab.py)
    from specperf.judge.ab import as_baseline
    from specperf.measure.sample import Measurement, Sample
    from specperf.plan.workload import Case

    c = Case("reasoning", 3333, 600)
    samples = tuple(
        Sample(c.id, r, False, 3333, 600, 10.0, 200, 9.0, 1.0, None, 0, "response", "length",
               raw={"accepted_per_pos": [180, 90, 45], "drafts": 200,
                    "commit_along": [3.0, 2.0]})
        for r in range(3))
    base = as_baseline(Measurement(c, samples, "server-timings", "response"))
    assert base.positions == pytest.approx([0.9, 0.5, 0.5])
    assert base.along == pytest.approx([3.0, 2.0])
