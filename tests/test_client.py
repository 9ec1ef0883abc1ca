"""The HTTP boundary: every server fault becomes one clear specperf error, retried only when
transient, and the API key never appears anywhere. A scripted loopback server plays each fault."""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from types import SimpleNamespace

import pytest

from specperf.core.errors import (
    BadStatus,
    EndpointError,
    EndpointTimeout,
    EndpointUnreachable,
    MalformedResponse,
    SpecperfError,
)
from specperf.servers.client import Client, TimeoutPolicy

KEY = "sk-planted-4f1c2b9e8d7a"
Action = Callable[[http.server.BaseHTTPRequestHandler], None]


def ok(handler: http.server.BaseHTTPRequestHandler) -> None:
    _reply(handler, 200, b'{"ok": true}')


def status(code: int, body: bytes = b'{"error": "no"}', **headers: str) -> Action:
    return lambda handler: _reply(handler, code, body, headers)


def garbled(handler: http.server.BaseHTTPRequestHandler) -> None:
    _reply(handler, 200, b'{"text": "cut her')


def dropped(handler: http.server.BaseHTTPRequestHandler) -> None:
    """Headers promise 200 bytes, half arrive, then the connection closes."""
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", "200")
    handler.end_headers()
    handler.wfile.write(b'{"meta_info": {"completion_tokens": 64, "pro')
    handler.wfile.flush()
    handler.close_connection = True
    handler.connection.shutdown(socket.SHUT_RDWR)


def hang(seconds: float) -> Action:
    def act(handler: http.server.BaseHTTPRequestHandler) -> None:
        time.sleep(seconds)
        try:
            ok(handler)
        except OSError:
            pass  # the client gave up first, as it should
    return act


def echo_auth(code: int) -> Action:
    """A careless server that quotes the request's Authorization header in its error body."""
    return lambda handler: _reply(
        handler, code, json.dumps({"error": f"bad token {handler.headers['Authorization']}"})
        .encode())


def _reply(handler: http.server.BaseHTTPRequestHandler, code: int, body: bytes,
           headers: dict[str, str] | None = None) -> None:
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    for name, value in (headers or {}).items():
        handler.send_header(name.replace("_", "-"), value)
    handler.end_headers()
    handler.wfile.write(body)


class Script:
    """Actions answered in order (the last one repeats); counts the requests that arrived."""

    def __init__(self) -> None:
        self.actions: list[Action] = [ok]
        self.seen = 0
        self.auth: list[str] = []

    def play(self, *actions: Action) -> None:
        self.actions = list(actions)
        self.seen = 0

    def next(self) -> Action:
        self.seen += 1
        return self.actions[min(self.seen, len(self.actions)) - 1]


@pytest.fixture
def server() -> Iterator[tuple[str, Script]]:
    script = Script()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            script.auth.append(self.headers.get("Authorization", ""))
            script.next()(self)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.do_GET()

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", script
    finally:
        httpd.shutdown()
        httpd.server_close()


_OPEN: list[Client] = []


def client(url: str) -> Client:
    """A client with the planted key and a short backoff, closed after the test."""
    made = Client(url, api_key=KEY, backoff_s=0.01)
    _OPEN.append(made)
    return made


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close()


def test_5xx_is_retried_with_backoff_and_the_retries_are_counted(server):
    url, script = server
    script.play(status(503), status(502), ok)
    reply = client(url).post_json("/generate", {})
    assert reply.data == {"ok": True}
    assert reply.retries == 2 and script.seen == 3


def test_5xx_that_persists_errors_after_the_bounded_retries(server):
    url, script = server
    script.play(status(503, b"overloaded"))
    with pytest.raises(BadStatus) as err:
        client(url).post_json("/generate", {})
    assert script.seen == 3  # one try and two retries, no more
    assert err.value.status == 503
    assert str(err.value) == (
        f"POST {url}/generate answered HTTP 503: overloaded (a server-side failure; retried, "
        "check the server log) (after 2 retries)")


def test_retry_after_is_honoured_but_bounded(server, monkeypatch):
    url, script = server
    waits: list[float] = []  # the waits the client chose, not how long this machine took
    monkeypatch.setattr("specperf.servers.client.time",
                        SimpleNamespace(sleep=waits.append, perf_counter=time.perf_counter))
    script.play(status(503, Retry_After="0.3"), ok)
    assert client(url).post_json("/generate", {}).retries == 1
    assert waits == [pytest.approx(0.3)]  # backoff_s alone would wait 0.01 s
    waits.clear()
    script.play(status(503, Retry_After="86400"), ok)
    assert client(url).post_json("/generate", {}).retries == 1
    assert len(waits) == 1 and 0.3 < waits[0] < 86400  # bounded


@pytest.mark.parametrize(("code", "hint"), [
    (400, "the server rejected the request; check --specperf-api, --specperf-model and "
          "--specperf-output-tokens against what it accepts"),
    (401, "check the API key (--specperf-api-key-env names the variable that holds it)"),
    (404, "the route does not exist there; check --endpoint and --specperf-api"),
    (418, "the request was refused; not retried"),
])
def test_4xx_is_never_retried_and_says_what_to_check(server, code, hint):
    url, script = server
    script.play(status(code, b"nope"))
    with pytest.raises(BadStatus) as err:
        client(url).post_json("/generate", {})
    assert script.seen == 1
    assert str(err.value) == f"POST {url}/generate answered HTTP {code}: nope ({hint})"
    assert not err.value.transient


def test_a_connection_dropped_mid_response_is_retried(server):
    url, script = server
    script.play(dropped, ok)
    assert client(url).post_json("/generate", {}).retries == 1


def test_a_connection_that_keeps_dropping_errors_in_one_sentence(server):
    url, script = server
    script.play(dropped)
    with pytest.raises(EndpointError) as err:
        client(url).post_json("/generate", {})
    assert script.seen == 3
    message = str(err.value)
    assert message.startswith(f"POST {url}/generate: the connection dropped mid-response (")
    assert message.endswith("check the server log for a crash or restart. (after 2 retries)")


def test_malformed_json_is_retried_then_quoted(server):
    url, script = server
    script.play(garbled)
    with pytest.raises(MalformedResponse) as err:
        client(url).post_json("/generate", {})
    assert script.seen == 3
    assert str(err.value) == (f"{url}/generate answered HTTP 200 with a body that is not JSON: "
                              "'{\"text\": \"cut her' (after 2 retries)")


def test_metrics_scrapes_are_retried_too(server):
    url, script = server
    script.play(status(503), ok)
    assert client(url).get_text("/metrics") == '{"ok": true}'
    assert script.seen == 2


def test_timeout_is_not_retried_and_says_where_the_limit_came_from(server):
    url, script = server
    script.play(hang(1.5))
    with pytest.raises(EndpointTimeout) as err:
        client(url).post_json("/generate", {}, timeout_s=0.3, timeout_basis="the basis")
    assert script.seen == 1
    assert str(err.value) == (f"POST {url}/generate gave no complete answer within 0.3 s "
                              "(the basis): the server is hung or overloaded; raise "
                              "--specperf-request-timeout if requests are legitimately this slow.")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_connection_refused_is_unreachable_and_not_retried():
    url = f"http://127.0.0.1:{_free_port()}"
    with pytest.raises(EndpointUnreachable) as err:
        client(url).post_json("/generate", {})
    assert str(err.value).startswith(f"cannot connect to {url}/generate: ")
    assert str(err.value).endswith("Is the server running and is --endpoint right?")


def test_dns_failure_names_the_host():
    url = "http://specperf-no-such-host.invalid:1"
    with pytest.raises(EndpointUnreachable) as err:
        client(url).get_json("/health")
    assert str(err.value).startswith(
        f"cannot resolve the host name 'specperf-no-such-host.invalid' of {url}/health (")
    assert str(err.value).endswith("check the spelling of --endpoint and this machine's DNS.")


def test_timeout_policy_scales_with_the_slowest_earlier_request():
    policy = TimeoutPolicy(600.0, floor_s=30.0, factor=5.0)
    assert policy.seconds("a/600") == (600.0, "--specperf-request-timeout 600 s")
    policy.observe("a/600", 20.0)
    policy.observe("a/600", 12.0)
    seconds, basis = policy.seconds("a/600")
    assert seconds == 100.0
    assert basis == ("5× the slowest earlier request of this kind, 20 s, at least 30 s; "
                     "--specperf-request-timeout 600 s is the cap")
    policy.observe("b/600", 1.0)
    assert policy.seconds("b/600")[0] == 30.0  # the floor
    policy.observe("c/600", 500.0)
    assert policy.seconds("c/600") == (600.0, "--specperf-request-timeout 600 s")  # the cap
    assert policy.seconds("other")[0] == 600.0


# -- the API key ----------------------------------------------------------------------------------
def test_the_key_is_sent_but_never_shown(server):
    url, script = server
    c = client(url)
    c.get_json("/health")
    assert script.auth == [f"Bearer {KEY}"]
    assert KEY not in repr(c) and KEY not in str(c)
    assert KEY not in repr(vars(c))  # only inside the HTTP client's headers


def _errors_from_every_fault(url: str, script: Script) -> list[SpecperfError]:
    plays: list[tuple[Action, ...]] = [
        (status(503),), (status(400),), (echo_auth(401),), (echo_auth(500),), (dropped,),
        (garbled,), (hang(1.0),)]
    found: list[SpecperfError] = []
    for play in plays:
        script.play(*play)
        try:
            client(url).post_json("/generate", {"x": 1}, timeout_s=0.3)
        except SpecperfError as exc:
            found.append(exc)
    for bad in (f"http://127.0.0.1:{_free_port()}", "http://specperf-no-such-host.invalid:1"):
        try:
            client(bad).get_json("/health")
        except SpecperfError as exc:
            found.append(exc)
    return found


def test_no_error_message_carries_the_key_even_when_the_server_echoes_it(server):
    url, script = server
    errors = _errors_from_every_fault(url, script)
    assert len(errors) == 9  # every fault raised one of ours
    echoed = [e for e in errors if isinstance(e, BadStatus) and "<api key>" in str(e)]
    assert len(echoed) == 2  # the echoing server's key was scrubbed, not just absent
    for exc in errors:
        texts = [str(exc), repr(exc), *(str(a) for a in exc.args)]
        texts += [str(v) for v in vars(exc).values()]
        assert not any(KEY in t for t in texts), (type(exc).__name__, texts)


def test_a_callable_body_is_rebuilt_for_every_attempt(server):
    url, script = server
    script.play(dropped, ok)
    built: list[int] = []

    def body() -> dict[str, int]:  # e.g. a prompt with a fresh nonce
        built.append(len(built))
        return {"attempt": built[-1]}

    assert client(url).post_json("/generate", body).retries == 1
    assert built == [0, 1]
