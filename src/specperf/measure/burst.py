"""Bursts: C concurrent requests of one case, started together, guarded as one measurement.

The batching lever. A server batches every running request into one verify forward pass
per step (SGLang's scheduler, llama.cpp's slots with ``-np N``, vLLM's ``--max-num-seqs``),
so a burst of C requests of one case measures what C users see: each request's own tok/s,
avg commit and step time (its decode time over its own verify steps, every one a batched
step), and the burst's aggregate tok/s (all tokens over the burst's wall time).

One burst is one guarded attempt: the server is idle before it (the traffic guard's
``before``), then afterwards its finished-request counter moved by exactly C (plus our own
retries) and its per-iteration counter by no more than the C requests account for
(:func:`check_burst`); anything more is foreign traffic, and the attempt is discarded and
retried like any sample, the burst named in the error. Each request's prompt carries its
own reproducible nonce (``<case>-c<C>-<i>`` with the repeat), so no request of a burst hits
another's prefix cache.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from ..core import stop
from ..core.model import ContextFit, fit_repeats
from ..core.stats import Summary, summarize
from ..plan.workload import Case
from ..servers import llamacpp, routes, vllm
from ..servers.acceptance import PROGRESS, MetricsSnapshot
from ..servers.messages import Completion
from . import guard
from .attempt import Request, validate
from .loop import Measurer
from .sample import Sample

# Per level, the figures a level is summarised and judged by (results.json, baselines).
LEVEL_METRICS = ("tok_s", "agg_tok_s", "avg_commit", "step_ms", "decode_tok_s")
PER_REQUEST = ("tok_s", "avg_commit", "step_ms", "decode_tok_s")


def level_id(case: Case, concurrency: int) -> str:
    """How a level is named in test ids, verdicts and records: ``reasoning-ctx13-c4``."""
    return f"{case.id}-c{concurrency}"


@dataclass(frozen=True)
class Burst:
    """One burst: its C samples, its wall time (server time base) and the server's counters.

    ``server_steps``: the verify-step counter's move over the burst (Σ of the requests' steps
    on a server that counts them per request); ``server_tokens``: the generated tokens
    counter's; None without /metrics.
    """

    concurrency: int
    repeat: int
    warmup: bool
    samples: tuple[Sample, ...]
    wall_s: float
    server_steps: int | None = None
    server_tokens: int | None = None
    retries: int = 0
    raw: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def agg_tok_s(self) -> float:
        """Σ N / burst wall: what the server delivers to all C users together."""
        return sum(s.completion_tokens for s in self.samples) / self.wall_s

    @property
    def own_steps(self) -> int | None:
        """Σ of the requests' own verify steps (None when any lacks one)."""
        steps = [s.verify_steps for s in self.samples]
        return None if any(v is None for v in steps) else sum(v for v in steps if v)

    @property
    def server_step_ms(self) -> float | None:
        """Σ decode time / Σ verify steps by the server's counters: step time per batched
        step as the server counts the steps."""
        decode = [s.decode_s for s in self.samples]
        if not self.server_steps or any(d is None for d in decode):
            return None
        return 1000.0 * sum(d for d in decode if d is not None) / self.server_steps

    @property
    def server_avg_commit(self) -> float | None:
        """(Δ generated tokens − C) / Δ verify steps: acceptance by the server's counters."""
        if not self.server_steps or self.server_tokens is None:
            return None
        return (self.server_tokens - self.concurrency) / self.server_steps

    def to_dict(self) -> dict[str, Any]:
        return {"concurrency": self.concurrency, "repeat": self.repeat, "warmup": self.warmup,
                "wall_s": self.wall_s, "agg_tok_s": self.agg_tok_s,
                "own_steps": self.own_steps, "server_steps": self.server_steps,
                "server_tokens": self.server_tokens, "server_step_ms": self.server_step_ms,
                "server_avg_commit": self.server_avg_commit, "retries": self.retries,
                "samples": [s.to_dict() for s in self.samples], "raw": self.raw}


@dataclass(frozen=True)
class Level:
    """Every burst of one concurrency level of one case, and their summaries."""

    case: Case
    concurrency: int
    bursts: tuple[Burst, ...]

    @property
    def id(self) -> str:
        return level_id(self.case, self.concurrency)

    @property
    def measured(self) -> tuple[Burst, ...]:
        return tuple(b for b in self.bursts if not b.warmup)

    def values(self, metric: str) -> list[float]:
        """The level's values of ``metric``: per request, or per burst for agg_tok_s."""
        if metric == "agg_tok_s":
            return [b.agg_tok_s for b in self.measured]
        return [v for b in self.measured for s in b.samples
                if (v := s.metric(metric)) is not None]

    def summaries(self) -> dict[str, Summary]:
        return {m: summarize(vals) for m in LEVEL_METRICS if (vals := self.values(m))}

    @property
    def gpu_s(self) -> float:
        """The server time the level took: Σ burst walls (warm-ups included)."""
        return sum(b.wall_s for b in self.bursts)

    def to_dict(self) -> dict[str, Any]:
        server_steps = [v for b in self.measured if (v := b.server_step_ms) is not None]
        return {"id": self.id, "case": self.case.to_dict(), "concurrency": self.concurrency,
                "summaries": {k: v.to_dict() for k, v in self.summaries().items()},
                "server_step_ms": summarize(server_steps).to_dict() if server_steps else None,
                "gpu_s": self.gpu_s, "bursts": [b.to_dict() for b in self.bursts]}


def batch_fit(points: Sequence[tuple[int, Sequence[float]]]) -> ContextFit | None:
    """step_ms = a + b·C over the levels (the context fit's weighted least squares, with C
    for context): ``b_ms_per_token`` reads as ms per extra request in the batch."""
    return fit_repeats([(float(c), list(v)) for c, v in points])


# -- the guard's accounting of a burst ---------------------------------------------------------
def check_burst(before: MetricsSnapshot, after: MetricsSnapshot,
                comps: Sequence[Completion], sent: int) -> None:
    """Only the burst's own C requests ran between ``before`` and ``after``, else Disturbed.

    The finished-request counter moved by C (at most ``sent``: our own retried attempts
    count too), and the per-iteration counter by no more than the C requests account for
    (:data:`guard.ACCOUNTING`, each with its overshoot) and no less than they must.
    """
    c = len(comps)
    if before.requests is not None and after.requests is not None:
        moved = after.requests - before.requests
        if not math.isfinite(moved) or moved < 0:
            raise guard.Disturbed(f"the finished-request counter read {before.requests:g} → "
                                  f"{after.requests:g}: the server restarted during the burst")
        if moved > sent:
            foreign = int(moved) - sent
            noun = "request" if foreign == 1 else "requests"
            raise guard.Disturbed(f"{foreign} foreign {noun} ran during the burst of {c} "
                                  f"(the finished-request counter moved by {moved:g})")
        if moved < c:
            raise guard.Disturbed(f"the finished-request counter moved by {moved:g}, not by "
                                  f"the burst's {c}: the server did not count them all")
    rule = guard.ACCOUNTING.get(before.family or "")
    if rule is None or before.progress is None or after.progress is None:
        return
    spans = [rule.span(comp.prompt_tokens, comp.completion_tokens) for comp in comps]
    low, high = sum(s[0] for s in spans), sum(s[1] for s in spans)
    moved = after.progress - before.progress
    counter = " + ".join(PROGRESS.get(before.family or "", ("progress",)))
    if moved > high + sent * rule.overshoot + (sent - c) * (high // max(c, 1)):
        raise guard.Disturbed(
            f"the server processed {moved - high:g} more {rule.unit} than the burst's {c} "
            f"requests account for ({counter} moved by {moved:g}, the burst {high}): a "
            "foreign request ran beside it")
    if moved < low:
        raise guard.Disturbed(f"the per-iteration counter {counter} moved by {moved:g}, less "
                              f"than the burst's {low}: the server did not count its requests")


def _counted(before: MetricsSnapshot, after: MetricsSnapshot, c: int) -> bool:
    if before.requests is not None and after.requests is not None:
        return after.requests - before.requests >= c
    return True


# -- taking bursts --------------------------------------------------------------------------
@dataclass(frozen=True)
class _Sent:
    comp: Completion
    wall_s: float
    retries: int
    started: datetime
    span: tuple[float, float]  # monotonic send and reply times


class Burster:
    """Runs bursts of one case through a :class:`~specperf.measure.loop.Measurer`: its client,
    prompts, prompt plan, traffic guard and checks, so a burst's requests are built,
    validated and checked exactly like the main job's."""

    def __init__(self, measurer: Measurer,
                 on_burst: Callable[[Burst], None] | None = None) -> None:
        self.measurer = measurer
        self.on_burst = on_burst or (lambda b: None)

    def level(self, case: Case, concurrency: int, *, repeats: int, warmup: int) -> Level:
        """``warmup`` unmeasured bursts, then ``repeats`` measured ones."""
        bursts = [self.burst(case, concurrency, -1 - i, warmup=True) for i in range(warmup)]
        bursts += [self.burst(case, concurrency, r, warmup=False) for r in range(repeats)]
        return Level(case, concurrency, tuple(bursts))

    def burst(self, case: Case, concurrency: int, repeat: int, *, warmup: bool) -> Burst:
        """One clean burst; disturbed attempts are discarded and retried (bounded)."""
        stop.check()  # a stop signal swallowed by a finalizer ends the run here
        where = f"{level_id(case, concurrency)} (burst of {concurrency}, repeat {repeat + 1})"
        found, discarded = guard.retry_clean(
            where, lambda: self._attempt(case, concurrency, repeat, warmup),
            self.measurer.run.guard_retries)
        if discarded:
            found.raw["discarded_attempts"] = discarded
        self.on_burst(found)
        return found

    def _attempt(self, case: Case, concurrency: int, repeat: int, warmup: bool) -> Burst:
        m = self.measurer
        request = m.request(case)
        m.check_fits(case, request, "--specperf-concurrency-context")
        bodies = [self._body(case, request, concurrency, i, repeat) for i in range(concurrency)]
        before = m.traffic.before()
        sent, wall_s = self._send_all(case, request, bodies)
        after = self._after(before, [s.comp for s in sent],
                            concurrency + sum(s.retries for s in sent))
        samples = tuple(self._sample(case, request, concurrency, i, repeat, warmup, s)
                        for i, s in enumerate(sent))
        steps = tokens = None
        if before is not None and after is not None:
            if before.verify_calls is not None and after.verify_calls is not None:
                steps = int(after.verify_calls - before.verify_calls)
            if before.generation_tokens is not None and after.generation_tokens is not None:
                tokens = int(after.generation_tokens - before.generation_tokens)
        scale = m.server.time_scale
        return Burst(concurrency, repeat, warmup, samples, wall_s / scale, steps, tokens,
                     sum(s.retries for s in sent), {"wall_s_unscaled": wall_s})

    def _body(self, case: Case, request: Request, concurrency: int, index: int,
              repeat: int) -> dict[str, Any]:
        """Request ``index`` of a burst: its own reproducible nonce (main job's route)."""
        m = self.measurer
        key = f"{level_id(case, concurrency)}-{index}"
        nonce, _ = m.prompt_plan.nonce(m.client, key, repeat)
        body_case = replace(case, context=case.context - request.template_tokens)
        prompt = m.prompts.build(body_case, nonce, want_ids=request.api in ("sglang",
                                                                             "llamacpp"))
        body = routes.request_body(request.api, prompt, request.max_tokens, m.server.model,
                                   nonce.strip(": "), request.options)[1]
        if m.server.flavour == "llamacpp" and request.api != "llamacpp":
            body = llamacpp.openai_extras(body)
        if m.server.kind == "vllm" and m.prompt_plan.policy == "per-request":
            body = vllm.with_cache_salt(body)
        return body

    def _send_all(self, case: Case, request: Request,
                  bodies: Sequence[dict[str, Any]]) -> tuple[list[_Sent], float]:
        """Send every body at once (one thread each, released together by a barrier). The
        burst's wall runs from the first request sent to the last reply: the threads' start-up
        before the barrier is the client's, not the server's (on a loaded machine it was a
        third of a short burst)."""
        m = self.measurer
        path = routes.PATHS[request.api]
        timeout_s, basis = m.timeouts.seconds(f"{case.id}/burst{len(bodies)}")
        barrier = threading.Barrier(len(bodies))

        def one(body: dict[str, Any]) -> _Sent:
            barrier.wait()
            started, sent_at = datetime.now(), time.monotonic()
            reply = m.client.post_json(path, body, timeout_s=timeout_s, timeout_basis=basis)
            return _Sent(routes.parse(request.api, reply.data), reply.elapsed_s,
                         reply.retries, started, (sent_at, time.monotonic()))

        with ThreadPoolExecutor(max_workers=len(bodies)) as pool:
            futures = [pool.submit(one, b) for b in bodies]
            sent = [f.result() for f in futures]
        wall_s = max(s.span[1] for s in sent) - min(s.span[0] for s in sent)
        m.timeouts.observe(f"{case.id}/burst{len(bodies)}", wall_s)
        return sent, wall_s

    def _after(self, before: MetricsSnapshot | None, comps: Sequence[Completion],
               sent: int) -> MetricsSnapshot | None:
        """The guard's after-check for the whole burst (Disturbed on foreign traffic)."""
        if before is None or (before.requests is None and before.progress is None):
            return None
        traffic = self.measurer.traffic
        after = traffic.scrape()
        deadline = traffic.clock() + traffic.settle_s
        while after is not None and not _counted(before, after, len(comps)) \
                and traffic.clock() < deadline:
            traffic.sleep(traffic.poll_s)
            after = traffic.scrape()
        if after is None:
            raise guard.Disturbed("/metrics stopped answering during the burst")
        if before.requests is None:  # llama.cpp: no finished-request counter
            moved = (after.generation_tokens or 0) - (before.generation_tokens or 0)
            own = sum(c.completion_tokens for c in comps)
            if moved != own:
                raise guard.Disturbed(f"the generated-token counter moved by {moved:g}, not "
                                      f"by the burst's {own}: foreign requests ran during it")
            return after
        check_burst(before, after, comps, sent)
        return after

    def _sample(self, case: Case, request: Request, concurrency: int, index: int,
                repeat: int, warmup: bool, sent: _Sent) -> Sample:
        """One request of a burst as a sample: steps from its response, decode time from its
        server timings (a shared /metrics bracket cannot be split among C requests)."""
        m = self.measurer
        comp = sent.comp
        validate(case, request, comp, calibrated=m.prompts.tokenizer is None,
                 url=m.client.base_url)
        checks = m._checks(case, comp, request)
        # A request's own steps: the response's (llama.cpp's timings count each request's own
        # draft_n_accepted whatever the source, batched or not); for the other sources the
        # burst's counters (Burst.server_steps) stand in, as a bracket cannot be split.
        own = m.server.acceptance_source == "response" or (
            m.server.flavour == "llamacpp" and comp.timings_from == "timings")
        steps = comp.verify_steps if own else None
        decode_s = comp.e2e_s - comp.ttft_s if comp.e2e_s is not None \
            and comp.ttft_s is not None else None
        scale = m.server.time_scale
        return Sample(
            case_id=level_id(case, concurrency), repeat=repeat, warmup=warmup,
            prompt_tokens=comp.prompt_tokens, completion_tokens=comp.completion_tokens,
            wall_s=sent.wall_s / scale, verify_steps=steps,
            decode_s=None if decode_s is None else decode_s / scale,
            ttft_s=None if comp.ttft_s is None else comp.ttft_s / scale,
            server_accept_length=comp.accept_length, cached_tokens=comp.cached_tokens,
            acceptance_source=m.server.acceptance_source, finish_reason=comp.finish,
            retries=sent.retries,
            raw={"wall_s_unscaled": sent.wall_s, "burst_index": index, **checks})
