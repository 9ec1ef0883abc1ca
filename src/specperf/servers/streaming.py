"""What a stream says about itself: TTFT, delivery rate, chunks per verify step, ITL.

A speculative server sends one chunk per scheduler output: the prefill's first token, then
one per verify step carrying every token that step committed (SGLang never splits a step's
tokens across chunks). So chunk gaps are step times, not token times, and counting chunks
says nothing about the decode rate. The decode rate always comes from the server
(``meta_info`` or ``/metrics``); the stream gives only what the *client* saw.

For one stream with N completion tokens, S verify steps and output chunks c_0 … c_k
(arrival times t_0 … t_k, client clock from the send, in the server's time base), n_i
tokens in c_i:

- ``ttft_ms``: t_0, the first output chunk (on the chat route the role chunk, which the
  server sends with the first output).
- ``delivery_tok_s``: (N − n_0) / (t_k − t_0): tokens after the first chunk over the time
  the client spent receiving them. With n_0 = 1 it is comparable to the server's
  ``decode_tok_s`` = (N − 1) / T_d; a gap between the two is time added after the decode
  (transport, proxies, the client, HTTP-side post-processing).
- ``chunks_per_step``: k / S: 1.0 on SGLang (one chunk per verify step); below 1 the server
  coalesces steps (stream interval), above 1 a step's output is split (e.g. a reasoning
  and a content delta).
- ``gap_ms``: median of t_i − t_{i−1}, the per-chunk inter-arrival time (vLLM's bench and
  SGLang's bench_serving on OpenAI routes record this as "ITL").
- ``itl_ms``: median per-token ITL, each gap divided evenly over the tokens its chunk
  delivered (n_i entries of (t_i − t_{i−1}) / n_i; SGLang bench_serving's convention on
  /generate). Needs per-chunk token counts, which only the native route carries; None
  on OpenAI routes.
- ``tpot_ms``: (t_k − t_0) / (N − n_0), the mean time per output token after the first.

docs/streaming.md explains why both gap and per-token figures are reported.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from .messages import Chunk


@dataclass(frozen=True)
class StreamStats:
    """The client-side figures of one stream (times in ms, in the server's time base)."""

    ttft_ms: float
    span_ms: float
    chunks: int
    first_tokens: int
    delivery_tok_s: float | None
    chunks_per_step: float | None
    gap_ms: float | None
    gap_p90_ms: float | None
    itl_ms: float | None
    tpot_ms: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def stream_stats(chunks: Sequence[Chunk], completion_tokens: int, steps: int | None,
                 scale: float = 1.0) -> StreamStats:
    """Figures of one stream; ``scale`` divides client times into the server's time base."""
    if not chunks:
        return StreamStats(0.0, 0.0, 0, 0, None, None, None, None, None, None)
    times = [1000.0 * c.at_s / scale for c in chunks]
    first_tokens = chunks[0].tokens if chunks[0].tokens is not None else 1
    after = completion_tokens - first_tokens
    span = times[-1] - times[0]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    return StreamStats(
        ttft_ms=times[0], span_ms=span, chunks=len(chunks), first_tokens=first_tokens,
        delivery_tok_s=1000.0 * after / span if span > 0 and after > 0 else None,
        chunks_per_step=(len(chunks) - 1) / steps if steps else None,
        gap_ms=statistics.median(gaps) if gaps else None,
        gap_p90_ms=_quantile(gaps, 0.9),
        itl_ms=_per_token_itl(gaps, [c.tokens for c in chunks[1:]]),
        tpot_ms=span / after if after > 0 else None,
    )


def _per_token_itl(gaps: Sequence[float], tokens: Sequence[int | None]) -> float | None:
    """Median of each gap spread evenly over the tokens its chunk delivered."""
    if not gaps or any(n is None for n in tokens):
        return None
    spread = [gap / n for gap, n in zip(gaps, tokens, strict=True) if n
              for _ in range(n)]
    return statistics.median(spread) if spread else None


def _quantile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
