"""A draft position claims only what its figures can say (issue 41, item 2).

A clean rerun once noted ``reasoning-ctx1663`` with "Draft position 5 (conditional
acceptance) fell from 0.09 to 0.06 (−35.1%, limit −10%)" beside exact acceptance's
"identical verify steps on 3 of 3 prompts". Two things were wrong: a rate from 3 requests
carried a limit claim, and the run's rates were those of the baseline's first 3 prompts
while the baseline's were the mean over all 10 of its prompts — the prompt mix differed,
not acceptance. The samples below are that run's (the simulator, seed 0).
"""

from __future__ import annotations

from specperf.baselines.store import CaseBaseline
from specperf.core.limits import DEFAULT_TOLERANCES
from specperf.core.stats import Summary
from specperf.judge.positions import Shape, locate, position_sentence
from specperf.judge.verdict import judge_case
from specperf.measure.determinism import PromptRecord

BASE_POSITIONS = [0.9344, 0.7366, 0.4696, 0.2279, 0.0949]
# (accepted per position, drafts = verify steps) of the three measured requests
RUN = [([184, 141, 60, 15, 1], 198), ([182, 135, 67, 16, 1], 198), ([189, 132, 61, 18, 1], 198)]


def raws(steps_delta: int = 0, output: str = "out", reproducible: bool = True) -> list[dict]:
    return [{"accepted_per_pos": acc, "drafts": drafts + steps_delta, "prompt_k": k,
             "prompt_digest": f"p{k}", "output_digest": f"{output}{k}",
             "reproducible": reproducible}
            for k, (acc, drafts) in enumerate(RUN)]


def baseline(commit: float = 3.0253) -> CaseBaseline:
    metrics = {"tok_s": Summary(47.2, 0.0, 10), "avg_commit": Summary(commit, 0.0, 10),
               "step_ms": Summary(62.0, 0.0, 10)}
    prompts = {k: PromptRecord(198, f"p{k}", f"out{k}") for k in range(10)}
    return CaseBaseline("reasoning", 1663, 600, metrics, {}, positions=BASE_POSITIONS,
                        prompts=prompts, deterministic=True)


def now(commit: float = 3.0253) -> dict[str, Summary]:
    return {"tok_s": Summary(47.5, 0.1, 3), "avg_commit": Summary(commit, 0.0, 3),
            "step_ms": Summary(62.0, 0.1, 3)}


def test_the_clean_rerun_is_a_pass_with_nothing_said_of_positions() -> None:
    verdict = judge_case("reasoning-ctx1663", now(), baseline(), DEFAULT_TOLERANCES,
                         Shape.of(raws()))
    assert verdict.status == "pass"
    assert "position" not in verdict.message


def test_identical_steps_on_the_baselines_prompts_say_nothing_moved() -> None:
    # Even from enough requests: the baseline's rates are over other prompts too.
    shape = Shape.of(raws() * 2)
    assert shape.positions_n == (6, 6, 6, 6, 6)
    assert locate(shape, now(), baseline(), DEFAULT_TOLERANCES) == []


def test_on_resent_prompts_positions_only_locate_a_fall_avg_commit_shows() -> None:
    fewer = Shape.of(raws(steps_delta=-2) * 2)  # the drafter changed: steps differ
    assert locate(fewer, now(), baseline(), DEFAULT_TOLERANCES) == []
    fell = locate(fewer, now(2.5), baseline(), DEFAULT_TOLERANCES)
    assert fell and fell[0].startswith("Draft position 5 (conditional acceptance) fell")


def test_a_rate_from_three_requests_claims_no_limit() -> None:
    other_prompts = Shape.of(raws(reproducible=False))
    assert other_prompts.positions_n == (3, 3, 3, 3, 3)
    assert locate(other_prompts, now(), baseline(), DEFAULT_TOLERANCES) == []
    # When avg commit fell beyond its tolerance the fall is still located, without a limit.
    assert locate(other_prompts, now(2.5), baseline(), DEFAULT_TOLERANCES) == [
        "Draft position 5 (conditional acceptance) fell most, from 0.09 to 0.06 (−35.1%), "
        "over 3 requests: too few to judge one position against the 10% limit."]


def test_from_enough_requests_a_position_is_judged_as_before() -> None:
    base, new = [0.9, 0.889, 0.875], [0.9, 0.889, 0.125]
    assert position_sentence(base, new, 0.15, True, counts=(5, 5, 5)) == (
        "Draft position 3 (conditional acceptance) fell from 0.88 to 0.12 (−85.7%, limit "
        "−15%); positions 1–2 held.")
    assert position_sentence(base, new, 0.15, False, counts=(4, 4, 4)) is None
    assert position_sentence(base, [0.9, 0.95, 0.9], 0.15, True, counts=(3, 3, 3)) == (
        "No draft position fell (conditional acceptance per position 0.90 → 0.90, 0.89 → "
        "0.95, 0.88 → 0.90), over 3 requests: too few to judge one position against the 15% "
        "limit.")
