"""Identify the server once per session: flavour, fingerprint, tokenizer, acceptance sources."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import (
    AcceptanceUnavailable,
    BadStatus,
    ConfigError,
    EndpointUnreachable,
    MalformedResponse,
    NotAnLlmServer,
)
from ..plan.workload import Prompt
from . import acceptance, llamacpp, routes, serverkind
from . import simulated as simulated_adapter
from .client import Client
from .fingerprint import fingerprint_of
from .llamacpp import LlamaTokenizer
from .pinned import pinned_acceptance


@dataclass(frozen=True)
class ServerInfo:
    """What the probe learnt; immutable for the session."""

    url: str
    flavour: str
    api: str
    model: str | None
    fingerprint: dict[str, Any]
    time_scale: float
    simulated: bool
    tokenizer_path: str | None
    max_model_len: int | None
    metrics: bool
    server_timings: bool
    acceptance_source: str
    acceptance_available: tuple[str, ...]
    notes: tuple[str, ...] = field(default=())
    kind: str = "sglang"  # sglang | vllm (serverkind.py)
    release: str | None = None
    dev_mode: bool = False  # vLLM started with VLLM_SERVER_DEV_MODE=1
    embedded: bool = False  # the simulator the run started itself (a new port each run)

    @property
    def server_name(self) -> str:
        """``SGLang 0.5.23`` / ``vLLM 0.33.0 (dev mode)``: what the summary and report show."""
        return serverkind.server_name(self.kind, self.release, self.dev_mode)

    @property
    def label(self) -> str:
        """The box the run history files this run under: the URL, ``SIMULATED (URL)`` for a
        simulator the user started; the embedded simulator listens on a new port each run,
        so its label names the profile instead (one box per profile; ``url`` keeps the
        port)."""
        if self.embedded:
            return f"SIMULATED (embedded, profile {self.fingerprint.get('sim_profile', '?')})"
        return f"SIMULATED ({self.url})" if self.simulated else self.url

    def to_dict(self) -> dict[str, Any]:
        """Everything the probe learnt, for reports (no credentials are ever part of it)."""
        return {"url": self.url, "label": self.label, "flavour": self.flavour, "api": self.api,
                "model": self.model, "fingerprint": self.fingerprint,
                "time_scale": self.time_scale, "simulated": self.simulated,
                "tokenizer_path": self.tokenizer_path, "max_model_len": self.max_model_len,
                "metrics": self.metrics, "server_timings": self.server_timings,
                "acceptance_source": self.acceptance_source,
                "acceptance_available": list(self.acceptance_available),
                "notes": list(self.notes), "kind": self.kind, "release": self.release,
                "dev_mode": self.dev_mode, "server_name": self.server_name,
                "embedded": self.embedded}


class ServerTokenizer:
    """The server's /tokenize and /detokenize (SGLang and vLLM share the body shape)."""

    def __init__(self, client: Client, path: str) -> None:
        self.client = client
        self.path = path
        self.detok_path = path.replace("tokenize", "detokenize")

    def tokenize(self, text: str, add_special_tokens: bool) -> list[int]:
        data = self.client.post_json(
            self.path, {"prompt": text, "add_special_tokens": add_special_tokens}).data
        tokens = data.get("tokens") if isinstance(data, dict) else None
        if not isinstance(tokens, list):
            raise MalformedResponse(f"{self.path} answered without a tokens list: {data!r:.200}")
        return [int(t) for t in tokens]

    def detokenize(self, ids: list[int]) -> str:
        data = self.client.post_json(self.detok_path, {"tokens": ids}).data
        # SGLang answers {"text": ...}; vLLM {"prompt": ...} (vllm/entrypoints/serve/
        # tokenize/protocol.py DetokenizeResponse).
        text = data.get("text", data.get("prompt")) if isinstance(data, dict) else None
        if not isinstance(text, str):
            raise MalformedResponse(f"{self.detok_path} answered without text (SGLang) or "
                                    f"prompt (vLLM): {data!r:.200}")
        return text

    def max_model_len(self) -> int | None:
        """The context length /tokenize reports (SGLang and vLLM both send max_model_len)."""
        data = self.client.post_json(self.path, {"prompt": "specperf",
                                                 "add_special_tokens": True}).data
        value = data.get("max_model_len") if isinstance(data, dict) else None
        return value if isinstance(value, int) and not isinstance(value, bool) else None


def tokenizer_for(client: Client, flavour: str, path: str) -> ServerTokenizer | LlamaTokenizer:
    """The server's tokenizer routes in the body shape its kind speaks."""
    return LlamaTokenizer(client) if flavour == "llamacpp" else ServerTokenizer(client, path)


def _first_json(client: Client, paths: tuple[str, ...]) -> tuple[str, Any] | None:
    """GET the first of ``paths`` that answers 200 with JSON; None when all 404/405."""
    for path in paths:
        try:
            return path, client.get_json(path, timeout_s=30)
        except BadStatus as exc:
            if exc.status not in (404, 405):
                raise
        except MalformedResponse:
            continue
    return None


def check_reachable(client: Client, source: str) -> None:
    """The endpoint answers, and like an LLM server (not a web page, not a proxy's error)."""
    try:
        _check_health(client, source)
    except EndpointUnreachable as exc:
        if str(exc).startswith("cannot resolve"):  # the client's DNS sentence says it best
            raise EndpointUnreachable(f"specperf {exc} (from {source})",
                                      url=client.base_url) from exc
        raise EndpointUnreachable(
            f"specperf cannot reach the endpoint {client.base_url} (from {source}): tried "
            f"GET /health and the connection failed ({exc.__cause__}). Start the server, or "
            f"point {source} at one that is up.", url=client.base_url,
        ) from exc
    except BadStatus as exc:
        if _is_html(exc.body):
            raise _not_llm(client, source, f"GET /health answered HTTP {exc.status} with an "
                           f"HTML page{_title(exc.body)}, a web server's or proxy's error "
                           "page") from exc
        if exc.status != 404:  # a server without /health is still a server
            raise
        _check_api(client, source)


def _check_health(client: Client, source: str) -> None:
    body = client.get_text("/health", timeout_s=30)
    if _is_html(body):
        raise _not_llm(client, source, f"GET /health answered an HTML page{_title(body)}")


def _check_api(client: Client, source: str) -> None:
    """No /health: an LLM server still lists its models or its server info as JSON."""
    for path in ("/v1/models", "/server_info", "/get_server_info", "/props"):
        try:
            if isinstance(client.get_json(path, timeout_s=30), dict):
                return
        except (BadStatus, MalformedResponse):
            continue
    raise _not_llm(client, source, "it answers none of /health, /v1/models, /server_info "
                   "and /props with JSON")


def _is_html(text: str) -> bool:
    head = text.lstrip()[:200].lower()
    return head.startswith(("<!doctype html", "<html")) or "<html" in head


def _title(text: str) -> str:
    found = re.search(r"<title[^>]*>(.*?)</title>", text, re.I | re.S)
    title = " ".join(found[1].split())[:80] if found else ""
    return f" titled {title!r}" if title else ""


def _not_llm(client: Client, source: str, what: str) -> NotAnLlmServer:
    return NotAnLlmServer(
        f"specperf: {client.base_url} (from {source}) is not an LLM server: {what}. Point "
        f"{source} at the SGLang, vLLM or llama.cpp server itself.",
        url=client.base_url)


def _find_tokenizer(client: Client) -> str | None:
    for path in ("/tokenize", "/v1/tokenize"):
        try:
            ServerTokenizer(client, path).tokenize("specperf", True)
            return path
        except (BadStatus, MalformedResponse):
            continue
    return None


def _has_metrics(client: Client) -> bool:
    return _metrics_snapshot(client) is not None


def _metrics_snapshot(client: Client) -> acceptance.MetricsSnapshot | None:
    try:
        snap = acceptance.parse_metrics(client.get_text("/metrics", timeout_s=30))
    except (BadStatus, MalformedResponse):
        return None
    # llama.cpp counts no finished requests; its per-iteration counter stands in
    return snap if snap.requests is not None or snap.progress is not None else None


def _pick_api(requested: str, flavour: str) -> str:
    if requested != "auto":
        return requested
    return flavour if flavour in ("sglang", "llamacpp") else "openai"


def _try_generation(client: Client, api: str, model: str | None,
                    ids: tuple[int, ...] | None) -> routes.Completion:
    prompt = Prompt(text="specperf probe", input_ids=ids, tokens=len(ids or ()))
    path, body = routes.request_body(api, prompt, 8, model, "specperf-probe")
    return routes.parse(api, client.post_json(path, body, timeout_s=120).data)


def probe(client: Client, *, api: str, model: str | None, wanted_source: str,
          log_command: str | None, simulated: bool, endpoint_source: str,
          warn: Callable[[str], None] = lambda _: None) -> ServerInfo:
    """Probe the server; raise EndpointError / AcceptanceUnavailable / ConfigError clearly."""
    check_reachable(client, endpoint_source)
    detected = serverkind.detect(client)
    props = llamacpp.read_props(client) if detected.kind == "openai" else None
    if props is not None:
        detected = serverkind.Detected("llamacpp", llamacpp.release_of(props), False, {})
        flavour = "llamacpp"
    else:
        flavour = "sglang" if detected.kind == "sglang" and detected.server_info else "openai"
    server_info: dict[str, Any] = detected.server_info
    minfo = _first_json(client, ("/model_info", "/get_model_info")) \
        if detected.kind == "sglang" else None
    model_info: dict[str, Any] = minfo[1] if minfo and isinstance(minfo[1], dict) else {}
    chosen_api = _pick_api(api, flavour)
    if chosen_api == "sglang" and flavour != "sglang":
        raise ConfigError(serverkind.no_native_route(client.base_url, detected))
    if chosen_api == "llamacpp" and flavour != "llamacpp":
        raise ConfigError(f"--specperf-api llamacpp was asked for, but {client.base_url} has no "
                          "/props with build_info: it is not a llama.cpp server; use "
                          "--specperf-api openai.")
    served = model or server_info.get("served_model_name") or model_info.get("served_model_name")
    tok_path = _find_tokenizer(client) if props is None else LlamaTokenizer.path
    ids = tuple(tokenizer_for(client, flavour, tok_path).tokenize("specperf probe", True)) \
        if tok_path and chosen_api in ("sglang", "llamacpp") else None
    sample = _try_generation(client, chosen_api, served, ids)
    snapshot = _metrics_snapshot(client)
    metrics = snapshot is not None
    available = _available_sources(sample, snapshot is not None and snapshot.has_steps,
                                   log_command)
    source = _choose_source(wanted_source, available)
    notes = _notes(metrics, tok_path, sample, source)
    notes = serverkind.release_notes(detected, sample, snapshot, chosen_api, notes)
    for note in notes:
        warn(note)
    sim = simulated_adapter.identity(client)
    scale = sim.time_scale if sim else 1.0
    embedded = simulated  # asked for by the run: the simulator it started itself
    simulated = simulated or sim is not None
    slots = llamacpp.read_slots(client) if props is not None else []
    if props is not None:
        max_len: int | None = llamacpp.context_per_slot(props, slots)
    else:
        max_len = _max_len(server_info) or (ServerTokenizer(client, tok_path).max_model_len()
                                            if tok_path else None)
    return ServerInfo(kind=detected.kind, release=detected.release,
        dev_mode=detected.dev_mode, embedded=embedded,
        url=client.base_url, flavour=flavour, api=chosen_api,
        model=served or (props or {}).get("model_alias"),
        fingerprint=_with_profile(
            fingerprint_of(server_info, model_info, simulated) if props is None
            else llamacpp.fingerprint(props, slots, simulated,
                                      pinned_acceptance(client.base_url)), sim),
        time_scale=scale,
        simulated=simulated, tokenizer_path=tok_path,
        max_model_len=max_len, metrics=metrics,
        server_timings=sample.ttft_s is not None and sample.e2e_s is not None,
        acceptance_source=source, acceptance_available=available, notes=notes)


def identify(client: Client, *, simulated: bool, endpoint_source: str) -> dict[str, Any]:
    """The server's fingerprint from GET routes only (no generation request), as probe()
    computes it: enough to name its baseline deployment before any GPU time is spent."""
    check_reachable(client, endpoint_source)
    info = _first_json(client, ("/server_info", "/get_server_info"))
    server_info: dict[str, Any] = info[1] if info and isinstance(info[1], dict) else {}
    minfo = _first_json(client, ("/model_info", "/get_model_info"))
    model_info: dict[str, Any] = minfo[1] if minfo and isinstance(minfo[1], dict) else {}
    sim = simulated_adapter.identity(client)
    simulated = simulated or sim is not None
    return {"fingerprint": _with_profile(fingerprint_of(server_info, model_info, simulated), sim),
            "simulated": simulated}


def _with_profile(fingerprint: dict[str, Any],
                  sim: simulated_adapter.SimIdentity | None) -> dict[str, Any]:
    """A simulator's fingerprint also names its profile (its deployment is named by it)."""
    return {**fingerprint, "sim_profile": sim.profile} if sim else fingerprint


def _max_len(server_info: dict[str, Any]) -> int | None:
    value = server_info.get("context_length")
    return int(value) if isinstance(value, int) else None


def _available_sources(sample: routes.Completion, metrics: bool,
                       log_command: str | None) -> tuple[str, ...]:
    found = []
    # vLLM sends its speculative_decoding object even when nothing was drafted (an 8-token
    # probe on an ngram server: num_spec_steps 0): the source is there all the same
    if sample.verify_steps or sample.spec is not None:
        found.append("response")
    if metrics:
        found.append("metrics")
    if log_command:
        found.append("log")
    return (*found, "none")


def _choose_source(wanted: str, available: tuple[str, ...]) -> str:
    if wanted == "auto":
        return available[0]
    if wanted not in available:
        raise AcceptanceUnavailable(
            f"--specperf-acceptance-source {wanted} was asked for, but the server does not "
            f"provide it (available: {', '.join(available)}). For 'response' the server must "
            "return spec_verify_ct; for 'metrics' start it with --enable-metrics; for 'log' set "
            "--specperf-log-command.")
    return wanted


def _notes(metrics: bool, tok_path: str | None, sample: routes.Completion,
           source: str) -> tuple[str, ...]:
    notes = []
    if not metrics:
        notes.append("no /metrics: the contamination guard is off (other traffic on the "
                     "server would go unnoticed); start the server with --enable-metrics.")
    if tok_path is None:
        notes.append("no /tokenize route: prompt lengths are calibrated on usage.prompt_tokens.")
    if sample.ttft_s is None:
        notes.append("no server timings (first_token_latency): decode time is estimated with "
                     "the two-point method.")
    if source == "none":
        notes.append("no acceptance source: only tok/s is measured; avg commit and step time "
                     "checks are skipped.")
    return tuple(notes)


__all__ = ["ServerInfo", "ServerTokenizer", "probe", "check_reachable"]
