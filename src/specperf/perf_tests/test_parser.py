"""The parser path: the chat route with the deployed parsers must keep up with the native route.

A parser deploy is one of the two things the suite gates. Each case runs the same workload
through ``/generate`` and through ``/v1/chat/completions`` with the parsers engaged
(``separate_reasoning``; one tool offered when a tool-call parser is configured),
alternating requests, at equal context (the chat prompt is shortened by the template's
tokens). A gap is attributed to the decode (server timings differ) or to post-processing
(client wall − server e2e grows on the chat route); the parsers must also have run.

One case, ``reasoning-ctx3333``: free-form reasoning is the traffic the parsers see (its
thinking goes through the reasoning parser), it commits ~2.9 tokens per verify step, so it
has the most chunks per token — the worst case for a per-chunk parser cost — and 3333 is
the incident's context. Each test is one pair of paths, warm-up plus ``--specperf-repeats`` requests
each (8 requests, ~2.7 min of GPU at 600 tokens); docs/streaming.md gives the cost.
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.parser, pytest.mark.perf_cases(("reasoning", 3333))]


def test_chat_route_keeps_up_with_native(perf_case, parser_paths, specperf_paths):
    """Non-streaming, return_meta_info: chat tok/s and step time within tolerance of native."""
    specperf_paths.parser(parser_paths)


@pytest.mark.streaming
def test_chat_stream_keeps_up_with_native_stream(perf_case, chat_stream_paths, specperf_paths):
    """Streamed on the same transport: a slower chat stream with equal decode is post-processing."""
    specperf_paths.chat_stream(chat_stream_paths)
