"""Every parser of server output, fed junk: it returns a value or raises the suite's own error.

Random and mutated /generate and OpenAI bodies into routes.parse, Prometheus text into
acceptance.parse_metrics, log lines into parse_decode_log and avg_commit_from_windows.
A crash with any other exception would surface as a traceback instead of one sentence.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specperf.core.errors import SpecperfError
from specperf.servers import acceptance, routes

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20),
                    st.integers(min_value=10**300, max_value=10**5000))
json_values = st.recursive(
    scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                     st.dictionaries(st.text(max_size=12), inner, max_size=4)),
    max_leaves=12)

NATIVE: dict[str, Any] = {
    "text": "The quiet archive measures a river.", "output_ids": [101, 102, 103, 104],
    "meta_info": {"id": "r1", "finish_reason": {"type": "length", "length": 4},
                  "prompt_tokens": 13, "completion_tokens": 4, "cached_tokens": 2,
                  "e2e_latency": 0.5, "first_token_latency": 0.1, "spec_verify_ct": 2,
                  "spec_accept_length": 2.0, "spec_correct_drafts_histogram": [0, 1, 1]}}
OPENAI: dict[str, Any] = {
    "choices": [{"index": 0, "text": "The quiet archive", "finish_reason": "length",
                 "message": {"role": "assistant", "content": "The quiet archive"}}],
    "usage": {"prompt_tokens": 13, "completion_tokens": 4, "total_tokens": 17,
              "prompt_tokens_details": {"cached_tokens": 2}},
    "sglext": {"spec_tokens_details": {"spec_verify_ct": 2, "spec_accept_length": 2.0,
                                       "spec_correct_drafts_histogram": [0, 1, 1]}},
    "metrics": {"speculative_decoding": {"num_spec_steps": 2}}}


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key/index path inside a JSON value."""
    found = [prefix] if prefix else []
    if isinstance(obj, dict):
        for key, value in obj.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            found += _paths(value, (*prefix, i))
    return found


@st.composite
def mutated(draw: st.DrawFn, valid: dict[str, Any]) -> Any:
    """A valid body with a few fields replaced by junk or deleted."""
    body = json.loads(json.dumps(valid))
    paths = _paths(body)
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(paths))
        parent = body
        try:
            for key in path[:-1]:
                parent = parent[key]
            if draw(st.booleans()) and isinstance(parent, dict):
                parent.pop(path[-1], None)
            else:
                parent[path[-1]] = draw(json_values)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed or replaced this path
    return body


def _parse_or_our_error(api: str, data: Any) -> None:
    try:
        comp = routes.parse(api, data)
    except SpecperfError:
        return
    assert comp.prompt_tokens >= 0 and comp.completion_tokens >= 0
    assert isinstance(comp.finish, str) and isinstance(comp.text, str)
    for value in (comp.e2e_s, comp.ttft_s, comp.accept_length):
        assert value is None or math.isfinite(value)


@FAST
@given(api=st.sampled_from(routes.APIS), data=json_values)
def test_any_json_value_parses_or_raises_our_error(api: str, data: Any) -> None:
    _parse_or_our_error(api, data)


@FAST
@given(data=mutated(NATIVE))
def test_mutated_meta_info_parses_or_raises_our_error(data: Any) -> None:
    _parse_or_our_error("sglang", data)


@FAST
@given(api=st.sampled_from(("openai", "openai-chat")), data=mutated(OPENAI))
def test_mutated_openai_bodies_parse_or_raise_our_error(api: str, data: Any) -> None:
    _parse_or_our_error(api, data)


def test_the_valid_bodies_parse_to_their_numbers() -> None:
    native = routes.parse("sglang", NATIVE)
    assert (native.completion_tokens, native.verify_steps, native.histogram_sum,
            native.output_ids, native.ids) == (4, 2, 2, 4, (101, 102, 103, 104))
    chat = routes.parse("openai-chat", OPENAI)
    assert (chat.completion_tokens, chat.verify_steps, chat.cached_tokens) == (4, 2, 2)


# -- Prometheus text ----------------------------------------------------------------------------
METRICS = """\
# HELP sglang:num_requests_total Requests finished
# TYPE sglang:num_requests_total counter
sglang:num_requests_total{model_name="m",tp_rank="0"} 7.0
# TYPE sglang:spec_verify_calls_total counter
sglang:spec_verify_calls_total{model_name="m",tp_rank="0"} 310.0
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="m",is_streaming="false"} 1200.0
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m"} 0.0
sglang:num_queue_reqs{model_name="m"} 0.0
"""


@st.composite
def mutated_text(draw: st.DrawFn, valid: str) -> str:
    """Valid text with characters inserted, deleted or swapped at random places."""
    text = valid
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(text)))
        junk = draw(st.sampled_from(['"', "{", "}", "=", " ", "\n", "#", ",", "\\", "e", "NaN",
                                     "+Inf", "-", "x", "\x00", "é", "1e999"]))
        cut = draw(st.integers(0, 3))
        text = text[:at] + junk + text[at + cut:]
    return text


def _metrics_or_our_error(text: str) -> None:
    try:
        snap = acceptance.parse_metrics(text)
    except SpecperfError:
        return
    assert isinstance(snap.idle, bool) and isinstance(snap.has_steps, bool)


@FAST
@given(text=st.text(max_size=300))
def test_random_text_as_metrics_parses_or_raises_our_error(text: str) -> None:
    _metrics_or_our_error(text)


@FAST
@given(text=mutated_text(METRICS))
def test_mutated_metrics_parse_or_raise_our_error(text: str) -> None:
    _metrics_or_our_error(text)


def test_the_valid_metrics_parse_to_their_numbers() -> None:
    snap = acceptance.parse_metrics(METRICS)
    assert (snap.requests, snap.verify_calls, snap.generation_tokens) == (7.0, 310.0, 1200.0)
    assert snap.idle


@FAST
@given(before=st.floats(allow_nan=True), after=st.floats(allow_nan=True))
def test_verify_step_deltas_return_a_count_or_raise_our_error(before: float,
                                                              after: float) -> None:
    snap = acceptance.MetricsSnapshot
    try:
        steps = acceptance.steps_from_metrics(snap(before, 0, 0, 0, 0), snap(after, 0, 0, 0, 0))
    except SpecperfError:
        return
    assert steps >= 1


# -- decode log lines -----------------------------------------------------------------------------
LINE = ("[2026-05-04 10:00:{s:02d} TP0] Decode batch. #running-req: 1, #token: 2048, "
        "token usage: 0.01, accept len: 2.91, gen throughput (token/s): 31.2, #queue-req: 0")


@FAST
@given(lines=st.lists(st.one_of(st.text(max_size=160),
                                mutated_text(LINE.format(s=5)),
                                st.builds(LINE.format, s=st.integers(0, 59))), max_size=12),
       start=st.datetimes(), span=st.integers(-100, 10**6))
def test_log_lines_parse_and_average_or_raise_our_error(lines: list[str], start: datetime,
                                                        span: int) -> None:
    try:
        windows = acceptance.parse_decode_log(lines)
        end = start + timedelta(seconds=span) if span < 10**5 else datetime.max
        commit = acceptance.avg_commit_from_windows(windows, start, end)
    except SpecperfError:
        return
    assert commit is None or math.isfinite(commit)


def test_the_valid_log_lines_average_to_their_accept_len() -> None:
    windows = acceptance.parse_decode_log([LINE.format(s=s) for s in (1, 2, 3)])
    commit = acceptance.avg_commit_from_windows(windows, datetime(2026, 5, 4, 10, 0, 0),
                                                datetime(2026, 5, 4, 10, 0, 59))
    assert commit == 2.91
