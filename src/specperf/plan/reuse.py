"""Reproducible prompts: repeat k of a case sends the same prompt in every run of a baseline
version, and still no prefix cache ever serves it.

The prompt of repeat k starts with a nonce derived from the baseline version's prompt seed,
the case and k (:func:`specperf.plan.nonce.derived_nonce`); warm-ups re-send repeat 0's prompt,
which checks for free that the server repeats itself (:mod:`specperf.judge.exact`). A repeated
prompt would be served by the prefix cache, so reuse needs a server that can be told not
to, chosen per server kind:

- ``flush``: SGLang's ``POST /flush_cache`` empties the cache before every request (it
  answers 400 while requests run; that attempt then falls back to a random nonce);
- ``per-request``: the request body itself turns the cache off (llama.cpp ``cache_prompt:
  false``; vLLM a fresh ``cache_salt`` per request, servers/vllm.py); a server kind whose
  flavour (or kind) is in :data:`CACHE_OFF_PER_REQUEST` declares it;
- ``none``: neither exists: every prompt keeps a random nonce and exact acceptance is
  unavailable.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from . import nonce
from .workload import Prompt

FLUSH_PATH = "/flush_cache"
# Server flavours whose request bodies turn the prefix cache off per request (routes.py
# sends it): llama.cpp's cache_prompt false.
CACHE_OFF_PER_REQUEST: frozenset[str] = frozenset({"llamacpp", "llama.cpp", "vllm"})
POLICIES = ("flush", "per-request", "none")
DIGEST_CHARS = 16


class StatusPoster(Protocol):
    """What flushing needs of the HTTP client."""

    def post_status(self, path: str, *, timeout_s: float | None = None) -> int: ...


@dataclass(frozen=True)
class PromptPlan:
    """How this run's prompts are made: from ``seed`` (reproducible) or random nonces."""

    seed: str | None = None
    policy: str = "none"
    reason: str = "prompts carry random nonces (no baseline prompt seed in use)"

    @property
    def reproducible(self) -> bool:
        return self.seed is not None and self.policy in ("flush", "per-request")

    def nonce(self, client: StatusPoster, case_id: str, repeat: int | None) -> tuple[str, bool]:
        """The nonce of one attempt and whether it is the reproducible one.

        Warm-ups (negative repeats) re-send repeat 0's prompt. Under ``flush`` the cache is
        emptied first; a refusal (requests running) costs this attempt its reuse, never its
        validity: it gets a random nonce.
        """
        if not self.reproducible or repeat is None or self.seed is None:
            return nonce.new_nonce(), False
        if self.policy == "flush" and not flush(client):
            return nonce.new_nonce(), False
        return nonce.derived_nonce(self.seed, case_id, max(repeat, 0)), True

    def to_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "policy": self.policy, "reason": self.reason,
                "reproducible": self.reproducible}


def flush(client: StatusPoster) -> bool:
    """Empty the server's prefix cache; False when it refused (requests are running)."""
    return client.post_status(FLUSH_PATH, timeout_s=60) == 200


def plan_for(client: StatusPoster, flavour: str, seed: str, kind: str = "") -> PromptPlan:
    """The plan a server allows: reuse with ``seed`` when it can bypass its cache."""
    if kind == "vllm":
        # vLLM >= 0.9 salts its prefix-cache hashes with the request's cache_salt (measured
        # on 0.32.0: a repeated 1362-token prompt, same salt 1280 cached, new salt 0)
        return PromptPlan(seed, "per-request", "prompts repeat across runs; each request "
                          "carries a fresh cache_salt, so the prefix cache never serves it")
    if flavour in CACHE_OFF_PER_REQUEST:
        return PromptPlan(seed, "per-request", "prompts repeat across runs; each request "
                          "turns the prefix cache off (cache_prompt false)")
    status = client.post_status(FLUSH_PATH, timeout_s=60)
    if status in (200, 400):  # 400: it exists but requests are running right now
        return PromptPlan(seed, "flush", "prompts repeat across runs; the prefix cache is "
                          f"flushed before every request (POST {FLUSH_PATH})")
    return PromptPlan(None, "none", f"the server has no {FLUSH_PATH} (HTTP {status}) and no "
                      "per-request cache switch, so prompts carry random nonces and exact "
                      "acceptance is unavailable")


def digest(data: bytes) -> str:
    """A short content digest (prompt or output identity in results and baselines)."""
    return hashlib.sha256(data).hexdigest()[:DIGEST_CHARS]


def prompt_digest(prompt: Prompt) -> str:
    """The identity of a prompt as sent: its token ids, else its text."""
    if prompt.input_ids is not None:
        return digest(",".join(map(str, prompt.input_ids)).encode())
    return digest(prompt.text.encode())


def output_digest(text: str, ids: Sequence[int] | None) -> str:
    """The identity of an output: its token ids when the route returns them, else its text."""
    if ids is not None:
        return digest(",".join(map(str, ids)).encode())
    return digest(text.encode())


@dataclass(frozen=True)
class PromptUsed:
    """What one attempt sent: which repeat's prompt, reproducibly or not, and its digest."""

    repeat: int | None
    reproducible: bool
    digest: str

    def raw(self, text: str, ids: Sequence[int] | None) -> dict[str, Any]:
        """Fields for ``Sample.raw``; the exact comparison reads them."""
        return {"prompt_k": None if self.repeat is None else max(self.repeat, 0),
                "reproducible": self.reproducible, "prompt_digest": self.digest,
                "output_digest": output_digest(text, ids)}
