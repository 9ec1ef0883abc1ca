"""SGLang's OpenAI-compatible ``/v1/completions`` and ``/v1/chat/completions``."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from specperf.sim import generation
from specperf.sim.request import SimRequest
from specperf.sim.responses import finish_word, sglext, usage
from specperf.sim.state import SimState, get_state
from specperf.sim.tokenizer import render_chat
from specperf.sim.wire import SSE_DONE, BadRequest, dumps, error_response, json_body, sse


@dataclass(frozen=True)
class _Call:
    """One OpenAI call: which shape, and the options that change the response."""

    chat: bool
    model: str
    created: int
    include_usage: bool
    spec_details: bool

    @property
    def object_name(self) -> str:
        return "chat.completion" if self.chat else "text_completion"

    def response_id(self, request: SimRequest) -> str:
        return ("chatcmpl-" if self.chat else "cmpl-") + request.id


async def completions(http: Request) -> Response:
    """``POST /v1/completions``."""
    state = get_state(http)
    arrived = await generation.arrive(state)
    body = await json_body(http)
    prompt = _completion_prompt(state, body.get("prompt"))
    return await _serve(state, http, body, prompt, arrived, chat=False)


async def chat_completions(http: Request) -> Response:
    """``POST /v1/chat/completions`` (messages rendered with the documented template)."""
    state = get_state(http)
    arrived = await generation.arrive(state)
    body = await json_body(http)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(
        isinstance(m, dict) for m in messages
    ):
        raise BadRequest("messages must be a non-empty list of message objects")
    prompt = state.tokenizer.encode(render_chat(messages), add_special_tokens=True)
    return await _serve(state, http, body, prompt, arrived, chat=True)


async def _serve(
    state: SimState,
    http: Request,
    body: dict[str, Any],
    prompt: list[int],
    arrived: tuple[float, float],
    chat: bool,
) -> Response:
    generation.check_temperature(body)
    max_tokens = body.get("max_completion_tokens") if chat else None
    if max_tokens is None:
        # The simulator never ends on its own (eos_rate 0), so no "until EOS" default here.
        max_tokens = body.get("max_tokens", 128)
    options = {"max_new_tokens": max_tokens, "ignore_eos": body.get("ignore_eos", False),
               "stop": body.get("stop"), "stream": body.get("stream", False),
               "rid": body.get("rid")}
    spec = generation.build_spec(state, prompt, options)
    call = _call(state, body, chat)
    failed = generation.error_fault(state)
    if failed is not None:
        return failed
    request = generation.submit(state, spec, arrived)
    if spec.stream:
        return generation.stream(state, _events(state, call, request))
    if not await generation.wait_finished(state, http, request):
        return error_response(499, "Client disconnected; request aborted")
    return generation.deliver(state, dumps(_final_body(state, call, request)))


def _call(state: SimState, body: dict[str, Any], chat: bool) -> _Call:
    options = body.get("stream_options")
    include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
    model = body.get("model")
    return _Call(
        chat=chat,
        model=model if isinstance(model, str) and model else state.profile.served_model_name,
        created=int(time.time()),
        include_usage=include_usage,
        spec_details=bool(body.get("return_spec_tokens_details", False)),
    )


def _completion_prompt(state: SimState, prompt: object) -> list[int]:
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if isinstance(prompt, str):
        return generation.prompt_ids(state, prompt, None)
    return generation.prompt_ids(state, None, prompt)


def _choice(state: SimState, call: _Call, request: SimRequest) -> dict[str, Any]:
    text = state.tokenizer.decode(request.output_ids)
    choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": finish_word(request)}
    if call.chat:
        choice["message"] = {"role": "assistant", "content": text, "reasoning_content": None,
                             "tool_calls": None}
    else:
        choice["text"] = text
    matched = (request.finish_reason or {}).get("matched")
    choice["matched_stop"] = matched
    return choice


def _final_body(state: SimState, call: _Call, request: SimRequest) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": call.response_id(request),
        "object": call.object_name,
        "created": call.created,
        "model": call.model,
        "choices": [_choice(state, call, request)],
        "usage": usage(request),
    }
    if call.spec_details:
        body.update(sglext(request, state.profile, state.faults.state.omit_spec_fields))
    return body


def _chunk(call: _Call, request: SimRequest, choices: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": call.response_id(request),
        "object": call.object_name + ("" if not call.chat else ".chunk"),
        "created": call.created,
        "model": call.model,
        "choices": choices,
    }


def _delta(call: _Call, text: str, finish: str | None, first: bool) -> dict[str, Any]:
    if call.chat:
        delta: dict[str, Any] = {"content": text}
        if first:
            delta["role"] = "assistant"
        return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}


async def _events(state: SimState, call: _Call, request: SimRequest) -> AsyncIterator[bytes]:
    """Delta chunks per verify step, a finishing chunk, the usage chunk if asked, [DONE]."""
    decoded = 0
    try:
        async for count in generation.progress(request):
            text = state.tokenizer.decode(request.output_ids[decoded:count])
            yield sse(_chunk(call, request, [_delta(call, text, None, decoded == 0)]))
            decoded = count
        tail = state.tokenizer.decode(request.output_ids[decoded:])
        finish = _delta(call, tail, finish_word(request), decoded == 0)
        yield sse(_chunk(call, request, [finish]))
        if call.include_usage or call.spec_details:
            yield sse(_usage_chunk(state, call, request))
        yield SSE_DONE
    finally:
        state.scheduler.abort(request)


def _usage_chunk(state: SimState, call: _Call, request: SimRequest) -> dict[str, Any]:
    chunk = _chunk(call, request, [])
    chunk["usage"] = usage(request)
    if call.spec_details:
        chunk.update(sglext(request, state.profile, state.faults.state.omit_spec_fields))
    return chunk
