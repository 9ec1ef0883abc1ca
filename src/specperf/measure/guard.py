"""Is a sample trustworthy? The checks that keep a quietly wrong number out of a verdict.

Three guards, each cheap enough for the per-request hot path:

- **traffic** (:class:`TrafficGuard`): before a measured request the server is quiet (its
  per-iteration counter still and its gauges idle, waited for, bounded), and afterwards its
  finished-request counter moved by exactly one and its per-iteration counter by exactly
  what our request accounts for. A disturbed attempt is discarded and retried (:func:`retry_clean`,
  bounded); when every attempt was disturbed the case errors with
  :class:`~specperf.core.errors.ContaminatedMeasurement` saying what was seen. Without
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
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ..core.errors import ContaminatedMeasurement, DegenerateOutput, PrefixCacheHit
from ..plan.workload import TextClass
from ..servers.acceptance import PROGRESS, MetricsSnapshot

T = TypeVar("T")

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
@dataclass(frozen=True)
class Accounting:
    """How much one request of ours moves its server family's progress counter
    (:data:`specperf.servers.acceptance.PROGRESS`): the least and the most, before overshoot.

    ``unit`` "tokens": the prompt (computed or cached) plus the decoded tokens, with or
    without the first token, which the prefill produced. ``unit`` "iterations" (a server whose
    progress counters count decode calls, such as llama.cpp's n_decode_total +
    spec_decode_num_drafts_total): at least one and at most one per decoded token, since
    every iteration commits at least one.
    """

    unit: str
    first_token: bool = False
    # What a request may add beyond its own count: SGLang counts a verify step's whole
    # accepted run, which can pass max_new_tokens, and under its overlap scheduler a
    # finished request rides one more iteration (batch_result_processor.py: "a finished row
    # reappears for one overshoot tick"): two steps of up to 32 tokens, or two iterations.
    # A foreign request adds at least its prompt, or iterations of its own.
    overshoot: int = 64

    def span(self, prompt_tokens: int, completion_tokens: int) -> tuple[int, int]:
        decoded = max(completion_tokens - 1, 0)
        if self.unit == "iterations":
            return min(1, decoded), decoded
        tokens = prompt_tokens + decoded + (1 if self.first_token else 0)
        return tokens, tokens


ACCOUNTING: dict[str, Accounting] = {
    # realtime_tokens_total: prefill_compute + prefill_cache = the prompt; decode = every
    # token after the first (report_prefill_stats does not count the token it produced).
    "sglang": Accounting("tokens", first_token=False),
    # prompt_tokens_total + generation_tokens_total: the first token is a generation token.
    "vllm": Accounting("tokens", first_token=True),
    # A server kind whose progress counters count decode calls (llama.cpp: n_decode_total +
    # spec_decode_num_drafts_total, no finished-request counter) registers
    # Accounting("iterations", overshoot=2) here with its names in acceptance.PROGRESS.
}


class TrafficGuard:
    """Brackets one measured request with /metrics scrapes (``scrape`` returns None when the
    server has no metrics, which turns the guard off).

    It reads four abstract fields of :class:`MetricsSnapshot`: the running and queued gauges,
    the finished-request counter and the per-iteration progress counter. On SGLang the
    finish counters move only when a request finishes and the gauges are published only
    with prefill batches, every decode-log window and at idle, so neither alone can see a
    long foreign request; the progress counter moves every iteration of any request.
    """

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
        """Wait (at most ``wait_s``) until the server is quiet; Disturbed if it never is.

        Quiet: the progress counter stood still over one poll and the gauges read idle, or
        the progress counter stood still for ``stale_s`` (longer than any iteration) while
        the gauges read busy: gauges published before the server went idle. Without a
        progress counter busy gauges are believed: a foreign request that runs longer than
        the wait leaves every finish counter still, so stillness proves nothing.
        """
        prev = self.scrape()
        if prev is None:
            return None
        start = still_since = self.clock()
        while True:
            self.sleep(self.poll_s)
            snap = self.scrape()
            if snap is None:
                return None
            now = self.clock()
            moving = _progressed(prev, snap)
            if moving:
                still_since = now
            elif snap.idle or (snap.progress is not None and now - still_since >= self.stale_s):
                return snap
            if now - start >= self.wait_s:
                raise Disturbed(self._busy(snap, moving))
            prev = snap

    def _busy(self, snap: MetricsSnapshot, moving: bool) -> str:
        waited = f"still after {self.wait_s:g} s"
        if snap.idle and moving:
            return ("the server's per-iteration counter kept moving before the request while "
                    "its gauges read idle: a foreign request is running (its gauges are "
                    f"published only every decode-log window), {waited}")
        text = (f"{snap.running or 0:g} foreign requests running and {snap.queued or 0:g} "
                f"queued on the server before the request, {waited}")
        if snap.progress is None:
            text += (" (the server exports no per-iteration counter, so these gauges cannot "
                     "be told from stale ones)")
        return text

    def after(self, before: MetricsSnapshot | None, *, sent: int = 1, exact: bool = False,
              prompt_tokens: int | None = None,
              completion_tokens: int | None = None) -> MetricsSnapshot | None:
        """Check that only our request ran since ``before``.

        The finished-request counter must have moved by exactly one, and the progress
        counter by what our request accounts for (:data:`ACCOUNTING`, given its
        ``prompt_tokens`` and ``completion_tokens``): any more is a foreign request, even
        one still running. ``sent``: requests the client sent for this sample (1 + its
        retries); a retried attempt that the server finished moved the counters too.
        ``exact``: the bracket itself is the measurement (metrics acceptance source), so
        even our own retried attempts spoil it.
        """
        if before is None or (before.requests is None and before.progress is None):
            return None
        rule = ACCOUNTING.get(before.family or "")
        span = self._span(before, prompt_tokens, completion_tokens)
        after = self._settled(before, span)
        if after is None or (before.requests is not None and after.requests is None):
            raise Disturbed("/metrics lost its finished-request counter during the request")
        if before.requests is not None and after.requests is not None:
            if exact and sent > 1 and 1 < after.requests - before.requests <= sent:
                raise Disturbed("a retried attempt of this request also ran, so the /metrics "
                                "bracket covers more than one request")
            _check_moved(before.requests, after.requests, sent)
        if rule is not None and span is not None and before.progress is not None \
                and after.progress is not None:
            self._check_progress(before, after, span, sent, rule)
        return after

    def _span(self, before: MetricsSnapshot, prompt_tokens: int | None,
              completion_tokens: int | None) -> tuple[int, int] | None:
        rule = ACCOUNTING.get(before.family or "")
        if rule is None or before.progress is None or prompt_tokens is None \
                or completion_tokens is None:
            return None
        return rule.span(prompt_tokens, completion_tokens)

    def _settled(self, before: MetricsSnapshot, span: tuple[int, int] | None
                 ) -> MetricsSnapshot | None:
        """A scrape after the request, once its counters are in (waited for, briefly): a
        server may raise them a moment after the response, the last iteration's too."""
        after = self.scrape()
        deadline = self.clock() + self.settle_s
        while after is not None and not _counted(before, after, span) \
                and self.clock() < deadline:
            self.sleep(self.poll_s)
            after = self.scrape()
        return after

    def _check_progress(self, before: MetricsSnapshot, after: MetricsSnapshot,
                        span: tuple[int, int], sent: int, rule: Accounting) -> None:
        assert before.progress is not None and after.progress is not None
        moved = after.progress - before.progress
        low, high = span
        counter = " + ".join(PROGRESS.get(before.family or "", ("progress",)))
        if not math.isfinite(moved) or moved < 0:
            raise Disturbed(f"the per-iteration counter {counter} read {before.progress:g} → "
                            f"{after.progress:g}: the server restarted during the measurement")
        if moved > sent * (high + rule.overshoot):
            raise Disturbed(
                f"the server processed {moved - high:g} more {rule.unit} than this request "
                f"accounts for ({counter} moved by {moved:g}, this request {high}): a foreign "
                "request ran beside it")
        if moved < low:
            raise Disturbed(f"the per-iteration counter {counter} moved by {moved:g}, less "
                            f"than this request's {low}: the server did not count the request")

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


def _progressed(prev: MetricsSnapshot, snap: MetricsSnapshot) -> bool:
    return prev.progress is not None and snap.progress is not None \
        and snap.progress != prev.progress


def _counted(before: MetricsSnapshot, after: MetricsSnapshot,
             span: tuple[int, int] | None) -> bool:
    """Whether ``after`` already holds our request: finished, and all of its iterations."""
    if before.requests is not None and after.requests is not None \
            and after.requests == before.requests:
        return False
    if span is not None and before.progress is not None and after.progress is not None:
        return after.progress - before.progress >= span[0]
    return True


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
