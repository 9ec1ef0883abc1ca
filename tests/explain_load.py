"""A small load generator for the explain tests: production-like traffic on one server.

Threads send back-to-back generations of one text class at a fixed prompt length (a unique
leading nonce each, so no prefix cache hides prefill) until stopped; the server's own
counters then tell ``specperf explain`` what it did.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable

import httpx

from specperf.plan.workload import load_text_classes


def prompt_ids(url: str, text_class: str, tokens: int, field: str = "prompt") -> list[int]:
    """``tokens`` token ids of the class's text (the server's own tokenizer; llama.cpp's
    /tokenize reads ``content``)."""
    tc = load_text_classes()[text_class]
    text = tc.body(tokens * 8) + tc.suffix
    ids: list[int] = httpx.post(f"{url}/tokenize", json={field: text},
                                timeout=30).json()["tokens"]
    assert len(ids) >= tokens, f"{len(ids)} tokens of {text_class}, wanted {tokens}"
    return ids[-tokens:]


class Load:
    """``concurrency`` threads of generations on ``url``'s /generate until :meth:`stop`."""

    def __init__(self, url: str, ids: list[int], output_tokens: int = 600,
                 concurrency: int = 1, body: Callable[[list[int], int], dict] | None = None,
                 route: str = "/generate", nonce: bool = True) -> None:
        self.url, self.ids, self.output_tokens, self.route = url, ids, output_tokens, route
        self.body = body or _sglang_body
        self.done = threading.Event()
        self.finished = 0
        self.errors: list[str] = []
        # (monotonic time the answer arrived, its JSON) of every request
        self.replies: list[tuple[float, dict]] = []
        self.nonce = nonce
        self._nonce = itertools.count(1)
        self._lock = threading.Lock()
        self.threads = [threading.Thread(target=self._run, daemon=True)
                        for _ in range(concurrency)]

    def __enter__(self) -> Load:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self.done.set()
        for thread in self.threads:
            thread.join(timeout=120)

    def _run(self) -> None:
        with httpx.Client(timeout=600) as client:
            while not self.done.is_set():
                with self._lock:
                    nonce = next(self._nonce)
                ids = [1000 + nonce % 5000, *self.ids[1:]] if self.nonce else self.ids
                try:
                    reply = client.post(f"{self.url}{self.route}",
                                        json=self.body(ids, self.output_tokens))
                    reply.raise_for_status()
                except httpx.HTTPError as exc:
                    self.errors.append(str(exc))
                    return
                with self._lock:
                    self.finished += 1
                    self.replies.append((time.monotonic(), reply.json()))


def _sglang_body(ids: list[int], output_tokens: int) -> dict:
    return {"input_ids": ids, "sampling_params": {"max_new_tokens": output_tokens,
                                                  "ignore_eos": True, "temperature": 0}}
