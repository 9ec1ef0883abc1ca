"""The server's generation routes: request bodies and uniform parsing of their answers.

``sglang``: native ``POST /generate`` (``meta_info``); ``openai`` / ``openai-chat``:
``/v1/completions`` / ``/v1/chat/completions`` (``usage`` plus SGLang's
``sglext.spec_tokens_details`` or vLLM's ``metrics.speculative_decoding``). Field names
are SGLang 0.5.x's, current and legacy spellings (shared/server-apis.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import MalformedResponse
from .workload import Prompt

APIS = ("sglang", "openai", "openai-chat")
PATHS = {"sglang": "/generate", "openai": "/v1/completions",
         "openai-chat": "/v1/chat/completions"}


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


def request_body(api: str, prompt: Prompt, max_tokens: int, model: str | None,
                 nonce: str) -> tuple[str, dict[str, Any]]:
    """Path and body of one greedy, fixed-length (ignore_eos), non-streaming request."""
    if api == "sglang":
        source: dict[str, Any] = (
            {"input_ids": list(prompt.input_ids)} if prompt.input_ids is not None
            else {"text": prompt.text})
        # Never return_logprob: DDTree rejects it.
        return PATHS[api], {**source, "rid": nonce, "stream": False, "sampling_params": {
            "max_new_tokens": max_tokens, "ignore_eos": True, "temperature": 0}}
    body: dict[str, Any] = {"max_tokens": max_tokens, "ignore_eos": True, "temperature": 0,
                            "stream": False, "return_spec_tokens_details": True}
    if model:
        body["model"] = model
    if api == "openai":
        body["prompt"] = prompt.text
    else:
        body["messages"] = [{"role": "user", "content": prompt.text}]
    return PATHS[api], body


def parse(api: str, data: Any) -> Completion:
    """Uniform view of an answer; MalformedResponse naming the field when it is unusable."""
    if not isinstance(data, Mapping):
        raise MalformedResponse(f"{PATHS[api]} answered {type(data).__name__}, not an object")
    return _parse_native(data) if api == "sglang" else _parse_openai(api, data)


def _get(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise MalformedResponse(f"{where}.{key} is {value!r}: expected a number")
    return value


def _opt_num(obj: Mapping[str, Any], *keys: str) -> float | None:
    for key in keys:
        value = obj.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


def _opt_int(obj: Mapping[str, Any], *keys: str) -> int | None:
    value = _opt_num(obj, *keys)
    return None if value is None else int(value)


def _hist_sum(obj: Mapping[str, Any]) -> int | None:
    hist = obj.get("spec_correct_drafts_histogram", obj.get("spec_accept_histogram"))
    if isinstance(hist, list) and all(isinstance(v, (int, float)) for v in hist):
        return int(sum(hist))
    return None


def _parse_native(data: Mapping[str, Any]) -> Completion:
    meta = data.get("meta_info")
    if not isinstance(meta, Mapping):
        raise MalformedResponse("/generate answer has no meta_info object")
    finish = meta.get("finish_reason")
    finish_type = finish.get("type") if isinstance(finish, Mapping) else finish
    ids = data.get("output_ids")
    e2e = _opt_num(meta, "e2e_latency")
    return Completion(
        prompt_tokens=int(_get(meta, "prompt_tokens", (int, float), "meta_info")),
        completion_tokens=int(_get(meta, "completion_tokens", (int, float), "meta_info")),
        finish=str(finish_type),
        cached_tokens=_opt_int(meta, "cached_tokens"),
        verify_steps=_opt_int(meta, "spec_verify_ct"),
        accept_length=_opt_num(meta, "spec_accept_length"),
        e2e_s=e2e,
        ttft_s=_opt_num(meta, "first_token_latency"),
        histogram_sum=_hist_sum(meta),
        output_ids=len(ids) if isinstance(ids, list) else None,
        text=str(data.get("text", "")),
    )


def _parse_openai(api: str, data: Mapping[str, Any]) -> Completion:
    usage = data.get("usage")
    choices = data.get("choices")
    if not isinstance(usage, Mapping) or not isinstance(choices, list) or not choices:
        raise MalformedResponse(f"{PATHS[api]} answer lacks usage or choices")
    choice = choices[0] if isinstance(choices[0], Mapping) else {}
    details = usage.get("prompt_tokens_details")
    spec: Mapping[str, Any] = {}
    sglext = data.get("sglext")
    if isinstance(sglext, Mapping) and isinstance(sglext.get("spec_tokens_details"), Mapping):
        spec = sglext["spec_tokens_details"]
    vllm = data.get("metrics")
    steps = _opt_int(spec, "spec_verify_ct")
    if steps is None and isinstance(vllm, Mapping):
        sd = vllm.get("speculative_decoding")
        if isinstance(sd, Mapping):
            steps = _opt_int(sd, "num_spec_steps")
    message = choice.get("message")
    text = message.get("content") if isinstance(message, Mapping) else choice.get("text")
    return Completion(
        prompt_tokens=int(_get(usage, "prompt_tokens", (int, float), "usage")),
        completion_tokens=int(_get(usage, "completion_tokens", (int, float), "usage")),
        finish=str(choice.get("finish_reason")),
        cached_tokens=_opt_int(details, "cached_tokens") if isinstance(details, Mapping) else None,
        verify_steps=steps,
        accept_length=_opt_num(spec, "spec_accept_length"),
        e2e_s=None, ttft_s=None,
        histogram_sum=_hist_sum(spec),
        output_ids=None,
        text=str(text or ""),
    )
