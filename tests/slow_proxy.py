"""A loopback TCP proxy that delays what the server sends: a slow transport on demand.

It emulates the incident's first false lead, SSE read through an SSH tunnel: what the server
sends is relayed piece by piece, each piece held ``delay_ms`` after the previous one went
out, so a stream of many small chunks arrives late and slowly while the server decodes at its
normal speed. A piece is one read from the server, cut after every SSE event end (a blank
line) when ``per_event`` (the default): then a stream of E events takes at least
E x delay_ms however the reads happen to group them, the per-chunk cost the tunnel added.
Requests from the client pass untouched. The proxy runs its own event loop in a daemon
thread::

    with SlowProxy(sim.url, delay_ms=30) as proxy:
        httpx.post(proxy.url + "/generate", ...)
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from types import TracebackType
from urllib.parse import urlsplit

_READ_SIZE = 65536
_EVENT_END = b"\n\n"


class SlowProxy:
    """Listens on 127.0.0.1 (port 0) and relays to ``target_url``, delaying server reads."""

    def __init__(self, target_url: str, delay_ms: float, per_event: bool = True) -> None:
        parts = urlsplit(target_url)
        if parts.hostname is None or parts.port is None:
            raise ValueError(f"target_url needs a host and a port, got {target_url!r}")
        self.target = (parts.hostname, parts.port)
        self.delay_s = delay_ms / 1000.0
        self.per_event = per_event
        self.url = ""
        self.relayed_pieces = 0  # server pieces relayed to clients (each one delayed)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    def __enter__(self) -> SlowProxy:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        """Start the loop thread and wait until the proxy listens."""
        self._thread = threading.Thread(target=self._run, name="slow-proxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout=10) or not self.url:
            raise RuntimeError("SlowProxy did not start listening within 10 s")

    def stop(self) -> None:
        """Close the listener and every relay, then join the thread."""
        loop = self._loop
        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            self._server = loop.run_until_complete(
                asyncio.start_server(self._handle, "127.0.0.1", 0))
            port = self._server.sockets[0].getsockname()[1]
            self.url = f"http://127.0.0.1:{port}"
            self._ready.set()
            loop.run_forever()
        finally:
            self._ready.set()
            self._shutdown(loop)

    def _shutdown(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._server is not None:
            self._server.close()
        tasks = asyncio.all_tasks(loop)
        for task in tasks:
            task.cancel()
        if tasks:
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        loop.close()

    async def _handle(self, client_r: asyncio.StreamReader,
                      client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection(*self.target)
        except OSError:
            client_w.close()
            return
        upstream = asyncio.ensure_future(self._pipe(client_r, server_w, 0.0))
        downstream = asyncio.ensure_future(self._pipe(server_r, client_w, self.delay_s))
        try:
            await asyncio.wait({upstream, downstream}, return_when=asyncio.FIRST_COMPLETED)
            await downstream  # the answer may still be on its (delayed) way
        finally:
            upstream.cancel()
            for writer in (client_w, server_w):
                writer.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    delay_s: float) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(_READ_SIZE):
                for piece in self._pieces(data) if delay_s > 0 else [data]:
                    if delay_s > 0:
                        await asyncio.sleep(delay_s)
                        self.relayed_pieces += 1
                    writer.write(piece)
                    await writer.drain()
            if writer.can_write_eof():
                writer.write_eof()

    def _pieces(self, data: bytes) -> list[bytes]:
        if not self.per_event:
            return [data]
        parts = data.split(_EVENT_END)
        pieces = [part + _EVENT_END for part in parts[:-1]]
        return pieces + [parts[-1]] if parts[-1] else pieces
