"""HTTP to the server under test: the only module that touches httpx.

httpx exceptions are translated here, once (:meth:`Client._translated`), into the
:mod:`specperf.core.errors` tree, for plain and streaming requests alike. The timed section of a
request covers sending the body and reading the whole response; JSON decoding happens after
the clock stops. A stream (:meth:`Client.stream_json`) stamps each SSE ``data:`` event with
its receive time and keeps the raw text; the events are decoded after the clock stops too,
so the per-event cost inside the timed loop is one line split, one clock read, one append.
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

from ..core.errors import (
    BadStatus,
    EndpointError,
    EndpointTimeout,
    EndpointUnreachable,
    MalformedResponse,
)

T = TypeVar("T")

_BODY_EXCERPT = 300
_MAX_RETRY_AFTER_S = 30.0
# Hints for the HTTP errors that are never retried: the request itself is wrong.
_STATUS_HINTS = {
    400: "the server rejected the request; check --specperf-api, --specperf-model and "
         "--specperf-output-tokens against what it accepts",
    401: "check the API key (--specperf-api-key-env names the variable that holds it)",
    403: "check the API key (--specperf-api-key-env names the variable that holds it)",
    404: "the route does not exist there; check --endpoint and --specperf-api",
    429: "the server is rate-limiting; measure on an endpoint reserved for the run",
}


@dataclass(frozen=True)
class Reply:
    """A decoded JSON answer, how long it took on the wire, and how many retries it needed."""

    data: Any
    elapsed_s: float
    retries: int = 0


@dataclass(frozen=True)
class StreamEvent:
    """One SSE ``data:`` event, decoded, and when it arrived (seconds after the send began)."""

    data: Any
    at_s: float


@dataclass(frozen=True)
class StreamReply:
    """Every event of one stream up to ``data: [DONE]``, and the stream's total wall time."""

    events: tuple[StreamEvent, ...]
    elapsed_s: float
    retries: int = 0


class TimeoutPolicy:
    """How long one generation may take: scaled to what the same request took before.

    Before a request of a kind (case and length) has completed, the user's
    ``--specperf-request-timeout`` applies; afterwards ``factor`` times the slowest completed one,
    never below ``floor_s`` (noise and a busy box) and never above the user's cap. A hung
    server then errors within about ``factor`` request times, not after ten minutes.
    """

    def __init__(self, cap_s: float, *, floor_s: float = 30.0, factor: float = 5.0) -> None:
        self.cap_s = cap_s
        self.floor_s = floor_s
        self.factor = factor
        self._slowest: dict[str, float] = {}

    def seconds(self, key: str) -> tuple[float, str]:
        """The timeout for a request of ``key`` and the reason, for the error message."""
        slowest = self._slowest.get(key)
        cap = f"--specperf-request-timeout {self.cap_s:g} s"
        if slowest is None:
            return self.cap_s, cap
        scaled = max(self.floor_s, self.factor * slowest)
        if scaled >= self.cap_s:
            return self.cap_s, cap
        return scaled, (f"{self.factor:g}× the slowest earlier request of this kind, "
                        f"{slowest:.3g} s, at least {self.floor_s:g} s; {cap} is the cap")

    def observe(self, key: str, elapsed_s: float) -> None:
        self._slowest[key] = max(self._slowest.get(key, 0.0), elapsed_s)


class Client:
    """A blocking HTTP client bound to one endpoint (requests run one at a time).

    The API key lives only in the HTTP client's headers: never in an attribute, the repr,
    or an error message (server text quoted in errors is scrubbed of it).
    """

    def __init__(self, base_url: str, *, api_key: str | None = None,
                 timeout_s: float = 600.0, retries: int = 2, backoff_s: float = 0.5) -> None:
        self.base_url = base_url.rstrip("/")
        self.retries = retries
        self.backoff_s = backoff_s
        self._retry_after: float | None = None  # of the last error status answered
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

    __str__ = __repr__

    def close(self) -> None:
        self._http.close()

    def get_json(self, path: str, *, timeout_s: float | None = None) -> Any:
        return self.request("GET", path, timeout_s=timeout_s).data

    def get_headers(self, path: str, *, timeout_s: float | None = None) -> dict[str, str]:
        """The response headers of one GET (lower-case names), retried like JSON requests."""
        response = self._retrying(lambda: self._send("GET", path, None, timeout_s, ""))[0]
        return {k.lower(): v for k, v in response.headers.items()}

    def get_text(self, path: str, *, timeout_s: float | None = None) -> str:
        """GET a text body (e.g. /metrics), retried on transient faults like JSON requests."""
        text: str = self._retrying(lambda: self._send("GET", path, None, timeout_s, "").text)[0]
        return text

    def post_status(self, path: str, *, timeout_s: float | None = None) -> int:
        """POST without a body; the answer's status. For control routes whose refusal is an
        answer, not an error (SGLang's /flush_cache says 400 while requests run)."""
        try:
            response = self._retrying(lambda: self._send("POST", path, None, timeout_s, ""))[0]
        except BadStatus as exc:
            return exc.status
        return response.status_code

    def post_json(self, path: str, body: Any, *, timeout_s: float | None = None,
                  timeout_basis: str = "") -> Reply:
        return self.request("POST", path, body, timeout_s=timeout_s,
                            timeout_basis=timeout_basis)

    def request(self, method: str, path: str, body: Any = None, *,
                timeout_s: float | None = None, timeout_basis: str = "") -> Reply:
        """One JSON request, retried on transient faults (5xx, dropped connection, bad JSON).

        ``body`` may be a callable, called afresh for every attempt: a retried measurement
        must not resend the same prompt, whose nonce the server may have cached by then.
        """
        def once() -> tuple[Any, float]:
            payload = body() if callable(body) else body
            start = time.perf_counter()
            response = self._send(method, path, payload, timeout_s, timeout_basis)
            elapsed = time.perf_counter() - start
            return self._decode(response, path), elapsed

        (data, elapsed), retries = self._retrying(once)
        return Reply(data, elapsed, retries)

    def stream_json(self, path: str, body: Any, *, timeout_s: float | None = None,
                    timeout_basis: str = "") -> StreamReply:
        """POST a streaming request; every ``data:`` event with its receive time.

        Retried on transient faults like :meth:`request` (``body`` may be a callable, called
        afresh per attempt). ``data: [DONE]`` ends the stream; a stream that ends without it,
        or an event that is not JSON, is a :class:`MalformedResponse`.
        """
        def once() -> tuple[tuple[StreamEvent, ...], float]:
            payload = body() if callable(body) else body
            raw, elapsed = self._stream_once(path, payload, timeout_s, timeout_basis)
            return self._decode_events(raw, path), elapsed

        (events, elapsed), retries = self._retrying(once)
        return StreamReply(events, elapsed, retries)

    def _stream_once(self, path: str, body: Any, timeout_s: float | None,
                     timeout_basis: str) -> tuple[list[tuple[str, float]], float]:
        """The raw ``data:`` payloads and their receive times; [DONE] ends the timed loop."""
        url = self.base_url + path
        raw: list[tuple[str, float]] = []
        clock = time.perf_counter
        done = False
        with self._translated("POST", url, timeout_s, timeout_basis):
            start = clock()
            with self._http.stream("POST", path, **self._body_kwargs(body, timeout_s)) as resp:
                if resp.status_code >= 400:
                    resp.read()
                    raise self._bad_status("POST", url, resp)
                for line in resp.iter_lines():
                    if line.startswith("data:"):
                        if line.endswith("[DONE]") and line[5:].strip() == "[DONE]":
                            done = True
                            break
                        raw.append((line, clock() - start))
                elapsed = clock() - start
        if not done:
            raise MalformedResponse(
                f"POST {url}: the stream ended after {len(raw)} events without `data: "
                "[DONE]`: the server or something between it and specperf cut it short; "
                "check the server log.", url=url, transient=True)
        return raw, elapsed

    def _decode_events(self, raw: list[tuple[str, float]], path: str
                       ) -> tuple[StreamEvent, ...]:
        events = []
        for index, (line, at_s) in enumerate(raw):
            try:
                events.append(StreamEvent(json.loads(line[5:]), at_s))
            except (ValueError, RecursionError) as exc:
                excerpt = self._scrub(line[:_BODY_EXCERPT])
                raise MalformedResponse(
                    f"{self.base_url}{path} streamed an event that is not JSON (event "
                    f"{index + 1} of {len(raw)}): {excerpt!r}", url=self.base_url + path,
                    transient=True) from exc
        return tuple(events)

    def _retrying(self, once: Callable[[], T]) -> tuple[T, int]:
        """Run ``once``, retrying transient EndpointErrors at most ``retries`` times."""
        attempt = 0
        while True:
            try:
                return once(), attempt
            except EndpointError as exc:
                if not exc.transient or attempt >= self.retries:
                    if attempt:
                        exc.args = (f"{exc.args[0]} (after {attempt} retries)",)
                    raise
                wait = self._backoff(attempt, exc)
            attempt += 1
            time.sleep(wait)

    def _backoff(self, attempt: int, exc: EndpointError) -> float:
        """Exponential backoff; a server's Retry-After (bounded) when it gives one."""
        wait = self.backoff_s * 2.0 ** attempt
        if isinstance(exc, BadStatus) and self._retry_after is not None:
            wait = max(wait, min(self._retry_after, _MAX_RETRY_AFTER_S))
        return wait

    def _send(self, method: str, path: str, body: Any, timeout_s: float | None,
              timeout_basis: str) -> httpx.Response:
        url = self.base_url + path
        with self._translated(method, url, timeout_s, timeout_basis):
            response = self._http.request(method, path, **self._body_kwargs(body, timeout_s))
        if response.status_code >= 400:
            raise self._bad_status(method, url, response)
        return response

    @staticmethod
    def _body_kwargs(body: Any, timeout_s: float | None) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        if body is not None:
            kwargs["content"] = json.dumps(body)
            kwargs["headers"] = {"Content-Type": "application/json"}
        if timeout_s is not None:
            kwargs["timeout"] = httpx.Timeout(timeout_s, connect=10.0)
        return kwargs

    @contextlib.contextmanager
    def _translated(self, method: str, url: str, timeout_s: float | None,
                    timeout_basis: str) -> Iterator[None]:
        """The one place httpx exceptions become specperf errors (plain and streaming)."""
        try:
            yield
        except httpx.ConnectError as exc:
            raise self._unreachable(url, exc) from exc
        except httpx.TimeoutException as exc:
            basis = f" ({timeout_basis})" if timeout_basis else ""
            raise EndpointTimeout(
                f"{method} {url} gave no complete answer within "
                f"{self._timeout_text(timeout_s)}{basis}: the server is hung or overloaded; "
                "raise --specperf-request-timeout if requests are legitimately this slow.",
                url=url) from exc
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
            raise EndpointError(
                f"{method} {url}: the connection dropped mid-response ({exc}); the server "
                "or something between it and specperf closed it: check the server log for "
                "a crash or restart.", url=url, transient=True) from exc
        except httpx.HTTPError as exc:
            raise EndpointError(f"{method} {url} failed: {self._scrub(str(exc))}",
                                url=url) from exc

    def _unreachable(self, url: str, exc: httpx.ConnectError) -> EndpointUnreachable:
        if _caused_by(exc, socket.gaierror):
            host = httpx.URL(url).host
            return EndpointUnreachable(
                f"cannot resolve the host name {host!r} of {url} ({exc}): check the spelling "
                "of --endpoint and this machine's DNS.", url=url)
        return EndpointUnreachable(
            f"cannot connect to {url}: {exc}. Is the server running and is --endpoint "
            "right?", url=url)

    def _bad_status(self, method: str, url: str, response: httpx.Response) -> BadStatus:
        status = response.status_code
        text = self._scrub(response.text[:_BODY_EXCERPT])
        if status >= 500:
            hint = "a server-side failure; retried, check the server log"
        else:
            hint = _STATUS_HINTS.get(status, "the request was refused; not retried")
        self._retry_after = _retry_after(response)
        return BadStatus(f"{method} {url} answered HTTP {status}: {text} ({hint})",
                         url=url, status=status, body=text)

    def _scrub(self, text: str) -> str:
        """Remove the API key from server text quoted in an error (a server may echo it)."""
        auth = str(self._http.headers.get("Authorization", ""))
        key = auth.removeprefix("Bearer ")
        return text.replace(key, "<api key>") if key else text

    def _timeout_text(self, timeout_s: float | None) -> str:
        if timeout_s is None:
            timeout_s = self._http.timeout.read
        return f"{timeout_s:g} s"

    def _decode(self, response: httpx.Response, path: str) -> Any:
        try:
            return json.loads(response.content)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            excerpt = self._scrub(response.text[:_BODY_EXCERPT])
            raise MalformedResponse(
                f"{self.base_url}{path} answered HTTP {response.status_code} with a body that "
                f"is not JSON: {excerpt!r}", url=self.base_url + path, transient=True) from exc


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After", "")
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if 0 <= seconds < float("inf") else None


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, kind):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
