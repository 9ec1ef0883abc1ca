"""What every generation route shares: validation, faults, submission, waiting, delivery."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from specperf.sim.parsers import ToolCallPlan, output_script
from specperf.sim.request import GenerationSpec, SimRequest
from specperf.sim.state import SimState
from specperf.sim.wire import (
    SSE_HEADERS,
    BadRequest,
    DroppedResponse,
    error_response,
    malformed_response,
    one_part,
)

_DISCONNECT_POLL_S = 1.0
_STREAM_DROP_AFTER = 3  # SSE events sent before a dropped stream is cut


def prompt_ids(state: SimState, text: object, ids: object) -> list[int]:
    """Token ids of a text prompt (with bos) or of given input_ids (used as given)."""
    if isinstance(text, str) and text:
        return state.tokenizer.encode(text, add_special_tokens=True)
    if isinstance(ids, list) and ids and all(_is_id(i) for i in ids):
        # Ids never seen get placeholder pieces so the output can still be detokenized.
        for token in ids:
            if not state.tokenizer.knows([token]):
                state.tokenizer.adopt(token)
        return list(ids)
    raise BadRequest("Provide a non-empty 'text' string or a non-empty list of int 'input_ids'")


def build_spec(state: SimState, prompt: list[int], options: dict[str, Any]) -> GenerationSpec:
    """Validate the sampling options against the profile's context length."""
    max_new = options.get("max_new_tokens", 128)
    if isinstance(max_new, bool) or not isinstance(max_new, int) or max_new < 1:
        raise BadRequest(f"max_new_tokens must be a positive integer, got {max_new!r}")
    limit = state.profile.context_length
    if len(prompt) + max_new > limit:
        raise BadRequest(
            f"Requested token count exceeds the model's maximum context length of {limit} "
            f"tokens. You requested a total of {len(prompt) + max_new} tokens: {len(prompt)} "
            f"tokens from the input messages and {max_new} tokens for the completion."
        )
    return GenerationSpec(
        prompt_ids=prompt,
        max_new_tokens=max_new,
        ignore_eos=bool(options.get("ignore_eos", False)),
        stop=_stops(options.get("stop")),
        stream=bool(options.get("stream", False)),
        rid=options.get("rid") if isinstance(options.get("rid"), str) else None,
        greedy=_greedy(options.get("temperature")),
        cache_salt=salt if isinstance(salt := options.get("cache_salt"), str) else None,
    )


async def arrive(state: SimState) -> tuple[float, float]:
    """Apply the hang fault, then stamp the arrival (epoch, loop clock) of a request.

    The scheduler may start a request's simulated prefill at its arrival, so the
    simulator's own parsing and tokenizing does not add to the (time-scaled) wall time.
    """
    if state.faults.state.hang_s > 0:
        await asyncio.sleep(state.faults.state.hang_s)
    return time.time(), asyncio.get_running_loop().time()


def error_fault(state: SimState) -> Response | None:
    """The error fault: an SGLang-like error response for a fraction of requests."""
    faults = state.faults
    if faults.roll(faults.state.error_rate):
        status = faults.state.error_status
        return error_response(status, f"Simulated server error (fault injection, {status})")
    return None


def submit(state: SimState, spec: GenerationSpec, arrived: tuple[float, float]) -> SimRequest:
    """Submit to the scheduler, applying the early-stop fault."""
    faults = state.faults
    if faults.roll(faults.state.early_stop_rate):
        stop_at = max(1, int(spec.max_new_tokens * faults.uniform(0.1, 0.5)))
        spec = replace(spec, early_stop_at=stop_at)
    if faults.state.loop_output:
        spec = looping(state, spec)
    return state.scheduler.submit(spec, arrived=arrived)


# The loop_output fault's cycle: plain words, so both token ids and text repeat.
LOOP_TEXT = " the loop goes on"


def looping(state: SimState, spec: GenerationSpec) -> GenerationSpec:
    """The spec with every unscripted output position scripted to one short cycle."""
    cycle = state.tokenizer.encode(LOOP_TEXT, add_special_tokens=False)
    script = {i: cycle[i % len(cycle)] for i in range(spec.max_new_tokens)}
    script.update(spec.script)  # think / tool-call markers keep their places
    return replace(spec, script=script)


async def wait_finished(state: SimState, http: Request, request: SimRequest) -> bool:
    """Wait for the request; abort it (False) if the client goes away meanwhile."""
    while True:
        try:
            await asyncio.wait_for(request.done.wait(), timeout=_DISCONNECT_POLL_S)
            return True
        except TimeoutError:
            if await http.is_disconnected():
                state.scheduler.abort(request)
                return False


def deliver(state: SimState, body: bytes) -> Response:
    """A finished non-streaming JSON body, possibly malformed or dropped by a fault."""
    faults = state.faults
    if faults.roll(faults.state.drop_rate):
        half = body[: len(body) // 2]
        return DroppedResponse(one_part(half), 1, "application/json", len(body))
    if faults.roll(faults.state.malformed_rate):
        return malformed_response(body)
    return Response(body, media_type="application/json")


def stream(state: SimState, events: AsyncIterator[bytes]) -> Response:
    """An SSE response, possibly cut mid-stream by the drop fault."""
    faults = state.faults
    if faults.roll(faults.state.drop_rate):
        return DroppedResponse(events, _STREAM_DROP_AFTER, "text/event-stream")
    return StreamingResponse(events, media_type="text/event-stream", headers=SSE_HEADERS)


async def progress(request: SimRequest) -> AsyncIterator[int]:
    """Committed-token counts, one per scheduler output (the prefill's first token, then each
    verify step), never coalesced; ends when the request finishes.

    So a stream carries exactly one chunk per verify step however slowly it is consumed: a
    slow consumer (a parser, the client) falls behind instead of merging steps.
    """
    queue = request.updates
    assert queue is not None
    while True:
        count = await queue.get()
        if count < 0:
            return
        yield count


def is_final(request: SimRequest, count: int) -> bool:
    """Whether ``count`` is the request's last output (it finished with that step)."""
    return request.finish_reason is not None and count == len(request.output_ids)


def with_output(state: SimState, spec: GenerationSpec, thinking: bool,
                call: ToolCallPlan | None = None) -> GenerationSpec:
    """The spec with its scripted think / tool-call tokens (see parsers.py)."""
    thinking = thinking and bool(state.profile.model.get("reasoning_parser"))
    if not thinking and call is None:
        return spec
    script = output_script(state.tokenizer, spec.max_new_tokens, thinking, call,
                           spec.ignore_eos)
    return replace(spec, script=script)


def check_temperature(options: dict[str, Any]) -> None:
    """Reject option shapes SGLang rejects (kept small: only what the simulator checks)."""
    temperature = options.get("temperature", 0.0)
    if temperature is not None and not isinstance(temperature, (int, float)):
        raise BadRequest(f"temperature must be a number, got {temperature!r}")


def _greedy(temperature: object) -> bool:
    """Only an explicit temperature 0 decodes greedily: SGLang's default is 1.0
    (sampling_params.py, protocol.py), which samples, so repeats may differ."""
    return not isinstance(temperature, bool) and temperature == 0


def _stops(raw: object) -> tuple[str, ...]:
    if raw is None:
        return ()
    if isinstance(raw, str):
        return (raw,) if raw else ()
    if isinstance(raw, list) and all(isinstance(s, str) for s in raw):
        return tuple(s for s in raw if s)
    raise BadRequest(f"stop must be a string or a list of strings, got {raw!r}")


def _is_id(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
