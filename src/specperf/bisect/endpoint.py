"""The endpoint a bisect works on, identified before anything waits on it.

A deploy waits up to ``--deploy-timeout`` for ``/health``; pointed at a URL that is no LLM
server (a file server, another JSON API) that wait could only end at its deadline, and the
restore after it would wait as long again. So the endpoint is identified before the GPU lock
and the first deploy, with the probe's own check (the sentence the gate and ``specperf
explain`` print), and every poll of a deploy's wait is classified the same way: an answer no
LLM server gives ends the bisect at once (``NotAnLlmServer``, exit 2, nothing restored); no
answer, or a proxy's 5xx page while the server behind it restarts, is waited on.
"""

from __future__ import annotations

from collections.abc import Callable

from ..core.errors import BadStatus, EndpointError, MalformedResponse, NotAnLlmServer
from ..servers.client import Client
from ..servers.probe import check_reachable

FLAG = "--endpoint"
# An LLM server lists its models or its server info as JSON (the probe's own list).
_LLM_ROUTES = ("/v1/models", "/server_info", "/get_server_info", "/props")
_TIMEOUT_S = 10.0


def passing(exc: NotAnLlmServer) -> bool:
    """Whether the answer may pass: a proxy's 5xx error page while the server behind it is
    down (a deploy restarts it), not an answer of something that is no LLM server."""
    cause = exc.__cause__
    return isinstance(cause, BadStatus) and cause.status >= 500


def check_health(client: Client) -> None:
    """Return when ``/health`` answers 200 as an LLM server's does; NotAnLlmServer when the
    URL answers as no LLM server does; another EndpointError while it does not answer yet."""
    try:
        client.get_text("/health", timeout_s=_TIMEOUT_S)
    except BadStatus as exc:
        if exc.status < 500:  # the probe tells no LLM server from a server without /health
            check_reachable(client, FLAG)
        raise
    check_reachable(client, FLAG)  # a web page answering 200 is no server's health
    _check_routes(client)


def _check_routes(client: Client) -> None:
    for path in _LLM_ROUTES:
        try:
            if isinstance(client.get_json(path, timeout_s=_TIMEOUT_S), dict):
                return
        except (BadStatus, MalformedResponse):
            continue
    raise NotAnLlmServer(
        f"specperf: {client.base_url} (from {FLAG}) is not an LLM server: GET /health "
        "answered 200, but none of /v1/models, /server_info and /props answers with JSON. "
        f"Point {FLAG} at the SGLang, vLLM or llama.cpp server itself.", url=client.base_url)


def why(exc: Exception) -> str:
    """A failed health check in a few words (an error page's status, not its HTML)."""
    cause = exc.__cause__ if isinstance(exc, NotAnLlmServer) else exc
    if isinstance(cause, BadStatus):
        return f"GET /health answered HTTP {cause.status}"
    return str(exc).splitlines()[0]


def identify(url: str, say: Callable[[str], None]) -> bool:
    """Before the first deploy: True when an LLM server answers now, False when nothing does
    (the first deploy may start it); NotAnLlmServer when the URL answers as no LLM server."""
    client = Client(url, retries=0, timeout_s=_TIMEOUT_S)
    try:
        check_health(client)
        return True
    except NotAnLlmServer as exc:
        if not passing(exc):
            raise
        said = why(exc)
    except EndpointError as exc:
        said = why(exc)
    finally:
        client.close()
    say(f"{client.base_url} does not serve yet ({said}): the first deploy should start it")
    return False
