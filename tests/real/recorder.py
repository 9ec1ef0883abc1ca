"""A recording reverse proxy on loopback: what the suite asked the real server, and what the
server answered, in order. The tier compares the suite's own figures with the server's
(each ``/completion`` answer's ``timings``, and the ``/metrics`` scrapes the suite's guard
took around it) without trusting any of the suite's code to extract them.

Runs uvicorn in a daemon thread::

    with Recorder(server.url) as rec:
        ... point the suite at rec.url ...
    rec.exchanges  # [(method, path, request body, status, response text), ...]
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from types import TracebackType

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .llama import free_port


@dataclass(frozen=True)
class Exchange:
    method: str
    path: str
    body: bytes
    status: int
    text: str


class Recorder:
    """Forwards every request to ``target`` and keeps the exchange."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()
        app = Starlette(routes=[Route("/{path:path}", self._relay,
                                     methods=["GET", "POST"])])
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._client = httpx.AsyncClient(base_url=target, timeout=600)

    async def _relay(self, request: Request) -> Response:
        body = await request.body()
        headers = {"content-type": request.headers.get("content-type", "application/json")}
        reply = await self._client.request(request.method, request.url.path, content=body,
                                           headers=headers)
        with self._lock:
            self.exchanges.append(Exchange(request.method, request.url.path, body,
                                           reply.status_code, reply.text))
        return Response(reply.content, status_code=reply.status_code,
                        media_type=reply.headers.get("content-type"))

    def __enter__(self) -> Recorder:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
