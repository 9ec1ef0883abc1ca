"""HTTP plumbing shared by the routes: JSON bodies, SGLang-like errors, faulty responses."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class BadRequest(Exception):
    """Client error; rendered as an SGLang-like 400 error body."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def error_response(status: int, message: str) -> JSONResponse:
    """SGLang/OpenAI-style error JSON."""
    kind = "BadRequestError" if status < 500 else "InternalServerError"
    if status == 404:
        kind = "NotFoundError"
    # Both spellings SGLang uses: OpenAI routes put the fields at the top level, the native
    # routes nest them under "error"; clients of either find what they expect.
    error = {"message": message, "type": kind, "code": status}
    body = {"object": "error", **error, "error": error}
    return JSONResponse(body, status_code=status)


async def json_body(request: Request) -> dict[str, Any]:
    """The request body as a JSON object, or BadRequest."""
    raw = await request.body()
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadRequest(f"Malformed JSON body: {exc}") from exc
    if not isinstance(body, dict):
        raise BadRequest("The JSON body must be an object")
    return body


def dumps(data: object) -> bytes:
    """Compact JSON bytes, as SGLang's orjson responses are."""
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def sse(data: object) -> bytes:
    """One server-sent event carrying JSON."""
    return b"data: " + dumps(data) + b"\n\n"


SSE_DONE = b"data: [DONE]\n\n"


def malformed_response(body: bytes) -> Response:
    """Fault: a 200 whose JSON body is cut short (invalid JSON)."""
    cut = body[: max(1, len(body) // 2)].rstrip(b"}")
    return Response(cut, status_code=200, media_type="application/json")


class DroppedResponse(Response):
    """Fault: sends the status, the headers and the first parts, then abandons the connection.

    Returning from the ASGI call without the final body message makes uvicorn close the
    socket, which a client sees as a connection dropped mid-response.
    """

    def __init__(self, parts: AsyncIterator[bytes], limit: int, media_type: str,
                 content_length: int | None = None) -> None:
        super().__init__(media_type=media_type)
        self._parts = parts
        self._limit = limit
        # Starlette declares "content-length: 0" for an empty body; a stream must be chunked.
        del self.headers["content-length"]
        if content_length is not None:
            self.headers["content-length"] = str(content_length)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": self.raw_headers})
        sent = 0
        try:
            async for part in self._parts:
                await send({"type": "http.response.body", "body": part, "more_body": True})
                sent += 1
                if sent >= self._limit:
                    break
        finally:
            aclose = getattr(self._parts, "aclose", None)
            if aclose is not None:
                await aclose()


async def one_part(body: bytes) -> AsyncIterator[bytes]:
    """An iterator over a single body part (for dropping a non-streaming response)."""
    yield body
