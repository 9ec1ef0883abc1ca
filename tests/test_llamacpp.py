"""llama.cpp's answers, metrics and log lines as specperf reads them (field names and shapes
of llama-server from llama-cpp-python 0.3.36's vendored llama.cpp 0c1e570, tools/server:
server-common.cpp server_slot_stats::to_json, server-task.cpp to_metrics, server-context.cpp
print_timings). The real-server tier (tests/real) runs the same code against the real server.
"""

from __future__ import annotations

import pytest

from specperf.core.errors import MalformedResponse
from specperf.measure.guard import Disturbed, TrafficGuard
from specperf.plan.workload import Prompt
from specperf.servers import llamacpp, routes
from specperf.servers.acceptance import parse_metrics

TIMINGS = {"cache_n": 0, "prompt_n": 16, "prompt_ms": 5.0, "prompt_per_token_ms": 0.31,
           "prompt_per_second": 3200.0, "predicted_n": 64, "predicted_ms": 90.0,
           "predicted_per_token_ms": 1.43, "predicted_per_second": 700.0}


def answer(timings: dict[str, object], n: int = 64, stop: str = "limit") -> dict[str, object]:
    return {"content": "x y z", "id_slot": 0, "stop": True, "stop_type": stop,
            "tokens_predicted": n, "tokens_evaluated": 16, "tokens_cached": 0,
            "timings": timings, "tokens": [], "truncated": False}


def test_verify_steps_are_n_minus_one_minus_accepted_drafts():
    comp = routes.parse("llamacpp", answer({**TIMINGS, "draft_n": 60, "draft_n_accepted": 41}))
    assert (comp.completion_tokens, comp.prompt_tokens, comp.finish) == (64, 16, "length")
    assert comp.verify_steps == 64 - 1 - 41
    assert comp.ttft_s == pytest.approx(0.005) and comp.e2e_s == pytest.approx(0.095)
    assert comp.cached_tokens == 0 and comp.timings_from == "timings"


def test_no_draft_fields_mean_nothing_was_drafted_not_unknown():
    assert routes.parse("llamacpp", answer(TIMINGS)).verify_steps == 63


def test_an_answer_that_stopped_early_says_so():
    assert routes.parse("llamacpp", answer(TIMINGS, n=10, stop="eos")).finish == "eos"


@pytest.mark.parametrize("bad, said", [
    ({"timings": None}, "/completion answer has no timings object"),
    ({"tokens_predicted": -1}, "/completion tokens_predicted is -1: expected a whole number "
                               "of tokens"),
])
def test_unusable_answers_are_named(bad, said):
    with pytest.raises(MalformedResponse) as exc:
        routes.parse("llamacpp", {**answer(TIMINGS), **bad})
    assert str(exc.value) == said


def test_openai_route_answers_take_their_timings():
    data = {"choices": [{"text": "x", "finish_reason": "length", "index": 0}],
            "usage": {"prompt_tokens": 16, "completion_tokens": 64, "total_tokens": 80},
            "timings": {**TIMINGS, "draft_n": 10, "draft_n_accepted": 3}}
    comp = routes.parse("openai", data)
    assert comp.verify_steps == 60 and comp.e2e_s == pytest.approx(0.095)


def test_request_body_is_greedy_fixed_length_uncached_and_seeded():
    path, body = routes.request_body("llamacpp", Prompt("", (1, 5, 7), 3), 64, None, "n")
    assert path == "/completion"
    assert body == {"prompt": [1, 5, 7], "n_predict": 64, "ignore_eos": True,
                    "cache_prompt": False, "temperature": 0, "seed": llamacpp.SEED,
                    "stream": False}


METRICS = """# HELP llamacpp:n_decode_total Total number of llama_decode() calls
# TYPE llamacpp:n_decode_total counter
llamacpp:n_decode_total {decodes}
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total {tokens}
# TYPE llamacpp:spec_decode_num_accepted_tokens_total counter
llamacpp:spec_decode_num_accepted_tokens_total {accepted}
# TYPE llamacpp:spec_decode_num_drafts_total counter
llamacpp:spec_decode_num_drafts_total 7
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing {running}
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 0
"""


def snap(decodes=10, tokens=100, accepted=30, running=0):
    return parse_metrics(METRICS.format(decodes=decodes, tokens=tokens, accepted=accepted,
                                        running=running))


def test_metrics_read_llamacpp_names():
    s = snap(running=1)
    assert (s.progress, s.generation_tokens, s.accepted_drafts, s.verify_calls,
            s.running, s.queued, s.requests) == (10, 100, 30, 7, 1, 0, None)
    assert not s.idle


def test_steps_from_metrics_use_the_accepted_drafts_delta():
    assert llamacpp.steps_from_metrics(snap(), snap(accepted=71), 64) == 22


def scripted(*snaps):
    queue = list(snaps)
    return TrafficGuard(lambda: queue.pop(0) if len(queue) > 1 else queue[0], settle_s=0.0,
                        sleep=lambda _: None)


def test_the_guard_passes_when_only_our_tokens_were_counted():
    assert scripted(snap(tokens=164)).after_counted(snap(), 64).generation_tokens == 164


def test_the_guard_catches_a_foreign_request_that_finished_inside_ours():
    with pytest.raises(Disturbed) as exc:
        scripted(snap(tokens=172)).after_counted(snap(), 64)
    assert str(exc.value) == ("the generated-token counter moved by 72, not by our 64: "
                              "foreign requests ran during the measurement")


def test_the_guard_catches_a_foreign_request_still_running_after_ours():
    with pytest.raises(Disturbed) as exc:
        scripted(snap(tokens=164, running=1)).after_counted(snap(), 64)
    assert str(exc.value) == ("1 foreign requests still running and 0 queued after the "
                              "measurement")


def test_the_acceptance_log_line_gives_the_last_requests_steps():
    lines = ["slot print_timing: id  0 | task 3 | prompt eval time = 5.0 ms",
             "slot print_timing: id  0 | task 3 | draft acceptance = 0.65829 (  131 accepted "
             "/   199 generated), mean len =  2.80",
             "slot print_timing: id  0 | task 9 | draft acceptance = 0.50000 (   20 accepted "
             "/    40 generated), mean len =  2.00"]
    assert llamacpp.parse_acceptance_log(lines) == [(131, 199), (20, 40)]
    assert llamacpp.steps_from_log(lines, 64) == 43
    assert llamacpp.steps_from_log(lines[:1], 64) is None
