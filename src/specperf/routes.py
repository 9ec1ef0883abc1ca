"""The server's generation routes: request bodies and uniform parsing of their answers.

``sglang``: native ``POST /generate`` (``meta_info``); ``openai`` / ``openai-chat``:
``/v1/completions`` / ``/v1/chat/completions`` (``usage`` plus SGLang's
``sglext.spec_tokens_details`` or vLLM's ``metrics.speculative_decoding``). Field names
are SGLang 0.5.x's, current and legacy spellings (shared/server-apis.md).
"""

from __future__ import annotations

import math
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
    ids: tuple[int, ...] | None = None


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


def _count(obj: Mapping[str, Any], key: str, where: str) -> int:
    """A required token count: a finite, non-negative whole number."""
    value = obj.get(key)
    number = _finite(value)
    if number is None or number < 0 or number != int(number):
        shown = "missing" if key not in obj else _show(value)
        raise MalformedResponse(f"{where}.{key} is {shown}: expected a whole number of tokens")
    return int(number)


def _show(value: Any) -> str:
    try:
        return repr(value)[:60]
    except ValueError:  # an int too long to print
        return f"a {type(value).__name__}"


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int beyond float range
        return None
    return number if math.isfinite(number) else None


def _opt_num(obj: Mapping[str, Any], *keys: str) -> float | None:
    for key in keys:
        number = _finite(obj.get(key))
        if number is not None:
            return number
    return None


def _opt_int(obj: Mapping[str, Any], *keys: str) -> int | None:
    value = _opt_num(obj, *keys)
    return None if value is None else int(value)


def _hist_sum(obj: Mapping[str, Any]) -> int | None:
    hist = obj.get("spec_correct_drafts_histogram", obj.get("spec_accept_histogram"))
    if not isinstance(hist, list):
        return None
    values = [_finite(v) for v in hist]
    if any(v is None for v in values):
        return None
    total = sum(v for v in values if v is not None)
    return int(total) if math.isfinite(total) else None


def _ids(value: Any) -> tuple[int, ...] | None:
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool)
                                       for v in value):
        return tuple(value)
    return None


def _parse_native(data: Mapping[str, Any]) -> Completion:
    meta = data.get("meta_info")
    if not isinstance(meta, Mapping):
        raise MalformedResponse("/generate answer has no meta_info object")
    finish = meta.get("finish_reason")
    finish_type = finish.get("type") if isinstance(finish, Mapping) else finish
    raw_ids = data.get("output_ids")
    e2e = _opt_num(meta, "e2e_latency")
    return Completion(
        prompt_tokens=_count(meta, "prompt_tokens", "/generate meta_info"),
        completion_tokens=_count(meta, "completion_tokens", "/generate meta_info"),
        finish=_word(finish_type),
        cached_tokens=_opt_int(meta, "cached_tokens"),
        verify_steps=_opt_int(meta, "spec_verify_ct"),
        accept_length=_opt_num(meta, "spec_accept_length"),
        e2e_s=e2e,
        ttft_s=_opt_num(meta, "first_token_latency"),
        histogram_sum=_hist_sum(meta),
        output_ids=len(raw_ids) if isinstance(raw_ids, list) else None,
        text=_text(data.get("text")),
        ids=_ids(raw_ids),
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
        prompt_tokens=_count(usage, "prompt_tokens", f"{PATHS[api]} usage"),
        completion_tokens=_count(usage, "completion_tokens", f"{PATHS[api]} usage"),
        finish=_word(choice.get("finish_reason")),
        cached_tokens=_opt_int(details, "cached_tokens") if isinstance(details, Mapping) else None,
        verify_steps=steps,
        accept_length=_opt_num(spec, "spec_accept_length"),
        e2e_s=None, ttft_s=None,
        histogram_sum=_hist_sum(spec),
        output_ids=None,
        text=_text(text),
    )


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _word(value: Any) -> str:
    """A finish reason as text ("None" when absent, the type's name when not a string)."""
    if value is None or isinstance(value, str):
        return str(value)
    return f"<{type(value).__name__}>"
