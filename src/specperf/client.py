"""HTTP to the server under test: the only module that touches httpx.

httpx exceptions are translated here, once, into the :mod:`specperf.errors`
tree. The timed section of a request covers sending the body and reading the
whole response; JSON decoding happens after the clock stops.
"""

from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass
from typing import Any

import httpx

from .errors import (
    BadStatus,
    EndpointError,
    EndpointTimeout,
    EndpointUnreachable,
    MalformedResponse,
)

_BODY_EXCERPT = 300


@dataclass(frozen=True)
class Reply:
    """A decoded JSON answer, how long it took on the wire, and how many retries it needed."""

    data: Any
    elapsed_s: float
    retries: int = 0


class Client:
    """A blocking HTTP client bound to one endpoint (requests run one at a time)."""

    def __init__(self, base_url: str, *, api_key: str | None = None,
                 timeout_s: float = 600.0, retries: int = 2, backoff_s: float = 0.5) -> None:
        self.base_url = base_url.rstrip("/")
        self.retries = retries
        self.backoff_s = backoff_s
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        # TCP_NODELAY: httpx writes headers and body separately; with Nagle on, the body
        # waits for the server's delayed ACK (~40 ms per request on Linux keep-alive
        # connections), which would land in every measured wall time.
        transport = httpx.HTTPTransport(
            socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
        # trust_env=False: a measurement must never pass silently through a proxy.
        self._http = httpx.Client(base_url=self.base_url, headers=headers, trust_env=False,
                                  transport=transport,
                                  timeout=httpx.Timeout(timeout_s, connect=10.0))

    def __repr__(self) -> str:
        return f"Client({self.base_url!r})"

    def close(self) -> None:
        self._http.close()

    def get_json(self, path: str, *, timeout_s: float | None = None) -> Any:
        return self.request("GET", path, timeout_s=timeout_s).data

    def get_text(self, path: str, *, timeout_s: float | None = None) -> str:
        """GET a text body (e.g. /metrics)."""
        response = self._send("GET", path, None, timeout_s)
        return response.text

    def post_json(self, path: str, body: Any, *, timeout_s: float | None = None) -> Reply:
        return self.request("POST", path, body, timeout_s=timeout_s)

    def request(self, method: str, path: str, body: Any = None, *,
                timeout_s: float | None = None) -> Reply:
        """One JSON request, retried on transient faults (5xx, dropped connection)."""
        attempt = 0
        while True:
            try:
                start = time.perf_counter()
                response = self._send(method, path, body, timeout_s)
                elapsed = time.perf_counter() - start
                return Reply(self._decode(response, path), elapsed, attempt)
            except EndpointError as exc:
                if not exc.transient or attempt >= self.retries:
                    if attempt:
                        exc.args = (f"{exc.args[0]} (after {attempt} retries)",)
                    raise
            attempt += 1
            time.sleep(self.backoff_s * 2 ** (attempt - 1))

    def _send(self, method: str, path: str, body: Any, timeout_s: float | None) -> httpx.Response:
        url = self.base_url + path
        kwargs: dict[str, Any] = {}
        if body is not None:
            kwargs["content"] = json.dumps(body)
            kwargs["headers"] = {"Content-Type": "application/json"}
        if timeout_s is not None:
            kwargs["timeout"] = httpx.Timeout(timeout_s, connect=10.0)
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.ConnectError as exc:
            raise EndpointUnreachable(
                f"cannot connect to {url}: {exc}. Is the server running and is --endpoint "
                "right?", url=url) from exc
        except httpx.TimeoutException as exc:
            raise EndpointTimeout(
                f"{method} {url} gave no complete answer within "
                f"{self._timeout_text(timeout_s)}: the server is hung or overloaded; raise "
                "--request-timeout if requests are legitimately this slow.", url=url) from exc
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            raise EndpointError(
                f"{method} {url}: the connection dropped mid-response ({exc}).",
                url=url, transient=True) from exc
        except httpx.HTTPError as exc:
            raise EndpointError(f"{method} {url} failed: {exc}", url=url) from exc
        if response.status_code >= 400:
            text = response.text[:_BODY_EXCERPT]
            raise BadStatus(
                f"{method} {url} answered HTTP {response.status_code}: {text}",
                url=url, status=response.status_code, body=text)
        return response

    def _timeout_text(self, timeout_s: float | None) -> str:
        if timeout_s is None:
            timeout_s = self._http.timeout.read
        return f"{timeout_s:g} s"

    def _decode(self, response: httpx.Response, path: str) -> Any:
        try:
            return json.loads(response.content)
        except (ValueError, UnicodeDecodeError) as exc:
            excerpt = response.text[:_BODY_EXCERPT]
            raise MalformedResponse(
                f"{self.base_url}{path} answered HTTP {response.status_code} with a body that "
                f"is not JSON: {excerpt!r}", url=self.base_url + path, transient=True) from exc
