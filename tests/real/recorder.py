"""A recording reverse proxy on loopback: what the suite asked the real server, and what the
server answered, in order. The tier compares the suite's own figures with the server's
(each ``/completion`` answer's ``timings``, and the ``/metrics`` scrapes the suite's guard
took around it) without trusting any of the suite's code to extract them.

A standard-library threading HTTP server (one connection per request) in a daemon thread::

    with Recorder(server.url) as rec:
        ... point the suite at rec.url ...
    rec.exchanges  # [Exchange(method, path, body, status, text), ...]
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

import httpx


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
        self.exchanges: list[Exchange] = []
        self._client = httpx.Client(base_url=target, timeout=600)
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        recorder = self

        class Relay(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._relay(b"")

            def do_POST(self) -> None:
                self._relay(self.rfile.read(int(self.headers.get("content-length") or 0)))

            def _relay(self, body: bytes) -> None:
                reply = recorder._client.request(
                    self.command, self.path, content=body or None,
                    headers={"content-type": self.headers.get("content-type")
                             or "application/json"})
                with recorder._lock:
                    recorder.exchanges.append(Exchange(self.command, self.path, body,
                                                       reply.status_code, reply.text))
                self.send_response(reply.status_code)
                self.send_header("content-type", reply.headers.get("content-type", "text/plain"))
                self.send_header("content-length", str(len(reply.content)))
                self.end_headers()
                self.wfile.write(reply.content)

            def log_message(self, *args: object) -> None:
                pass  # the exchanges are the log

        return Relay

    def __enter__(self) -> Recorder:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)
        self._client.close()
