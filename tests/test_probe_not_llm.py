"""An endpoint that is not an LLM server gets one sentence from the probe, before any case.

Real HTTP servers on loopback: a plain file server (``http.server``), a proxy that answers
every request with an HTML 502 error page, and a JSON API that is no LLM server.
"""

from __future__ import annotations

import http.server
import json
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from functools import partial
from pathlib import Path

import pytest

from loopback import serving
from specperf.core.errors import NotAnLlmServer
from specperf.servers.client import Client
from specperf.servers.probe import check_reachable

PROXY_PAGE = (b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center>"
              b"<h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n"
              b"</html>\r\n")


class ProxyError(http.server.BaseHTTPRequestHandler):
    def _page(self) -> None:
        self.send_response(502)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(PROXY_PAGE)))
        self.end_headers()
        self.wfile.write(PROXY_PAGE)

    do_GET = do_POST = _page

    def log_message(self, *args: object) -> None:
        return None


class JsonApi(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b'{"detail": "Not Found"}'
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return None


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[[type], str]]:
    (tmp_path / "index.html").write_text("<!DOCTYPE html><html><head><title>My files"
                                         "</title></head><body>hi</body></html>")
    with ExitStack() as stack:
        def start(handler: type) -> str:
            chosen = partial(Quiet, directory=str(tmp_path)) if handler is Quiet else handler
            return stack.enter_context(serving(chosen))

        yield start


def _sentence(url: str) -> str:
    with pytest.raises(NotAnLlmServer) as err:
        check_reachable(Client(url, retries=0), "--endpoint")
    return str(err.value)


def test_a_plain_web_server_is_not_an_llm_server(serve) -> None:
    url = serve(Quiet)
    assert _sentence(url) == (
        f"specperf: {url} (from --endpoint) is not an LLM server: GET /health answered HTTP "
        "404 with an HTML page titled 'Error response', a web server's or proxy's error "
        "page. Point --endpoint at the SGLang, vLLM or llama.cpp server "
        "itself.")


def test_a_proxy_error_page_is_not_an_llm_server(serve) -> None:
    url = serve(ProxyError)
    assert _sentence(url) == (
        f"specperf: {url} (from --endpoint) is not an LLM server: GET /health answered HTTP "
        "502 with an HTML page titled '502 Bad Gateway', a web server's or proxy's error page. "
        "Point --endpoint at the SGLang, vLLM or llama.cpp server itself.")


def test_a_json_api_without_any_llm_route_is_not_an_llm_server(serve) -> None:
    url = serve(JsonApi)
    assert _sentence(url) == (
        f"specperf: {url} (from --endpoint) is not an LLM server: it answers none of /health, "
        "/v1/models, /server_info and /props with JSON. Point --endpoint "
        "at the SGLang, vLLM or llama.cpp server itself.")


def test_the_sentence_comes_before_any_case_runs(serve, perf_project) -> None:
    url = serve(Quiet)
    # In process: the run stops at the probe, before any measuring.
    project = perf_project()
    result = project.run_inprocess("-m", "context_scaling", "--specperf-text-classes", "padding",
                                "--specperf-contexts", "13", "--endpoint", url)
    out = result.stdout.str()
    result.assert_outcomes(errors=2)  # the case and the fit, both at setup
    result.stdout.fnmatch_lines([
        f"NotAnLlmServer: specperf: {url} (from --endpoint) is not an LLM server: GET /health "
        "answered HTTP 404 with an HTML page titled 'Error response', a web server's or "
        "proxy's error page. Point --endpoint at the SGLang, vLLM or "
        "llama.cpp server itself."])
    assert "Traceback" not in out and "warm-up" not in out
    # The box was not down: the endpoint setting was wrong, and the record says so.
    [record] = project.pytester.path.glob("reports/*/results.json")
    run = json.loads(record.read_text())["run"]
    assert (run["stopped_by"], run["outage"]) == ("config-error", False)
    assert run["label"] == (
        "custom sweep (contexts 13; text classes padding), USAGE ERROR (nothing was measured: "
        "the settings point at no LLM server or ask for what the server cannot do; 2 of 2 "
        "perf tests errored)")
