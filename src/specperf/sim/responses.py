"""Response bodies: SGLang ``meta_info`` (with spec fields) and the OpenAI shapes.

Spec fields per profile switch ``spec_fields``:

- ``current``: ``spec_verify_ct`` (verify steps S), ``spec_accept_length`` (N / S, first
  token included), ``spec_accept_rate`` (correct / proposed drafts),
  ``spec_num_correct_drafts`` (sum of accepted drafts = N - 1 - S),
  ``spec_num_proposed_drafts`` (S * (max_commit - 1): the drafted chain depth per step),
  ``spec_correct_drafts_histogram`` (index = drafts accepted in a step, value = steps; sums
  to S). As in SGLang (managers/schedule_batch.py ``update_spec_correct_drafts_histogram``)
  the histogram grows with use: its length is the largest index seen plus one. It is the
  one per-position record SGLang gives (specperf reads accepted drafts per position off it,
  servers/positions.py ``positions_from_histogram``): its tokenizer manager
  (managers/tokenizer_manager.py ``_calculate_spec_decoding_metrics``) writes it, and every
  other spec field, into ``meta_info`` only when the request finished, so a stream's
  intermediate chunks carry no per-step commits, here as there.
- ``aliased`` (0.5.14, 0.5.19): the current names plus the backward-compat aliases
  ``spec_accepted_drafts``, ``spec_proposed_drafts`` and ``spec_accept_histogram``.
- ``legacy`` (0.5.11): ``spec_verify_ct``, ``spec_accept_length``, ``spec_accept_rate``,
  ``spec_accepted_drafts``, ``spec_proposed_drafts``, ``spec_accept_histogram``.
- ``legacy-0.5.8``: ``spec_verify_ct``, ``spec_accept_length``, ``spec_accept_token_num``,
  ``spec_draft_token_num`` (no histogram).
- ``absent``: none of them (a server without speculative metrics in its responses).
"""

from __future__ import annotations

from typing import Any

from specperf.sim.profile import Profile
from specperf.sim.request import SimRequest


def spec_numbers(request: SimRequest, max_commit: int) -> dict[str, Any]:
    """The current-spelling spec fields of a finished request."""
    steps = len(request.commits)
    completion = len(request.output_ids)
    correct = sum(request.commits) - steps
    proposed = steps * (max_commit - 1)
    histogram: list[int] = []
    for commit in request.commits:
        index = min(max(commit - 1, 0), max_commit - 1)
        histogram.extend([0] * (index + 1 - len(histogram)))
        histogram[index] += 1
    return {
        "spec_verify_ct": steps,
        "spec_accept_length": completion / steps if steps else float(completion),
        "spec_accept_rate": correct / proposed if proposed else 0.0,
        "spec_num_correct_drafts": correct,
        "spec_num_proposed_drafts": proposed,
        "spec_correct_drafts_histogram": histogram,
    }


def spec_fields(request: SimRequest, profile: Profile, omit: bool) -> dict[str, Any]:
    """Spec fields in the profile's spelling (empty when absent or omitted by a fault)."""
    style = profile.switches.spec_fields
    if omit or style == "absent":
        return {}
    numbers = spec_numbers(request, profile.physics.max_commit)
    if style == "current":
        return numbers
    aliases = {"spec_accepted_drafts": numbers["spec_num_correct_drafts"],
               "spec_proposed_drafts": numbers["spec_num_proposed_drafts"],
               "spec_accept_histogram": numbers["spec_correct_drafts_histogram"]}
    if style == "aliased":
        return {**numbers, **aliases}
    common = {key: numbers[key] for key in ("spec_verify_ct", "spec_accept_length")}
    if style == "legacy":
        return {**common, "spec_accept_rate": numbers["spec_accept_rate"], **aliases}
    return {**common, "spec_accept_token_num": numbers["spec_num_correct_drafts"],
            "spec_draft_token_num": numbers["spec_num_proposed_drafts"]}


def meta_info(request: SimRequest, profile: Profile, omit_spec: bool) -> dict[str, Any]:
    """``meta_info`` of a /generate response or final stream chunk (wall-clock latencies)."""
    meta: dict[str, Any] = {
        "id": request.id,
        "finish_reason": request.finish_reason,
        "prompt_tokens": request.prompt_tokens,
        "completion_tokens": len(request.output_ids),
        "cached_tokens": request.cached_tokens,
    }
    if request.finished_mono is not None:
        meta["e2e_latency"] = request.finished_mono - request.received_mono
    if profile.switches.server_timings:
        meta.update(_timings(request, profile.facts.at_least("0.5.21")))
    meta.update(spec_fields(request, profile, omit_spec))
    return meta


def partial_meta(request: SimRequest, completion_tokens: int) -> dict[str, Any]:
    """``meta_info`` of an intermediate stream chunk."""
    return {
        "id": request.id,
        "finish_reason": None,
        "prompt_tokens": request.prompt_tokens,
        "completion_tokens": completion_tokens,
        "cached_tokens": request.cached_tokens,
    }


def _timings(request: SimRequest, first_token_latency: bool = True) -> dict[str, Any]:
    first = request.first_token_mono
    finished = request.finished_mono
    queue_end = request.prefill_start_mono
    out: dict[str, Any] = {
        "request_received_ts": request.received_ts,
        "request_finished_ts": request.finished_ts,
        "queue_time": (queue_end - request.received_mono) if queue_end is not None else 0.0,
    }
    if first is not None and first_token_latency:  # 0.5.21+ only (release.py)
        out["first_token_latency"] = first - request.received_mono
    if first is not None and finished is not None:
        span = finished - first
        decoded = len(request.output_ids) - 1
        out["decode_throughput"] = decoded / span if span > 0 else 0.0
    return out


def finish_word(request: SimRequest) -> str:
    """OpenAI finish_reason: "length", "stop" or "abort"."""
    reason = request.finish_reason or {}
    return str(reason.get("type", "stop"))


def usage(request: SimRequest, cache_report: bool = True) -> dict[str, Any]:
    """OpenAI ``usage`` block; the cached-token count only with ``--enable-cache-report``
    (SGLang openai/usage_processor.py; vLLM: ``--enable-prompt-tokens-details``)."""
    prompt = request.prompt_tokens
    completion = len(request.output_ids)
    out: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cache_report:
        out["prompt_tokens_details"] = {"cached_tokens": request.cached_tokens}
    return out


def sglext(request: SimRequest, profile: Profile, omit: bool) -> dict[str, Any]:
    """``sglext.spec_tokens_details`` (always current spelling, like SGLang's OpenAI layer);
    absent before 0.5.19, whose OpenAI protocol has no ``return_spec_tokens_details``."""
    if omit or profile.switches.spec_fields == "absent" or not profile.facts.spec_tokens_details:
        return {}
    numbers = spec_numbers(request, profile.physics.max_commit)
    # SpecTokensDetails (entrypoints/openai/protocol.py) always serialises these too.
    numbers.update(spec_cap_length=0.0, spec_block_accept_length=0.0, spec_cap_lens_histogram=[])
    return {"sglext": {"spec_tokens_details": numbers}}
