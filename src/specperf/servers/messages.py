"""What a generation is on the wire, whatever the route: the request's options, the
finished completion, and a stream's chunks. The route modules (:mod:`specperf.servers.routes`, the
server kinds such as :mod:`specperf.servers.llamacpp`) build and parse these; everything above them
reads only these types.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# Sample.raw keys of a server's limit on one verify step (measure/sample.py checks every
# sample against it): the draft tokens a step can propose, and where that number came from.
# Here, below every server kind, so a kind and the fingerprint both read them without
# importing each other.
LIMIT_KEY, LIMIT_FROM_KEY = "draft_tokens_per_step", "draft_tokens_from"


@dataclass(frozen=True)
class Completion:
    """What one finished generation says about itself, whatever the route."""

    prompt_tokens: int
    completion_tokens: int
    finish: str
    cached_tokens: int | None
    verify_steps: int | None
    accept_length: float | None
    e2e_s: float | None
    ttft_s: float | None
    histogram_sum: int | None
    output_ids: int | None
    text: str
    ids: tuple[int, ...] | None = None
    reasoning: str | None = None  # chat: message.reasoning_content (reasoning parser)
    tool_calls: tuple[Mapping[str, Any], ...] | None = None  # chat: message.tool_calls
    timings_from: str = "meta_info"  # where e2e_s / ttft_s came from ("" when absent)
    # vLLM: metrics.speculative_decoding as sent (present even when nothing was drafted:
    # num_spec_steps 0), read by specperf.servers.vllm
    spec: Mapping[str, Any] | None = None
    # SGLang: the per-request accept histogram as sent (index = drafts accepted in a step,
    # value = steps), read by specperf.servers.positions.positions_from_histogram
    histogram: tuple[int, ...] | None = None


@dataclass(frozen=True)
class RouteOptions:
    """What a request asks for beyond the plain fixed-length generation."""

    stream: bool = False
    separate_reasoning: bool = False  # chat: the reasoning parser splits out the thinking
    tools: tuple[Mapping[str, Any], ...] = ()  # chat: the tool-call parser looks for calls
    meta_info: bool = False  # chat, non-streaming: return_meta_info (server timings)


@dataclass(frozen=True)
class Chunk:
    """One output-carrying stream event: when it arrived and how many tokens it carried
    (None when the route does not say: OpenAI deltas carry text, not counts)."""

    at_s: float
    tokens: int | None


@dataclass(frozen=True)
class Streamed:
    """A parsed stream: the completion it amounts to and its output chunks in order."""

    completion: Completion
    chunks: tuple[Chunk, ...] = field(default_factory=tuple)
