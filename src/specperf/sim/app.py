"""The starlette application: route table, info/admin routes, and the ``/_sim/`` API."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from specperf.sim import native, openai_api, parsers, vllm_api
from specperf.sim.decodelog import DecodeLog
from specperf.sim.faults import FaultError, Faults
from specperf.sim.generation import arrive, error_fault, wait_finished
from specperf.sim.metrics import CONTENT_TYPE, SimMetrics
from specperf.sim.profile import Profile
from specperf.sim.request import GenerationSpec
from specperf.sim.scheduler import Scheduler
from specperf.sim.state import SimState, get_state
from specperf.sim.tokenizer import BOS_ID, Tokenizer, UnknownTokenError
from specperf.sim.vllm_metrics import VllmMetrics
from specperf.sim.wire import BadRequest, error_response, json_body


def build_state(profile: Profile, time_scale: float, seed: int, log_file: Path | None) -> SimState:
    """Wire the components of one simulator."""
    tokenizer = Tokenizer()
    if profile.model.get("reasoning_parser") or profile.model.get("tool_call_parser"):
        parsers.register_markers(tokenizer)
    faults = Faults(seed)
    scheduler = Scheduler(profile, faults, tokenizer, time_scale, seed)
    draft_tokens = max(1, profile.physics.max_commit - 1)
    metrics: SimMetrics | VllmMetrics = SimMetrics(scheduler, profile, time_scale)
    if profile.kind == "vllm":  # vLLM writes no SGLang decode lines
        metrics = VllmMetrics(scheduler, profile.served_model_name, draft_tokens)
        log_file = None
    decode_log = DecodeLog(log_file, profile.decode_log_interval,
                           profile.switches.log_format == "legacy", draft_tokens, metrics,
                           forward_iters=profile.flags.log_forward_iters)
    scheduler.observers.extend([metrics, decode_log])
    return SimState(profile, tokenizer, faults, scheduler, metrics, decode_log, time_scale, seed)


def build_app(state: SimState) -> Starlette:
    """The ASGI app serving one simulator state."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await state.scheduler.start()
        try:
            yield
        finally:
            await state.scheduler.stop()
            state.decode_log.close()

    app = Starlette(
        routes=_routes(state.profile),
        lifespan=lifespan,
        exception_handlers={
            BadRequest: _bad_request,
            404: _not_found,
            405: _not_allowed,
        },
    )
    app.state.sim = state
    app.add_middleware(_IdentityHeader, value=f"profile={state.profile.name}; "
                                              f"time-scale={state.time_scale!r}")
    return app


# Every response names the simulator, its profile and its time scale. Real servers send no
# such header, so a client can tell the simulator from the server kind it imitates without
# asking it anything a real server would not answer (and this one header is all it reads).
IDENTITY_HEADER = "x-specperf-simulator"


class _IdentityHeader:
    """Pure ASGI middleware: adds the identity header to every HTTP response (streams too)."""

    def __init__(self, app: Any, value: str) -> None:
        self.app = app
        self.header = (IDENTITY_HEADER.encode(), value.encode())

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_header(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), self.header]}
            await send(message)

        await self.app(scope, receive, send_with_header)


def _routes(profile: Profile) -> list[Route]:
    return _vllm_routes(profile) if profile.kind == "vllm" else _sglang_routes()


def _vllm_routes(profile: Profile) -> list[Route]:
    """vLLM 0.33's routes (no /generate, /model_info, /flush_cache; /server_info only in dev
    mode: vllm/entrypoints/launchers/api_server/routers.py)."""
    post, get = ["POST"], ["GET"]
    routes = [
        Route("/v1/completions", openai_api.completions, methods=post),
        Route("/v1/chat/completions", openai_api.chat_completions, methods=post),
        Route("/tokenize", tokenize, methods=post),
        Route("/detokenize", detokenize, methods=post),
        Route("/version", vllm_api.version, methods=get),
        Route("/health", health, methods=get),
        Route("/metrics", metrics, methods=get),
        Route("/v1/models", models, methods=get),
        *_sim_routes(),
    ]
    if profile.flags.dev_mode:
        routes.append(Route("/server_info", vllm_api.server_info, methods=get))
    return routes


def _sim_routes() -> list[Route]:
    return [
        Route("/_sim/faults", faults_get, methods=["GET"]),
        Route("/_sim/faults", faults_post, methods=["POST"]),
        Route("/_sim/reset", sim_reset, methods=["POST"]),
        Route("/_sim/truth", sim_truth, methods=["GET"]),
        Route("/_sim/info", sim_info, methods=["GET"]),
    ]


def _sglang_routes() -> list[Route]:
    post, get = ["POST"], ["GET"]
    return [
        Route("/generate", native.generate, methods=post),
        Route("/v1/completions", openai_api.completions, methods=post),
        Route("/v1/chat/completions", openai_api.chat_completions, methods=post),
        *(Route(p, tokenize, methods=post) for p in ("/tokenize", "/v1/tokenize")),
        *(Route(p, detokenize, methods=post) for p in ("/detokenize", "/v1/detokenize")),
        *(Route(p, server_info, methods=get) for p in ("/server_info", "/get_server_info")),
        *(Route(p, model_info, methods=get) for p in ("/model_info", "/get_model_info")),
        Route("/health", health, methods=get),
        Route("/health_generate", health_generate, methods=get),
        Route("/flush_cache", flush_cache, methods=["POST", "GET"]),
        Route("/metrics", metrics, methods=get),
        Route("/v1/models", models, methods=get),
        *_sim_routes(),
    ]


async def _bad_request(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, BadRequest)
    return error_response(exc.status, exc.message)


async def _not_found(request: Request, exc: Exception) -> Response:
    return error_response(404, f"Not found: {request.url.path}")


async def _not_allowed(request: Request, exc: Exception) -> Response:
    return error_response(405, f"Method {request.method} not allowed on {request.url.path}")


async def tokenize(http: Request) -> Response:
    """``POST /tokenize``: prompt -> tokens, count, max_model_len."""
    state = get_state(http)
    if not state.profile.switches.tokenize:
        return await _not_found(http, Exception())
    body = await json_body(http)
    prompt = body.get("prompt")
    if not isinstance(prompt, str):
        raise BadRequest("prompt must be a string")
    tokens = state.tokenizer.encode(prompt, bool(body.get("add_special_tokens", True)))
    max_len = state.profile.context_length
    return JSONResponse({"tokens": tokens, "count": len(tokens), "max_model_len": max_len})


async def detokenize(http: Request) -> Response:
    """``POST /detokenize``: tokens -> text (unknown ids are a 400)."""
    state = get_state(http)
    if not state.profile.switches.tokenize:
        return await _not_found(http, Exception())
    body = await json_body(http)
    tokens = body.get("tokens")
    if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
        raise BadRequest("tokens must be a list of integers")
    skip = body.get("skip_special_tokens", True) is not False  # SGLang's field, default true
    try:
        text = state.tokenizer.decode(tokens, skip_special=skip)
    except UnknownTokenError as exc:
        raise BadRequest(str(exc)) from exc
    # vLLM answers {"prompt": ...} (vllm/entrypoints/serve/tokenize/protocol.py
    # DetokenizeResponse); SGLang {"text": ...} (entrypoints/openai/protocol.py).
    return JSONResponse({"prompt" if state.profile.kind == "vllm" else "text": text})


async def server_info(http: Request) -> Response:
    """``GET /server_info``: flattened server args, version, internal_states, sim fields."""
    state = get_state(http)
    profile = state.profile
    info: dict[str, Any] = {
        "model_path": profile.model.get("model_path"),
        "served_model_name": profile.served_model_name,
        **profile.server,
        # A server arg: null unless --context-length was passed (SGLang's default).
        "context_length": profile.server.get("context_length")
        if profile.flags.context_length_passed else None,
        "enable_metrics": profile.switches.metrics,
        "enable_cache_report": profile.flags.enable_cache_report,
        # Before 0.5.15 the parsers are only visible here, as server args.
        "reasoning_parser": profile.model.get("reasoning_parser"),
        "tool_call_parser": profile.model.get("tool_call_parser"),
        "version": profile.version,
        "internal_states": [{"avg_spec_accept_length": state.scheduler.lifetime_accept_length,
                             "last_gen_throughput": 0.0}],
    }
    if state.faults.state.draft_model:  # a drafter "deployed" by /_sim/faults (faults.py)
        info["speculative_draft_model_path"] = state.faults.state.draft_model
    return JSONResponse(info)


async def model_info(http: Request) -> Response:
    """``GET /model_info``."""
    profile = get_state(http).profile
    model = profile.model
    keys: tuple[str, ...] = ("model_path", "served_model_name", "tokenizer_path",
                             "reasoning_parser", "tool_call_parser")
    if not profile.facts.model_info_parsers:  # 0.5.14's model_info: http_server.py
        keys = ("model_path", "tokenizer_path")
    info = {key: model.get(key) for key in keys}
    info["is_generation"] = True
    return JSONResponse(info)


async def models(http: Request) -> Response:
    """``GET /v1/models`` (OpenAI list with the served model)."""
    name = get_state(http).profile.served_model_name
    owner = get_state(http).profile.kind
    return JSONResponse({"object": "list", "data": [{"id": name, "object": "model",
                                                      "owned_by": owner}]})


async def health(http: Request) -> Response:
    return Response(status_code=200)


async def health_generate(http: Request) -> Response:
    """``GET /health_generate``: one 1-token generation through the scheduler."""
    state = get_state(http)
    arrived = await arrive(state)
    if error_fault(state) is not None:
        return Response(status_code=503)
    spec = GenerationSpec(prompt_ids=[BOS_ID], max_new_tokens=1, ignore_eos=True)
    request = state.scheduler.submit(spec, arrived=arrived)
    if not await wait_finished(state, http, request):
        return Response(status_code=503)
    return Response(status_code=200)


async def flush_cache(http: Request) -> Response:
    """``POST /flush_cache``: 200 when flushed, 400 while requests run."""
    if get_state(http).scheduler.flush_cache():
        return PlainTextResponse("Cache flushed.\nPlease check backend logs for more details. ")
    return PlainTextResponse("Cache not flushed: there are running or queued requests.",
                             status_code=400)


async def metrics(http: Request) -> Response:
    """``GET /metrics`` (404 when the profile runs without --enable-metrics)."""
    state = get_state(http)
    if not state.profile.switches.metrics:
        return await _not_found(http, Exception())
    return Response(state.metrics.render(), media_type=CONTENT_TYPE)


async def faults_get(http: Request) -> Response:
    return JSONResponse(get_state(http).faults.as_dict())


async def faults_post(http: Request) -> Response:
    state = get_state(http)
    body = await json_body(http)
    try:
        new = state.faults.update(body)
    except FaultError as exc:
        raise BadRequest(str(exc)) from exc
    state.scheduler.set_background(new.background_requests)
    return JSONResponse(state.faults.as_dict())


async def sim_reset(http: Request) -> Response:
    state = get_state(http)
    state.faults.reset()
    state.scheduler.set_background(0)
    return JSONResponse(state.faults.as_dict())


async def sim_info(http: Request) -> Response:
    """Simulator identity for a probe that finds no SGLang /server_info (vLLM profiles)."""
    state = get_state(http)
    return JSONResponse({"sim_time_scale": state.time_scale, "sim_profile": state.profile.name,
                         **state.profile.facts.describe()})


async def sim_truth(http: Request) -> Response:
    state = get_state(http)
    return JSONResponse({"profile": state.profile.as_dict(), "time_scale": state.time_scale,
                         "seed": state.seed, "requests": state.scheduler.truth()})
