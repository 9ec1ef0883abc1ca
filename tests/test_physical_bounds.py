"""Physically possible or an error: every sample is checked against the server's own limits
before it is judged (measure/sample.py ``check_possible``), whatever the server kind. One
test per identity on constructed figures, the step limit each server kind's fingerprint
gives, and the simulator's over-counting fault end to end."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from specperf.core.errors import ImpossibleSample, SpecperfError
from specperf.measure.attempt import Request, validate
from specperf.measure.sample import Sample, StepFigures, StepLimit, check_possible, limit_raw
from specperf.plan.workload import Case
from specperf.servers import llamacpp
from specperf.servers.fingerprint import step_limit
from specperf.servers.messages import Completion

CHECK = "check the server's step counter before judging it."


def _figures(steps: int | None, n: int = 64, **kw: Any) -> StepFigures:
    return StepFigures("padding-ctx13", n, steps, "spec_verify_ct", **kw)


def test_an_impossible_sample_is_a_suite_error_never_a_verdict():
    assert issubclass(ImpossibleSample, SpecperfError)


def test_more_verify_steps_than_tokens_is_an_error_naming_the_bound():
    with pytest.raises(ImpossibleSample) as err:
        check_possible(_figures(80))
    assert str(err.value) == (
        "padding-ctx13: 80 verify steps (spec_verify_ct) for 64 completion tokens: every step "
        "commits at least one token, so there are between 1 and 64; the step count is wrong; "
        f"{CHECK}")


def test_an_avg_commit_below_one_is_an_error():
    with pytest.raises(ImpossibleSample) as err:
        check_possible(_figures(64))
    assert str(err.value) == (
        "padding-ctx13: avg commit 0.98 = (64 − 1) / 64 verify steps (spec_verify_ct) is below "
        f"1, the least a verify step commits: the step count is wrong; {CHECK}")
    check_possible(_figures(63))  # one token per step: a plain decode, possible


def test_an_avg_commit_above_draft_tokens_plus_one_is_an_error_naming_where_k_came_from():
    limit = StepLimit(16, "speculative_num_draft_tokens 16, from /server_info")
    with pytest.raises(ImpossibleSample) as err:
        check_possible(_figures(3), limit)
    assert str(err.value) == (
        "padding-ctx13: avg commit 21.00 = (64 − 1) / 3 verify steps (spec_verify_ct) is above "
        "17, the most a step commits with 16 draft tokens per step (speculative_num_draft_tokens "
        f"16, from /server_info): the step count is wrong; {CHECK}")
    check_possible(_figures(4), limit)  # 15.75: possible
    check_possible(_figures(3))  # no draft length known: only the bounds that need none


def test_a_step_time_that_is_not_positive_is_an_error():
    with pytest.raises(ImpossibleSample) as err:
        check_possible(_figures(10, decode_s=0.0))
    assert str(err.value) == (
        "padding-ctx13: decode time 0.0 ms over 10 verify steps (spec_verify_ct) gives a step "
        "time that is not above 0 ms: the server's timings are wrong; check its end-to-end and "
        "first-token latencies before judging this deployment.")


def test_the_accept_histogram_must_sum_to_the_verify_steps():
    with pytest.raises(ImpossibleSample) as err:
        check_possible(_figures(10, histogram_sum=12))
    assert str(err.value) == (
        "padding-ctx13: the accept histogram sums to 12 steps but the server counts 10 verify "
        "steps (spec_verify_ct): a histogram has one entry per step, so the server's spec "
        "fields disagree; check its speculative metrics.")


def test_no_more_draft_tokens_accepted_than_drafted():
    with pytest.raises(ImpossibleSample, match="50 draft tokens accepted but only 40 proposed"):
        check_possible(_figures(10, accepted=50, drafted=40))
    check_possible(_figures(10, accepted=40, drafted=40))


def _completion(**kw: Any) -> Completion:
    base: dict[str, Any] = dict(prompt_tokens=13, completion_tokens=64, finish="length",
                                cached_tokens=0, verify_steps=10, accept_length=6.4,
                                e2e_s=1.0, ttft_s=0.1, histogram_sum=10, output_ids=64, text="x")
    return Completion(**{**base, **kw})


def test_every_response_is_checked_before_it_is_read_as_a_sample():
    case, request = Case("padding", 13, 64), Request("sglang", 64)
    validate(case, request, _completion(), calibrated=False, url="u")
    with pytest.raises(ImpossibleSample, match="sums to 11 steps .* 10 verify steps "
                                               r"\(spec_verify_ct\)"):
        validate(case, request, _completion(histogram_sum=11), calibrated=False, url="u")
    vllm_spec = {"num_spec_steps": 10, "num_accepted_draft_tokens": 45, "num_draft_tokens": 40}
    with pytest.raises(ImpossibleSample, match=r"45 draft tokens accepted but only 40 proposed "
                                               r"\(num_spec_steps\)"):
        validate(case, request, _completion(histogram_sum=None, spec=vllm_spec),
                 calibrated=False, url="u")


def test_llamacpp_timings_cannot_accept_more_than_they_drafted():
    assert llamacpp.steps_of({"draft_n": 27, "draft_n_accepted": 9}, 20) == 10
    with pytest.raises(ImpossibleSample, match=r"30 draft tokens accepted but only 27 proposed "
                                               r"\(draft_n_accepted > draft_n\)"):
        llamacpp.steps_of({"draft_n": 27, "draft_n_accepted": 30}, 64)


def test_a_sample_is_checked_when_it_is_made_with_the_limit_its_server_gave():
    raw = limit_raw({"num_draft_tokens": 16})
    Sample("padding-ctx13", 0, False, 13, 64, 1.0, 4, 0.5, 0.1, None, None, "response",
           "length", raw=raw)
    with pytest.raises(ImpossibleSample, match="is above 17, the most a step commits with 16"):
        Sample("padding-ctx13", 0, False, 13, 64, 1.0, 3, 0.5, 0.1, None, None, "response",
               "length", raw=raw)


@pytest.mark.parametrize(("fingerprint", "expected"), [
    ({"num_speculative_tokens": 4}, (4, "num_speculative_tokens 4, from /server_info")),
    ({"num_draft_tokens": 16, "ddtree_budget": 64},
     (16, "speculative_num_draft_tokens 16, from /server_info")),
    ({"num_draft_tokens": None, "ddtree_budget": 64},
     (64, "speculative_ddtree_budget 64, from /server_info")),
    ({"draft_n_max": 3}, (3, "speculative.n_max 3, from /props")),
    ({"draft_model": None, "speculative_algorithm": "draft"}, None),
])
def test_each_server_kind_names_its_draft_tokens_per_step(fingerprint, expected):
    assert step_limit(fingerprint) == expected


# /props and /slots (fields that matter) of the real llama-server 0.3.36 (0c1e570) started
# with `-md draft.gguf --spec-type draft-simple -t 2 -b 512`: no threads, no batch size, no
# draft model path, no draft length anywhere.
PROPS = {"default_generation_settings": {"params": {"speculative.types": "none"}, "n_ctx": 4096},
         "total_slots": 1, "model_path": "/m/target.gguf", "build_info": "b1-0c1e570"}
SLOTS = [{"id": 0, "n_ctx": 4096, "speculative": True, "is_processing": False,
          "params": {"speculative.types": "none,draft-simple"}}]


def test_llamacpp_fingerprint_reads_the_draft_length_only_where_reported():
    fp = llamacpp.fingerprint(PROPS, SLOTS, simulated=False)
    assert (fp["draft_model"], fp["draft_n_max"], fp["speculative_algorithm"]) == \
        ("not reported by the server", None, "draft")
    assert step_limit(fp) is None  # the bounds that need no draft length still apply
    upstream = [{**SLOTS[0], "params": {"speculative.n_max": 16, "speculative.n_min": 0}}]
    assert llamacpp.fingerprint(PROPS, upstream, simulated=False)["draft_n_max"] == 16


@pytest.mark.slow  # a whole perf session against a simulator
def test_an_over_counting_server_errors_every_case_with_the_bound(perf_project, start_sim):
    sim = start_sim()
    httpx.post(f"{sim.url}/_sim/faults", json={"extra_verify_steps": 64}).raise_for_status()
    result = perf_project().run("-m", "context_scaling", "--endpoint", sim.url,
                                "--specperf-text-classes", "padding", "--specperf-contexts", "13")
    result.assert_outcomes(errors=2)  # the case and its class's fit, never a verdict
    result.stdout.fnmatch_lines([
        "ImpossibleSample: padding-ctx13: * verify steps (spec_verify_ct) for 64 completion "
        "tokens: every step commits at least one token, so there are between 1 and 64; the "
        f"step count is wrong; {CHECK}"])
    assert "Traceback" not in result.stdout.str()
