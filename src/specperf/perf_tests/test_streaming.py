"""Streaming done right: a stream's cost stated against the same request unstreamed.

The incident's first false lead was a stream read through an SSH tunnel showing 29 tok/s:
chunk latency, not decode. Here the decode rate always comes from the server (final
``meta_info``), the client side is reported beside it (TTFT, delivery rate, chunks per
verify step, ITL per chunk and per token; conventions in docs/streaming.md), and a stream
that reaches the client slowly while the server decodes at its normal rate is labelled
transport/client overhead: it fails (it is what the user gets), and its sentence says the
server decoded at its normal rate, so the tunnel or proxy is what to check, not the server.

Two cases at the incident's context: ``reasoning-ctx3333`` (~2.9 tokens per chunk, the real
traffic) and ``padding-ctx3333`` (~7.9 tokens per chunk, where a per-chunk convention and a
per-token one differ most).
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.streaming,
              pytest.mark.perf_cases(("reasoning", 3333), ("padding", 3333))]


def test_stream_vs_non_stream(perf_case, stream_paths, specperf_paths):
    """The server's decode while streaming within tolerance of the unstreamed request."""
    specperf_paths.stream(stream_paths)
