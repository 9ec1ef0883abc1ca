"""A plain HTTP server on a free loopback port, for tests that need a URL answering in a way
they choose (a web page, a recorder, silence)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def serving(handler: Callable[..., Any]) -> Iterator[str]:
    """Serve ``handler`` on 127.0.0.1 while the block runs; yields the base URL."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()
