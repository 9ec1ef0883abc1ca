"""SGLang's native ``POST /generate`` (non-streaming JSON and SSE streaming).

The text is the model's raw output: with the profile's reasoning parser set it starts with
the ``<think>`` ... ``</think>`` section (parsers.py); no parser runs on this route.
Streaming: one SSE chunk per scheduler output, i.e. one for the prefill's first token and one
per verify step (carrying every token that step committed), each with the cumulative
``text`` and ``output_ids``; the last step's chunk is the final one (full ``meta_info``),
then ``data: [DONE]``. So a stream has exactly 1 + ``spec_verify_ct`` data chunks.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from specperf.sim import generation
from specperf.sim.request import SimRequest
from specperf.sim.responses import meta_info, partial_meta
from specperf.sim.state import SimState, get_state
from specperf.sim.wire import SSE_DONE, BadRequest, dumps, error_response, json_body, sse


async def generate(http: Request) -> Response:
    """``POST /generate``: text or input_ids plus sampling_params."""
    state = get_state(http)
    arrived = await generation.arrive(state)
    body = await json_body(http)
    params = body.get("sampling_params") or {}
    if not isinstance(params, dict):
        raise BadRequest("sampling_params must be an object")
    generation.check_temperature(params)
    prompt = generation.prompt_ids(state, body.get("text"), body.get("input_ids"))
    options = {**params, "stream": body.get("stream", False), "rid": body.get("rid")}
    spec = generation.with_output(state, generation.build_spec(state, prompt, options), True)
    failed = generation.error_fault(state)
    if failed is not None:
        return failed
    request = generation.submit(state, spec, arrived)
    if spec.stream:
        return generation.stream(state, _events(state, request))
    if not await generation.wait_finished(state, http, request):
        return error_response(499, "Client disconnected; request aborted")
    return generation.deliver(state, dumps(_final_body(state, request)))


def _final_body(state: SimState, request: SimRequest) -> dict[str, Any]:
    omit = state.faults.state.omit_spec_fields
    return {
        "text": state.tokenizer.decode(request.output_ids),
        "output_ids": list(request.output_ids),
        "meta_info": state.faults.over_count(meta_info(request, state.profile, omit)),
    }


async def _events(state: SimState, request: SimRequest) -> AsyncIterator[bytes]:
    """One chunk per scheduler output with the cumulative text; the last is the final body."""
    pieces: list[str] = []
    decoded = 0
    try:
        async for count in generation.progress(request):
            if generation.is_final(request, count):
                break
            pieces.append(state.tokenizer.decode(request.output_ids[decoded:count]))
            decoded = count
            chunk = {
                "text": "".join(pieces),
                "output_ids": request.output_ids[:count],
                "meta_info": partial_meta(request, count),
            }
            yield sse(chunk)
        yield sse(_final_body(state, request))
        yield SSE_DONE
    finally:
        state.scheduler.abort(request)  # no-op when it finished; frees it if the client left
