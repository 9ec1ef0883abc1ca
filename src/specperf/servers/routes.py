"""The server's generation routes: request bodies and uniform parsing of their answers.

``sglang``: native ``POST /generate`` (``meta_info``); ``openai`` / ``openai-chat``:
``/v1/completions`` / ``/v1/chat/completions`` (``usage`` plus SGLang's
``sglext.spec_tokens_details`` or vLLM's ``metrics.speculative_decoding``). Field names
are SGLang 0.5.x's, current and legacy spellings.

:class:`RouteOptions` turns on what the parser and streaming paths need: streaming (with
``stream_options.include_usage``), the chat route's parsers (``separate_reasoning``, one
``tools`` entry) and ``return_meta_info`` (SGLang attaches the native ``meta_info`` to a
non-streaming chat choice). :func:`parse_stream` reads a stream into the same
:class:`Completion` plus the arrival of each output-carrying chunk.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import MalformedResponse
from ..plan.workload import Prompt
from . import llamacpp
from .client import StreamEvent
from .messages import Chunk as Chunk
from .messages import Completion as Completion
from .messages import RouteOptions as RouteOptions
from .messages import Streamed as Streamed

APIS = ("sglang", "openai", "openai-chat", "llamacpp")
PATHS = {"sglang": "/generate", "openai": "/v1/completions",
         "openai-chat": "/v1/chat/completions", "llamacpp": "/completion"}


def request_body(api: str, prompt: Prompt, max_tokens: int, model: str | None,
                 nonce: str, options: RouteOptions | None = None) -> tuple[str, dict[str, Any]]:
    """Path and body of one greedy, fixed-length (ignore_eos) request."""
    options = options or RouteOptions()
    if api == "llamacpp":  # llama.cpp's native /completion (specperf.servers.llamacpp)
        return llamacpp.request_body(prompt, max_tokens, options)
    if api == "sglang":
        source: dict[str, Any] = (
            {"input_ids": list(prompt.input_ids)} if prompt.input_ids is not None
            else {"text": prompt.text})
        # Never return_logprob: DDTree rejects it.
        return PATHS[api], {**source, "rid": nonce, "stream": options.stream,
                            "sampling_params": {"max_new_tokens": max_tokens,
                                                "ignore_eos": True, "temperature": 0}}
    body: dict[str, Any] = {"max_tokens": max_tokens, "ignore_eos": True, "temperature": 0,
                            "stream": options.stream, "return_spec_tokens_details": True}
    if options.stream:
        body["stream_options"] = {"include_usage": True}
    if model:
        body["model"] = model
    if api == "openai":
        body["prompt"] = prompt.text
        return PATHS[api], body
    body["messages"] = [{"role": "user", "content": prompt.text}]
    if options.separate_reasoning:
        body["separate_reasoning"] = True
    if options.tools:
        body["tools"] = [dict(t) for t in options.tools]
        body["tool_choice"] = "auto"  # "required" would constrain decoding: another workload
    if options.meta_info and not options.stream:  # SGLang rejects it on streams
        body["return_meta_info"] = True
    return PATHS[api], body


def parse(api: str, data: Any) -> Completion:
    """Uniform view of an answer; MalformedResponse naming the field when it is unusable."""
    if not isinstance(data, Mapping):
        raise MalformedResponse(f"{PATHS[api]} answered {type(data).__name__}, not an object")
    if api == "llamacpp":
        return llamacpp.parse(data)
    parsed = _parse_native(data) if api == "sglang" else _parse_openai(api, data)
    return llamacpp.apply_timings(parsed, data.get("timings")) if "timings" in data else parsed


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
    # SGLang's OpenAI layer sends an absent histogram as [] (openai/utils.py
    # spec_tokens_details_from_meta_info: `or []`): a sum of 0 there means "not reported".
    if not isinstance(hist, list) or not hist:
        return None
    values = [_finite(v) for v in hist]
    if any(v is None for v in values):
        return None
    total = sum(v for v in values if v is not None)
    return int(total) if math.isfinite(total) else None


def _histogram(obj: Mapping[str, Any]) -> tuple[int, ...] | None:
    """The accept histogram as whole step counts (either spelling), None when absent or
    empty (see _hist_sum)."""
    hist = obj.get("spec_correct_drafts_histogram", obj.get("spec_accept_histogram"))
    counts = _ids(hist)
    return counts if counts else None


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
        histogram=_histogram(meta),
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
    # The OpenAI layer turns an absent spec_verify_ct into 0 (`or 0`): 0 steps is "absent".
    steps = _opt_int(spec, "spec_verify_ct") or None
    sd = vllm.get("speculative_decoding") if isinstance(vllm, Mapping) else None
    sd = sd if isinstance(sd, Mapping) else None
    if steps is None and sd is not None:
        # vLLM: only the steps that had drafts (0 when none did); S is servers.vllm's
        steps = _opt_int(sd, "num_spec_steps")
    meta = choice.get("meta_info")
    meta = meta if isinstance(meta, Mapping) else {}  # return_meta_info (SGLang chat)
    if steps is None:
        steps = _opt_int(meta, "spec_verify_ct")
    message = choice.get("message")
    message = message if isinstance(message, Mapping) else {}
    text = message.get("content") if message else choice.get("text")
    e2e, ttft = _opt_num(meta, "e2e_latency"), _opt_num(meta, "first_token_latency")
    if (e2e is None or ttft is None) and isinstance(vllm, Mapping):
        e2e, ttft = vllm_timings(vllm)
    return Completion(
        prompt_tokens=_count(usage, "prompt_tokens", f"{PATHS[api]} usage"),
        completion_tokens=_count(usage, "completion_tokens", f"{PATHS[api]} usage"),
        finish=_word(choice.get("finish_reason")),
        cached_tokens=_opt_int(details, "cached_tokens") if isinstance(details, Mapping) else None,
        verify_steps=steps,
        accept_length=_opt_num(spec, "spec_accept_length") or _opt_num(meta, "spec_accept_length"),
        e2e_s=e2e, ttft_s=ttft,
        histogram_sum=_hist_sum(spec) if spec else _hist_sum(meta),
        histogram=_histogram(spec) if spec else _histogram(meta),
        output_ids=None,
        text=_text(text),
        reasoning=_opt_text(message.get("reasoning_content", message.get("reasoning"))),
        tool_calls=_calls(message.get("tool_calls")),
        timings_from=("" if e2e is None or ttft is None
                      else "meta_info" if meta else "metrics"),
        spec=sd,
    )


def vllm_timings(metrics: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """(e2e_s, ttft_s) from vLLM's per-request ``metrics`` (``--enable-per-request-metrics``),
    on SGLang's clock: both from arrival, so e2e − ttft is ``generation_time_ms``, the decode
    interval (vllm/entrypoints/generate/base/serving.py); (None, None) without them."""
    queue = _opt_num(metrics, "queue_time_ms") or 0.0
    first = _opt_num(metrics, "time_to_first_token_ms")
    decode = _opt_num(metrics, "generation_time_ms")
    if first is None or decode is None:
        return None, None
    ttft = (queue + first) / 1000.0
    return ttft + decode / 1000.0, ttft


def _opt_text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _calls(value: Any) -> tuple[Mapping[str, Any], ...] | None:
    if not isinstance(value, list) or not value:
        return None
    return tuple(c if isinstance(c, Mapping) else {"malformed": c} for c in value)


# -- streams ------------------------------------------------------------------------------------
def parse_stream(api: str, events: Sequence[StreamEvent]) -> Streamed:
    """A stream's completion and output chunks; MalformedResponse when it is unusable."""
    if not events or not all(isinstance(e.data, Mapping) for e in events):
        raise MalformedResponse(f"{PATHS[api]} streamed no events, or events that are not "
                                "objects")
    if api == "sglang":
        return _native_stream(events)
    if api == "llamacpp":
        return llamacpp.parse_stream(events)
    streamed = _openai_stream(api, events)
    timings = next((e.data["timings"] for e in reversed(events) if "timings" in e.data), None)
    return Streamed(llamacpp.apply_timings(streamed.completion, timings), streamed.chunks) \
        if timings is not None else streamed


def _native_stream(events: Sequence[StreamEvent]) -> Streamed:
    """Each chunk carries cumulative meta_info.completion_tokens; the last is the final body."""
    chunks = []
    seen = 0
    for event in events:
        meta = event.data.get("meta_info")
        count = _opt_int(meta, "completion_tokens") if isinstance(meta, Mapping) else None
        if count is None:
            ids = event.data.get("output_ids")
            count = len(ids) if isinstance(ids, list) else None
        tokens = None if count is None else count - seen
        seen = count if count is not None else seen
        chunks.append(Chunk(event.at_s, tokens))
    final = _parse_native(events[-1].data)
    return Streamed(final, tuple(chunks))


@dataclass
class _Deltas:
    """What the chat/completion deltas of a stream add up to."""

    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    finish: Any = None

    def add(self, choice: Mapping[str, Any]) -> bool:
        """Take one choice; True when it carried output (text, reasoning, a call, the role)."""
        if choice.get("finish_reason") is not None:
            self.finish = choice["finish_reason"]
        delta = choice.get("delta")
        if not isinstance(delta, Mapping):
            text = choice.get("text")
            self.content.append(_text(text))
            return bool(text)
        for key, sink in (("content", self.content), ("reasoning_content", self.reasoning),
                          ("reasoning", self.reasoning)):  # vLLM names it "reasoning"
            if isinstance(delta.get(key), str):
                sink.append(delta[key])
        for call in delta.get("tool_calls") or []:
            if isinstance(call, Mapping):
                self._call(call)
        # The role chunk goes out with the first output (SGLang's serving_chat), so it marks it.
        return bool(delta.get("content") or delta.get("reasoning_content")
                    or delta.get("reasoning") or delta.get("tool_calls") or delta.get("role"))

    def _call(self, call: Mapping[str, Any]) -> None:
        index = call.get("index", 0)
        entry = self.calls.setdefault(index if isinstance(index, int) else 0, {
            "id": None, "type": "function", "function": {"name": None, "arguments": ""}})
        function = call.get("function")
        function = function if isinstance(function, Mapping) else {}
        entry["id"] = entry["id"] or call.get("id")
        entry["function"]["name"] = entry["function"]["name"] or function.get("name")
        if isinstance(function.get("arguments"), str):
            entry["function"]["arguments"] += function["arguments"]


def _openai_stream(api: str, events: Sequence[StreamEvent]) -> Streamed:
    deltas = _Deltas()
    chunks: list[Chunk] = []
    summary: Mapping[str, Any] | None = None
    extra: dict[str, Any] = {}
    for event in events:
        choices = event.data.get("choices")
        # SGLang sends sglext in a chunk of its own (choices [], usage null) before the
        # usage chunk (0.5.23 serving_completions.py ~444-476, serving_chat.py ~2703-2762);
        # vLLM puts per-request metrics on the usage chunk. Keep them wherever they come.
        extra.update({k: event.data[k] for k in ("sglext", "metrics")
                      if isinstance(event.data.get(k), Mapping)})
        if isinstance(event.data.get("usage"), Mapping) and not choices:
            summary = event.data
            continue
        for choice in choices if isinstance(choices, list) else []:
            if isinstance(choice, Mapping) and deltas.add(choice):
                chunks.append(Chunk(event.at_s, None))
    if summary is None:
        raise MalformedResponse(f"{PATHS[api]} stream ended without a usage chunk although "
                                "stream_options.include_usage was sent")
    message = {"content": "".join(deltas.content),
               "reasoning_content": "".join(deltas.reasoning) if deltas.reasoning else None,
               "tool_calls": [deltas.calls[i] for i in sorted(deltas.calls)] or None}
    body = {**extra, **summary, "choices": [{"message": message,
                                             "finish_reason": deltas.finish}]}
    return Streamed(_parse_openai(api, body), tuple(chunks))


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _word(value: Any) -> str:
    """A finish reason as text ("None" when absent, the type's name when not a string)."""
    if value is None or isinstance(value, str):
        return str(value)
    return f"<{type(value).__name__}>"
