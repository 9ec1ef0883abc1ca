"""Which real server, which release, started with which flags: what the simulator then answers.

A profile names its server ``kind`` ("sglang" or "vllm"), its ``release`` and the startup
``[flags]`` it was launched with. Every shape that differs between releases or flags is
decided here, from the released sources (paths relative to ``sglang/srt/`` or ``vllm/``):

SGLang
- ``meta_info`` timings (``request_received_ts``, ``queue_time``, ``decode_throughput``, ...)
  only with ``--enable-metrics`` (managers/tokenizer_manager.py, ``if self.enable_metrics``);
  ``first_token_latency`` among them only from 0.5.21 (observability/req_time_stats.py
  ``convert_to_output_meta_info``: absent in 0.5.14 and 0.5.19).
- Spec fields: 0.5.11 spells ``spec_accepted_drafts`` / ``spec_proposed_drafts`` /
  ``spec_accept_histogram``; 0.5.14 and 0.5.19 send the current names plus those aliases
  ("FIXME: backward-compat aliases"); 0.5.21+ the current names only.
- ``sglext.spec_tokens_details`` on the OpenAI routes from 0.5.19 (0.5.14's protocol.py has
  no ``return_spec_tokens_details``); ``return_meta_info`` on chat from 0.5.14.
- ``/model_info`` names the parsers and the served model only after 0.5.14
  (entrypoints/http_server.py ``model_info``); before, they are server args in /server_info.
- ``usage.prompt_tokens_details.cached_tokens`` only with ``--enable-cache-report``
  (entrypoints/openai/usage_processor.py).
- ``sglang:num_requests_total`` carries ``is_streaming`` from 0.5.19
  (observability/metrics_collector.py).
- ``SGLANG_LOG_FORWARD_ITERS=1`` writes ``Decode batch [N], ...``
  (managers/scheduler_components/metrics_reporter.py).
- ``context_length`` in /server_info is the command-line value: null unless passed.

vLLM 0.33
- No /generate, /server_info only with ``VLLM_SERVER_DEV_MODE=1``
  (entrypoints/launchers/api_server/routers.py), /version, /tokenize, /detokenize answering
  ``{"prompt": ...}`` (entrypoints/serve/tokenize/protocol.py ``DetokenizeResponse``).
- Per-request ``metrics``: timings only with ``--enable-per-request-metrics``,
  ``speculative_decoding`` only with ``--per-request-spec-decode-metrics summary|detailed``
  (entrypoints/generate/base/serving.py, config/observability.py).
- ``usage.prompt_tokens_details`` only with ``--enable-prompt-tokens-details``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

KINDS = ("sglang", "vllm")


@dataclass(frozen=True)
class Flags:
    """The startup flags (and environment switches) a simulated server was launched with."""

    enable_metrics: bool = True
    enable_cache_report: bool = True
    context_length_passed: bool = True  # SGLang --context-length given on the command line
    log_forward_iters: bool = False  # SGLANG_LOG_FORWARD_ITERS=1
    enable_per_request_metrics: bool = False  # vLLM
    per_request_spec_decode_metrics: str = "none"  # vLLM: none | summary | detailed
    enable_prompt_tokens_details: bool = False  # vLLM
    dev_mode: bool = False  # vLLM: VLLM_SERVER_DEV_MODE=1


def version_tuple(release: str) -> tuple[int, ...]:
    """``"0.5.23"`` -> (0, 5, 23); text after the numbers (``-ddtree-sim``) is ignored."""
    parts: list[int] = []
    for piece in release.split("-", 1)[0].split("."):
        if not piece.isdigit():
            break
        parts.append(int(piece))
    return tuple(parts)


@dataclass(frozen=True)
class Release:
    """A server kind at a release with its flags; each property is one release/flag fact."""

    kind: str
    release: str
    flags: Flags

    def at_least(self, release: str) -> bool:
        return version_tuple(self.release) >= version_tuple(release)

    @property
    def sglang(self) -> bool:
        return self.kind == "sglang"

    @property
    def spec_style(self) -> str:
        """Spelling of the spec fields in SGLang's meta_info (see responses.spec_fields)."""
        if not self.at_least("0.5.14"):
            return "legacy"
        return "current" if self.at_least("0.5.21") else "aliased"

    @property
    def first_token_latency(self) -> bool:
        return self.sglang and self.flags.enable_metrics and self.at_least("0.5.21")

    @property
    def spec_tokens_details(self) -> bool:
        return self.sglang and self.at_least("0.5.19")

    @property
    def return_meta_info(self) -> bool:
        return self.sglang and self.at_least("0.5.14")

    @property
    def model_info_parsers(self) -> bool:
        return self.at_least("0.5.15")

    @property
    def cache_report(self) -> bool:
        if self.sglang:
            return self.flags.enable_cache_report
        return self.flags.enable_prompt_tokens_details

    @property
    def requests_streaming_label(self) -> bool:
        return self.at_least("0.5.19")

    @property
    def vllm_timings(self) -> bool:
        return not self.sglang and self.flags.enable_per_request_metrics

    @property
    def vllm_spec_metrics(self) -> bool:
        return not self.sglang and self.flags.per_request_spec_decode_metrics != "none"

    def describe(self) -> dict[str, Any]:
        """For /_sim/truth: kind, release and flags."""
        return {"kind": self.kind, "release": self.release, "flags": vars(self.flags)}


def parse_flags(raw: dict[str, Any]) -> Flags:
    """``[flags]`` of a profile; unknown keys or a bad spec-metrics level are a ValueError."""
    flags = Flags(**raw)
    if flags.per_request_spec_decode_metrics not in ("none", "summary", "detailed"):
        raise ValueError("per_request_spec_decode_metrics must be none, summary or detailed")
    return flags
