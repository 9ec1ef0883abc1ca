"""Is a sample trustworthy? The checks that keep a quietly wrong number out of a verdict.

Three guards, each cheap enough for the per-request hot path:

- **traffic** (:class:`TrafficGuard`): before a measured request the server's running and
  queued gauges are 0 (waited for, bounded), and afterwards its finished-request counter
  moved by exactly one. A disturbed attempt is discarded and retried (:func:`retry_clean`,
  bounded); when every attempt was disturbed the case errors with
  :class:`~specperf.errors.ContaminatedMeasurement` saying what was seen. Without
  /metrics the guard is off (the probe says so once).
- **prefix cache** (:func:`check_prefix_cache`): every prompt starts with a unique nonce,
  so at most the special tokens and the nonce's fixed lead can come from the cache. More
  is recorded on the sample; a cache reaching well past the nonce hid prefill and errors.
- **degenerate output** (:func:`check_output`): an output that collapsed into a loop is
  easy to draft, so it inflates acceptance. Its repeated 8-gram fraction is compared with
  what the text class's own text shows (the padding class legitimately repeats).
"""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar

from .acceptance import MetricsSnapshot
from .errors import ContaminatedMeasurement, DegenerateOutput, PrefixCacheHit
from .workload import TextClass, Tokenizer

T = TypeVar("T")

# Every measured prompt starts "run <12 hex digits>: " (after the special tokens).
NONCE_LEAD = "run "
# Leading hex digits of two random nonces often match; a token or two of chance overlap.
NONCE_CHANCE = 2
NGRAM = 8
# An output is degenerate when more than this fraction of its 8-grams repeat earlier ones,
# and clearly more than the class's own text does. Varied text scores ~0; a loop ~1.
DEGENERATE_FLOOR = 0.5
DEGENERATE_MARGIN = 0.3
# Tokens beyond the nonce-free expectation that may be cached without hiding prefill that
# matters (a chat template's role header, a chance match of the nonce's first characters).
PREFIX_SLACK = 32


class Disturbed(Exception):
    """One attempt saw foreign traffic; :func:`retry_clean` discards it and tries again."""


# -- traffic --------------------------------------------------------------------------------
class TrafficGuard:
    """Brackets one measured request with /metrics scrapes (``scrape`` returns None when the
    server has no metrics, which turns the guard off)."""

    def __init__(self, scrape: Callable[[], MetricsSnapshot | None], *, wait_s: float = 5.0,
                 poll_s: float = 0.05, settle_s: float = 0.5, stale_s: float = 2.0,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.scrape = scrape
        self.wait_s = wait_s
        self.poll_s = poll_s
        self.settle_s = settle_s
        self.stale_s = stale_s
        self.clock = clock
        self.sleep = sleep

    def before(self) -> MetricsSnapshot | None:
        """Wait (at most ``wait_s``) until nothing runs or queues; Disturbed if it never does.

        SGLang refreshes its running/queued gauges with its decode log lines, so after the
        last request of a burst they can keep reading "1 running" on an idle server. Gauges
        that say busy while every counter has stood still for ``stale_s`` (longer than any
        verify step or prefill of ours) are taken as stale: the server is idle.
        """
        snap = self.scrape()
        start = self.clock()
        deadline = start + self.wait_s
        still_since, last = start, snap
        while snap is not None and not snap.idle:
            now = self.clock()
            if last is None or _counters(snap) != _counters(last):
                still_since, last = now, snap
            elif now - still_since >= self.stale_s:
                return snap
            if now >= deadline:
                raise Disturbed(
                    f"{snap.running or 0:g} foreign requests running and {snap.queued or 0:g} "
                    f"queued on the server before the request, still after {self.wait_s:g} s")
            self.sleep(self.poll_s)
            snap = self.scrape()
        return snap

    def after(self, before: MetricsSnapshot | None, *, sent: int = 1,
              exact: bool = False) -> MetricsSnapshot | None:
        """Check the finished-request counter moved by exactly one since ``before``.

        ``sent``: requests the client sent for this sample (1 + its retries); a retried
        attempt that the server finished (a dropped or garbled answer) moved the counter too.
        ``exact``: the bracket itself is the measurement (metrics acceptance source), so
        even our own retried attempts spoil it.
        """
        if before is None or before.requests is None:
            return None
        after = self.scrape()
        deadline = self.clock() + self.settle_s
        # A counter may be exported a moment after the response; wait briefly for ours.
        while after is not None and after.requests is not None \
                and after.requests == before.requests and self.clock() < deadline:
            self.sleep(self.poll_s)
            after = self.scrape()
        if after is None or after.requests is None:
            raise Disturbed("/metrics lost its finished-request counter during the request")
        if exact and sent > 1 and 1 < after.requests - before.requests <= sent:
            raise Disturbed("a retried attempt of this request also ran, so the /metrics "
                            "bracket covers more than one request")
        _check_moved(before.requests, after.requests, sent)
        return after


    def after_counted(self, before: MetricsSnapshot, tokens: int) -> MetricsSnapshot:
        """The check for servers without a finished-request counter (llama.cpp): after our
        answer the server is idle again, and the counter of generated tokens (which moves
        when a request finishes) moved by exactly our ``tokens``."""
        after = self.scrape()
        deadline = self.clock() + self.settle_s
        # Our own slot is released just after its answer is sent.
        while after is not None and not after.idle and self.clock() < deadline:
            self.sleep(self.poll_s)
            after = self.scrape()
        if after is None or after.generation_tokens is None \
                or before.generation_tokens is None:
            raise Disturbed("/metrics lost its generated-token counter during the request")
        if not after.idle:
            raise Disturbed(f"{after.running or 0:g} foreign requests still running and "
                            f"{after.queued or 0:g} queued after the measurement")
        moved = after.generation_tokens - before.generation_tokens
        if moved != tokens:
            raise Disturbed(f"the generated-token counter moved by {moved:g}, not by our "
                            f"{tokens}: foreign requests ran during the measurement")
        return after


def _counters(snap: MetricsSnapshot) -> tuple[float | None, ...]:
    return (snap.requests, snap.generation_tokens, snap.verify_calls, snap.progress)


def _check_moved(before: float, after: float, sent: int) -> None:
    moved = after - before
    if not math.isfinite(moved):
        raise Disturbed(f"the finished-request counter read {before:g} → {after:g}")
    if 1 <= moved <= sent and moved == int(moved):
        return
    if moved > sent:
        foreign = int(moved) - sent
        noun = "request" if foreign == 1 else "requests"
        raise Disturbed(f"{foreign} foreign {noun} ran during the measurement")
    if moved < 0:
        raise Disturbed(f"the finished-request counter went backwards ({before:g} → "
                        f"{after:g}): the server restarted during the measurement")
    raise Disturbed(f"the finished-request counter moved by {moved:g}, not 1: the server "
                    "did not count the request")


def retry_clean(case_id: str, attempt: Callable[[], T], retries: int
                ) -> tuple[T, list[str]]:
    """Run ``attempt`` until it is undisturbed (at most ``retries`` extra times).

    Returns the result and the reasons of the discarded attempts; raises
    ContaminatedMeasurement listing what every attempt saw.
    """
    seen: list[str] = []
    for _ in range(retries + 1):
        try:
            return attempt(), seen
        except Disturbed as exc:
            seen.append(str(exc))
    raise ContaminatedMeasurement(
        f"{case_id}: {_headline(seen)}; every one of {len(seen)} attempts was disturbed by "
        f"other traffic on the server ({'; '.join(seen)}). Measure on an idle server: stop "
        "other clients or take the endpoint out of rotation.")


def _headline(seen: Sequence[str]) -> str:
    """The most telling reason: foreign requests counted, else the last thing seen."""
    counted = [s for s in seen if "foreign" in s]
    return counted[-1] if counted else seen[-1]


# -- prefix cache ---------------------------------------------------------------------------
def new_nonce() -> str:
    """A prompt's unique lead. Digits only: a fixed-length number tokenizes to the same
    count every time, which calibrated prompts (no /tokenize) rely on."""
    return f"{NONCE_LEAD}{secrets.randbelow(10**12):012d}: "


# Without a tokenizer route the lead cannot be counted: a generous bound (specials, "run").
UNTOKENIZED_PREFIX = 8


def shared_prefix(tokenizer: Tokenizer | None) -> int:
    """Tokens every measured prompt may share with an earlier one: specials, nonce lead."""
    if tokenizer is None:
        return UNTOKENIZED_PREFIX + NONCE_CHANCE
    specials = tokenizer.tokenize("", True)
    lead = tokenizer.tokenize(NONCE_LEAD.strip(), False)
    return len(specials) + len(lead) + NONCE_CHANCE


def check_prefix_cache(case_id: str, cached: int | None, prompt_tokens: int,
                       expected: int) -> dict[str, Any]:
    """Flags for ``Sample.raw``; PrefixCacheHit when the cache hid prefill past the nonce.

    ``expected``: the tokens every prompt shares before its nonce differs (special tokens
    plus the nonce's fixed lead), so the most a healthy cache can serve.
    """
    if cached is None or cached <= expected:
        return {}
    beyond = cached - expected
    if beyond > PREFIX_SLACK:
        raise PrefixCacheHit(
            f"{case_id}: the server served {cached} of {prompt_tokens} prompt tokens from "
            f"its prefix cache although every prompt starts with a unique nonce (at most "
            f"{expected} can be shared): the cache hid prefill, so tok/s would read high. "
            "Check for a response cache or proxy in front of the server and that the nonce "
            "reaches the model unchanged.")
    return {"prefix_cache_hit": beyond}


# -- degenerate output ----------------------------------------------------------------------
def repetition(items: Sequence[Hashable], n: int = NGRAM) -> float:
    """Fraction of the n-grams of ``items`` that repeat an earlier one (0 when too short)."""
    total = len(items) - n + 1
    if total <= 0:
        return 0.0
    distinct = {tuple(items[i:i + n]) for i in range(total)}
    return 1.0 - len(distinct) / total


def text_repetition(text: str) -> float:
    """Repetition of a text's words (the unit shared by every route and tokenizer)."""
    return repetition(text.split())


def class_norm(text_class: TextClass, chars: int = 4000) -> float:
    """How much a class's own text repeats (padding ~1, prose ~0); computed once per class."""
    return text_repetition(text_class.body(chars) + text_class.suffix)


def output_units(text: str, ids: Sequence[int] | None) -> Sequence[Hashable]:
    """What an output's repetition is measured on: its token ids, else its words."""
    return ids if ids is not None else text.split()


def degenerate_limit(class_norm: float) -> float:
    """The repetition above which an output of a class with ``class_norm`` is a loop."""
    return max(DEGENERATE_FLOOR, class_norm + DEGENERATE_MARGIN)


def check_output(case_id: str, units: Sequence[Hashable], class_norm: float
                 ) -> dict[str, Any]:
    """Flags for ``Sample.raw``; DegenerateOutput when the output is a loop for its class."""
    rep = repetition(units)
    limit = degenerate_limit(class_norm)
    if rep > limit:
        raise DegenerateOutput(
            f"{case_id}: the output collapsed into a loop ({rep:.0%} of its {NGRAM}-grams "
            f"repeat, limit {limit:.0%}; the class's own text repeats {class_norm:.0%}): a "
            "loop is easy to draft and inflates acceptance, so the case cannot be judged. "
            "Check the model and sampling settings (greedy decoding on this prompt loops).")
    return {"repetition": round(rep, 4)}
