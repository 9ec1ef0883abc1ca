"""SGLang's OpenAI-compatible ``/v1/completions`` and ``/v1/chat/completions``.

Chat parsing (parsers.py; SGLang ``serving_chat.py``): with the profile's reasoning parser and
``separate_reasoning`` (default true) the thinking goes to ``message.reasoning_content`` and
the answer to ``message.content``; ``chat_template_kwargs: {"thinking": false}`` makes the
model skip thinking. With the tool-call parser and ``tools`` (``tool_choice`` not "none") the
call is returned as ``message.tool_calls`` = [{"id": "functions.{name}:{i}", "index", "type":
"function", "function": {"name", "arguments": "<json>"}}]; ``finish_reason`` becomes
"tool_calls" only when the model stopped by itself ("stop"), so with ignore_eos it stays
"length". ``return_meta_info: true`` (non-streaming only, as in SGLang) adds the native
``meta_info`` (server-side timings and spec fields) to the choice.

Streams: one chunk per scheduler output (prefill's first token, then each verify step with
all the tokens it committed), never coalesced. Completions: a ``text`` delta per output, the
last one carrying ``finish_reason``. Chat: a role chunk (``role: "assistant"``, ``content:
""``), then per output a ``delta.reasoning_content`` chunk and/or a ``delta.content`` chunk
(an output that crosses ``</think>`` gives both; one whose text parses to nothing -- a lone
``<think>`` -- gives none) and ``delta.tool_calls`` chunks (name and id first, then argument
deltas with null id), then a chunk with an empty delta and ``finish_reason``. Then, when
``return_spec_tokens_details``, a chunk of its own with ``choices: []``, ``"usage": null`` and
``sglext`` (SGLang 0.5.23 serving_completions.py ~444-476, serving_chat.py ~2703-2762), then,
only with ``stream_options.include_usage``, a ``choices: []`` chunk with ``usage``; then
``data: [DONE]``.

vLLM profiles (vllm_api.py): the chat message and deltas name the thinking ``reasoning``
(vllm/entrypoints/openai/chat_completion/protocol.py), there is no ``sglext`` and no
``return_meta_info``; per-request ``metrics`` go on the response, or on the usage chunk of a
stream (only with include_usage).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from specperf.sim import generation
from specperf.sim.parsers import OutputParser, ToolCallPlan, ToolChoiceError, plan_tool_call
from specperf.sim.request import SimRequest
from specperf.sim.responses import finish_word, meta_info, sglext, usage
from specperf.sim.state import SimState, get_state
from specperf.sim.tokenizer import render_chat
from specperf.sim.vllm_api import per_request_metrics
from specperf.sim.wire import SSE_DONE, BadRequest, dumps, error_response, json_body, sse


@dataclass(frozen=True)
class _Call:
    """One OpenAI call: which shape, and the options that change the response."""

    chat: bool
    model: str
    created: int
    include_usage: bool
    spec_details: bool
    meta: bool = False
    reasoning: bool = False  # the reasoning parser separates the thinking
    tools: bool = False  # the tool-call parser looks for calls
    vllm: bool = False  # vLLM's shapes instead of SGLang's
    cache_report: bool = True  # usage.prompt_tokens_details (a startup flag)

    @property
    def reasoning_key(self) -> str:
        return "reasoning" if self.vllm else "reasoning_content"

    @property
    def object_name(self) -> str:
        return "chat.completion" if self.chat else "text_completion"

    @property
    def parsed(self) -> bool:
        """Whether a parser is engaged (what the parser cost faults apply to)."""
        return self.reasoning or self.tools

    def response_id(self, request: SimRequest) -> str:
        return ("chatcmpl-" if self.chat else "cmpl-") + request.id


async def completions(http: Request) -> Response:
    """``POST /v1/completions`` (raw text: no parser runs on this route)."""
    state = get_state(http)
    arrived = await generation.arrive(state)
    body = await json_body(http)
    prompt = _completion_prompt(state, body.get("prompt"))
    call = _call(state, body, chat=False)
    return await _serve(state, http, body, prompt, arrived, call)


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
    try:
        plan = plan_tool_call(body.get("tools"), body.get("tool_choice", "auto"))
    except ToolChoiceError as exc:
        raise BadRequest(str(exc)) from exc
    tools = body.get("tools") if plan is not None else None
    prompt = state.tokenizer.encode(render_chat(messages, tools), add_special_tokens=True)
    call = _call(state, body, chat=True)
    if not call.tools:
        plan = None  # no tool-call parser: the simulated model has no tool format
    if call.meta and body.get("stream"):
        raise BadRequest("return_meta_info is not supported with streaming. Please set "
                         "stream=false when using return_meta_info=true.")
    return await _serve(state, http, body, prompt, arrived, call, _thinking(body), plan)


async def _serve(
    state: SimState,
    http: Request,
    body: dict[str, Any],
    prompt: list[int],
    arrived: tuple[float, float],
    call: _Call,
    thinking: bool = True,
    plan: ToolCallPlan | None = None,
) -> Response:
    generation.check_temperature(body)
    max_tokens = body.get("max_completion_tokens") if call.chat else None
    if max_tokens is None:
        # The simulator never ends on its own (eos_rate 0), so no "until EOS" default here.
        max_tokens = body.get("max_tokens", 128)
    options = {"max_new_tokens": max_tokens, "ignore_eos": body.get("ignore_eos", False),
               "stop": body.get("stop"), "stream": body.get("stream", False),
               "rid": body.get("rid"), "temperature": body.get("temperature"),
               "cache_salt": body.get("cache_salt")}
    spec = generation.with_output(state, generation.build_spec(state, prompt, options),
                                  thinking, plan)
    failed = generation.error_fault(state)
    if failed is not None:
        return failed
    request = generation.submit(state, spec, arrived)
    if spec.stream:
        events = _chat_events if call.chat else _completion_events
        return generation.stream(state, events(state, call, request))
    if not await generation.wait_finished(state, http, request):
        return error_response(499, "Client disconnected; request aborted")
    cost = state.faults.state.parser_response_ms
    if call.parsed and cost > 0:
        request.post_processing_ms += cost
        await asyncio.sleep(cost / 1000.0)  # post-processing after the decode: wall time
    return generation.deliver(state, dumps(_final_body(state, call, request)))


def _call(state: SimState, body: dict[str, Any], chat: bool) -> _Call:
    options = body.get("stream_options")
    include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
    model = body.get("model")
    parsers = state.profile.model
    tools = body.get("tools")
    facts = state.profile.facts
    return _Call(
        vllm=not facts.sglang,
        cache_report=facts.cache_report,
        chat=chat,
        model=model if isinstance(model, str) and model else state.profile.served_model_name,
        created=int(time.time()),
        include_usage=include_usage,
        spec_details=facts.spec_tokens_details
        and bool(body.get("return_spec_tokens_details", False)),
        meta=chat and facts.return_meta_info and bool(body.get("return_meta_info", False)),
        reasoning=chat and bool(parsers.get("reasoning_parser"))
        and body.get("separate_reasoning", True) is not False,
        tools=chat and bool(parsers.get("tool_call_parser")) and bool(tools)
        and body.get("tool_choice", "auto") != "none",
    )


def _thinking(body: dict[str, Any]) -> bool:
    kwargs = body.get("chat_template_kwargs")
    return not (isinstance(kwargs, dict) and kwargs.get("thinking") is False)


def _completion_prompt(state: SimState, prompt: object) -> list[int]:
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if isinstance(prompt, str):
        return generation.prompt_ids(state, prompt, None)
    return generation.prompt_ids(state, None, prompt)


def _parser(state: SimState, call: _Call) -> OutputParser:
    return OutputParser(state.tokenizer, call.reasoning, call.tools)


def _finish(request: SimRequest, has_tool_calls: bool) -> str:
    word = finish_word(request)
    return "tool_calls" if has_tool_calls and word == "stop" else word


def _choice(state: SimState, call: _Call, request: SimRequest) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "logprobs": None}
    matched = (request.finish_reason or {}).get("matched")
    if call.chat:
        parser = _parser(state, call)
        reasoning, content, tool_calls = parser.message(request.output_ids)
        choice["message"] = {"role": "assistant", "content": content,
                             call.reasoning_key: reasoning, "tool_calls": tool_calls}
        choice["finish_reason"] = _finish(request, parser.has_tool_calls)
        matched = None if choice["finish_reason"] == "tool_calls" else matched
    else:
        choice["text"] = state.tokenizer.decode(request.output_ids)
        choice["finish_reason"] = finish_word(request)
    choice["matched_stop"] = matched
    if call.meta:
        choice["meta_info"] = meta_info(request, state.profile,
                                        state.faults.state.omit_spec_fields)
    return choice


def _final_body(state: SimState, call: _Call, request: SimRequest) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": call.response_id(request),
        "object": call.object_name,
        "created": call.created,
        "model": call.model,
        "choices": [_choice(state, call, request)],
        "usage": usage(request, call.cache_report),
    }
    if call.spec_details:
        body.update(sglext(request, state.profile, state.faults.state.omit_spec_fields))
    if call.vllm:
        metrics = per_request_metrics(request, state.profile)
        if metrics is not None:
            body["metrics"] = metrics
    return body


def _chunk(call: _Call, request: SimRequest, choices: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": call.response_id(request),
        "object": call.object_name + ("" if not call.chat else ".chunk"),
        "created": call.created,
        "model": call.model,
        "choices": choices,
    }


def _delta_chunk(call: _Call, request: SimRequest, delta: dict[str, Any],
                 finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    return sse(_chunk(call, request, [choice]))


async def _completion_events(state: SimState, call: _Call,
                             request: SimRequest) -> AsyncIterator[bytes]:
    """A text delta per scheduler output (the last with finish_reason), usage, [DONE]."""
    decoded = 0
    try:
        async for count in generation.progress(request):
            text = state.tokenizer.decode(request.output_ids[decoded:count])
            decoded = count
            finish = finish_word(request) if generation.is_final(request, count) else None
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
            yield sse(_chunk(call, request, [choice]))
        if decoded == 0 or not generation.is_final(request, decoded):  # aborted, or empty
            tail = state.tokenizer.decode(request.output_ids[decoded:])
            choice = {"index": 0, "text": tail, "logprobs": None,
                      "finish_reason": finish_word(request)}
            yield sse(_chunk(call, request, [choice]))
        async for part in _closing(state, call, request):
            yield part
    finally:
        state.scheduler.abort(request)


async def _chat_events(state: SimState, call: _Call, request: SimRequest) -> AsyncIterator[bytes]:
    """Role chunk, parsed deltas per scheduler output, finish chunk, usage, [DONE]."""
    parser = _parser(state, call)
    decoded = 0
    try:
        async for count in generation.progress(request):
            if decoded == 0:
                yield _delta_chunk(call, request, {"role": "assistant", "content": ""})
            ids = request.output_ids[decoded:count]
            decoded = count
            cost = state.faults.state.parser_chunk_ms
            if call.parsed and cost > 0:
                request.post_processing_ms += cost
                await asyncio.sleep(cost / 1000.0)  # HTTP-side post-processing, wall time
            for delta in _deltas(parser, ids, call.reasoning_key):
                yield _delta_chunk(call, request, delta)
        yield _delta_chunk(call, request, {}, _finish(request, parser.has_tool_calls))
        async for part in _closing(state, call, request):
            yield part
    finally:
        state.scheduler.abort(request)


def _deltas(parser: OutputParser, ids: list[int], reasoning_key: str) -> list[dict[str, Any]]:
    parsed = parser.feed(ids)
    deltas: list[dict[str, Any]] = []
    if parsed.reasoning:
        deltas.append({reasoning_key: parsed.reasoning})
    if parsed.content:
        deltas.append({"content": parsed.content})
    deltas.extend({"tool_calls": [call]} for call in parsed.tool_calls)
    return deltas


async def _closing(state: SimState, call: _Call, request: SimRequest) -> AsyncIterator[bytes]:
    """SGLang: the sglext chunk (choices [], usage null), then the usage chunk only with
    include_usage. vLLM: the usage chunk (with per-request metrics) only with include_usage."""
    if call.spec_details:
        ext = sglext(request, state.profile, state.faults.state.omit_spec_fields)
        if ext:
            yield sse({**_chunk(call, request, []), "usage": None, **ext})
    if call.include_usage:
        chunk = _chunk(call, request, [])
        chunk["usage"] = usage(request, call.cache_report)
        metrics = per_request_metrics(request, state.profile) if call.vllm else None
        if metrics is not None:
            chunk["metrics"] = metrics
        yield sse(chunk)
    yield SSE_DONE
