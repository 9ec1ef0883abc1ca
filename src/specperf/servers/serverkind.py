"""Which server answers: SGLang or vLLM, at which release, and what that release cannot give.

Detection, from the released sources:

- SGLang serves ``/server_info`` (``/get_server_info`` before 0.5.4) with flat server args and
  ``version`` (sglang/srt/entrypoints/http_server.py).
- vLLM serves ``/version`` -> ``{"version": ...}`` and no ``/server_info`` -- except with
  ``VLLM_SERVER_DEV_MODE=1``, where ``/server_info`` answers ``{"vllm_config", "vllm_env",
  "system_env"}`` (vllm/entrypoints/serve/dev/server_info/api_router.py). Taking that for
  SGLang would send ``/generate`` and get 404, so its keys decide.
- Anything else is a generic OpenAI-compatible server.

The notes name the flag to start the server with, the release that added a figure, or the
acceptance source used instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core.errors import BadStatus, MalformedResponse
from .acceptance import MetricsSnapshot
from .client import Client
from .messages import Completion

KIND_NAMES = {"sglang": "SGLang", "vllm": "vLLM", "llamacpp": "llama.cpp",
              "openai": "OpenAI-compatible server"}


@dataclass(frozen=True)
class Detected:
    """What the server says about itself before any generation."""

    kind: str
    release: str | None
    dev_mode: bool = False
    server_info: dict[str, Any] = field(default_factory=dict)  # fingerprint source
    sim: dict[str, Any] = field(default_factory=dict)  # the simulator's own identity


def server_name(kind: str, release: str | None, dev_mode: bool) -> str:
    """``SGLang 0.5.23``, ``vLLM 0.33.0 (dev mode)``, ``OpenAI-compatible server``."""
    name = KIND_NAMES.get(kind, kind)
    if release:
        name += f" {release}"
    return name + (" (VLLM_SERVER_DEV_MODE)" if dev_mode else "")


def _get(client: Client, path: str) -> dict[str, Any] | None:
    try:
        data = client.get_json(path, timeout_s=30)
    except BadStatus as exc:
        if exc.status not in (404, 405):
            raise
        return None
    except MalformedResponse:
        return None
    return data if isinstance(data, dict) else None


def detect(client: Client) -> Detected:
    """SGLang (flat /server_info), vLLM (/version, or dev-mode /server_info), or neither."""
    info: dict[str, Any] = _get(client, "/server_info") or _get(client, "/get_server_info") or {}
    if info and "vllm_config" not in info and "vllm_env" not in info:
        return Detected("sglang", _text(info.get("version")), False, info)
    version = _get(client, "/version")
    if info or version is not None:
        release = _text((version or {}).get("version"))
        synthetic: dict[str, Any] = {"version": release, "served_model_name": _served_model(client)}
        if isinstance(info.get("vllm_config"), str):  # dev mode: the drafter (fingerprint.py)
            synthetic["vllm_config"] = info["vllm_config"]
        return Detected("vllm", release, bool(info), synthetic)
    return Detected("openai", None, False, {})


def _served_model(client: Client) -> str | None:
    models = _get(client, "/v1/models") or {}
    data = models.get("data")
    first = data[0] if isinstance(data, list) and data and isinstance(data[0], dict) else {}
    return _text(first.get("id"))


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def no_native_route(url: str, detected: Detected) -> str:
    """The ConfigError sentence for --specperf-api sglang on a server without /generate."""
    if detected.kind == "vllm":
        return (f"--specperf-api sglang was asked for, but {url} is "
                f"{server_name('vllm', detected.release, detected.dev_mode)}, which has no "
                "/generate route; use --specperf-api openai or --specperf-api openai-chat.")
    return (f"--specperf-api sglang was asked for, but {url} has no /server_info: it is not an "
            "SGLang server; use --specperf-api openai.")


def _at_least(release: str | None, wanted: tuple[int, ...]) -> bool:
    if not release:
        return True  # unknown: do not blame the release
    parts: list[int] = []
    for piece in release.split("-", 1)[0].split("."):
        if not piece.isdigit():
            break
        parts.append(int(piece))
    return tuple(parts) >= wanted


def release_notes(detected: Detected, sample: Completion, snapshot: MetricsSnapshot | None,
                  api: str, notes: tuple[str, ...]) -> tuple[str, ...]:
    """``notes`` with the generic timing note made specific, plus what this release lacks."""
    out = [n for n in notes if not n.startswith("no server timings")]
    if sample.ttft_s is None:
        out.append(timings_note(detected, api))
    if sample.verify_steps is None:
        out.append(steps_note(detected, api, snapshot))
    if snapshot is not None and not snapshot.has_steps and detected.kind == "sglang":
        out.append("/metrics has no sglang:spec_verify_calls_total (SGLang added it in 0.5.14): "
                   "the metrics acceptance source is unavailable; use --specperf-acceptance-source "
                   "response or log.")
    if sample.cached_tokens is None and api != "sglang":
        out.append(cache_note(detected))
    return tuple(out)


def timings_note(detected: Detected, api: str) -> str:
    """Why there is no decode time from the server, and how to get one."""
    tail = "decode time is estimated with the two-point method."
    if detected.kind == "vllm":
        return ("no server timings: start vLLM with --enable-per-request-metrics (it then "
                f"returns metrics.generation_time_ms); {tail}")
    if detected.kind != "sglang":
        return f"no server timings (first_token_latency): {tail}"
    name = server_name("sglang", detected.release, False)
    if not _at_least(detected.release, (0, 5, 21)):
        return (f"no server timings: {name} has no meta_info.first_token_latency (SGLang added "
                f"it in 0.5.21, with --enable-metrics); {tail}")
    if detected.server_info.get("enable_metrics") is False:
        return (f"no server timings: start {name} with --enable-metrics (meta_info."
                f"first_token_latency needs it); {tail}")
    if api != "sglang":
        return (f"no server timings on --specperf-api {api}: {name} sends them only in meta_info "
                f"(--specperf-api sglang, or return_meta_info on the chat route); {tail}")
    return f"no server timings (first_token_latency): {tail}"


def steps_note(detected: Detected, api: str, snapshot: MetricsSnapshot | None) -> str:
    """Why the response has no verify-step count, and which source is used instead."""
    instead = ("acceptance comes from the /metrics counters" if snapshot is not None
               and snapshot.has_steps else "acceptance needs --specperf-acceptance-source log "
               "or is not measured")
    if detected.kind == "vllm":
        return ("no per-request step count: start vLLM with --per-request-spec-decode-metrics "
                f"summary (metrics.speculative_decoding.num_spec_steps); {instead}.")
    if detected.kind == "sglang" and api != "sglang" \
            and not _at_least(detected.release, (0, 5, 19)):
        return (f"no per-request step count: {server_name('sglang', detected.release, False)} "
                "has no sglext.spec_tokens_details on the OpenAI routes (added in 0.5.19); "
                f"{instead}; --specperf-api sglang reads meta_info.spec_verify_ct.")
    return f"no per-request step count in the response; {instead}."


def cache_note(detected: Detected) -> str:
    """The OpenAI routes carry no cached-token count without a startup flag."""
    flag = "--enable-prompt-tokens-details" if detected.kind == "vllm" \
        else "--enable-cache-report"
    name = KIND_NAMES.get(detected.kind, "the server")
    return (f"no usage.prompt_tokens_details.cached_tokens: the prefix-cache check is off on "
            f"this route; start {name} with {flag}.")
