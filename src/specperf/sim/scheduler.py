"""The simulator's scheduler: one asyncio loop that runs every active request step by step.

Lifecycle. ``submit`` queues a request and wakes the loop. Each loop iteration is either a
prefill batch (all queued requests, which have priority like SGLang's default) or one verify
step of every running request together:

- prefill: each request costs ``prefill_ms + prefill_ms_per_token * uncached`` where
  uncached = prompt minus the longest prefix in the prefix cache (at least one token is always
  computed); the prefill produces the first token, then the request joins the running batch.
- verify step: one duration for the whole batch, ``physics.step_ms`` of the sum of the
  running contexts; then each request commits 1 + accepted drafts (``physics`` docstring).

Durations are simulated milliseconds; the wall clock sleeps ``ms * time_scale / 1000``. The
loop sleeps to a deadline that advances by each duration, so sleep jitter does not accumulate;
after an idle period the deadline restarts at "now". The server-side times a response reports
(first token, finish) are those deadlines, the modelled GPU's clock: a busy test machine's late
wake-ups delay the answer as a slow network would (the client's wall time sees them) but never
enter the server's own timings, which time-scaling would otherwise magnify (up to ``_MAX_LAG_S``
behind, where the loop gives up catching up). Every request records its simulated
prefill and step durations and commits: the ground truth behind ``/_sim/truth``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
import uuid
from array import array
from collections import deque
from collections.abc import Sequence
from typing import Any

from specperf.sim.cache import PrefixCache
from specperf.sim.faults import Faults
from specperf.sim.observer import PrefillReport, SchedulerObserver, StepReport
from specperf.sim.physics import (
    Draws,
    build_vocabulary,
    is_repetitive,
    mean_commit,
    prefill_ms,
    step_ms,
)
from specperf.sim.profile import Profile
from specperf.sim.request import GenerationSpec, SimRequest, new_request
from specperf.sim.tokenizer import BOS_ID, Tokenizer

_TRUTH_KEEP = 1000
_MAX_LAG_S = 0.25  # beyond this the loop stops trying to catch up (e.g. after a suspend)
_MAX_ARRIVAL_CREDIT_S = 0.1  # how far back an idle loop may start a prefill (see _wake_up)
_BACKGROUND_PROMPT = 256
_BACKGROUND_OUTPUT = 2000


def request_seed(seed: int, spec: GenerationSpec, arrival: int) -> list[int]:
    """The seed of a request's own draws (its tokens and its per-step acceptance).

    At temperature 0 a real speculative server commits the same tokens in the same verify
    steps for the same prompt (llama.cpp's draft_n / draft_n_accepted repeat exactly), so a
    greedy request's draws come from its prompt's token ids: draw k of its acceptance
    stream is step k's, whatever ran before or beside it. Sampled requests keep a seed per
    arrival. Step-time noise has its own stream (``Scheduler._noise``) and stays random.
    """
    if not spec.greedy:
        return [seed, 1, arrival]
    digest = hashlib.blake2b(array("q", spec.prompt_ids).tobytes(), digest_size=16).digest()
    return [seed, 4, *array("I", digest)]


class Scheduler:
    """Owns the queue, the running batch, the prefix cache and the ground truth."""

    def __init__(
        self,
        profile: Profile,
        faults: Faults,
        tokenizer: Tokenizer,
        time_scale: float,
        seed: int,
    ) -> None:
        self.profile = profile
        self.time_scale = time_scale
        self._physics = profile.physics
        self._faults = faults
        self._tokenizer = tokenizer
        self._seed = seed
        self.vocab = build_vocabulary(tokenizer)
        self.observers: list[SchedulerObserver] = []
        self._cache = PrefixCache()
        self._noise = Draws([seed, 0])
        self._waiting: list[SimRequest] = []
        self._prefilling: list[SimRequest] = []
        self._running: list[SimRequest] = []
        self._truth: deque[SimRequest] = deque(maxlen=_TRUTH_KEEP)
        self._submitted = 0
        self._background_started = 0
        self._background_target = 0
        self._deadline = 0.0
        self._lifetime = [0, 0]  # committed tokens, request-verify-steps
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def running_count(self) -> int:
        return len(self._running) + len(self._prefilling)

    @property
    def queued_count(self) -> int:
        return len(self._waiting)

    @property
    def lifetime_accept_length(self) -> float:
        """Committed tokens per verify step since start (SGLang's useless lifetime average)."""
        committed, steps = self._lifetime
        return committed / steps if steps else 0.0

    async def start(self) -> None:
        """Start the loop (call from inside the server's event loop)."""
        self._wake = asyncio.Event()
        self._task = asyncio.create_task(self._loop(), name="specperf-sim-scheduler")

    async def stop(self) -> None:
        """Stop the loop and abort whatever still runs."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for request in [*self._waiting, *self._prefilling, *self._running]:
            self.abort(request)

    def submit(
        self,
        spec: GenerationSpec,
        background: bool = False,
        arrived: tuple[float, float] | None = None,
    ) -> SimRequest:
        """Queue a request; its own RNG depends only on the seed and either its prompt
        (temperature 0: see :func:`request_seed`) or its arrival index.

        ``arrived`` = (epoch, loop clock) when the HTTP request came in (default: now).
        """
        if background:
            self._background_started += 1
            seed = [self._seed, 2, self._background_started]
        else:
            self._submitted += 1
            seed = request_seed(self._seed, spec, self._submitted)
        now = arrived or (time.time(), asyncio.get_running_loop().time())
        request_id = spec.rid or uuid.uuid4().hex
        request = new_request(
            request_id, spec, self._physics, self._tokenizer, self.vocab, seed, background, now
        )
        self._waiting.append(request)
        self._truth.append(request)
        self._notify()
        if not background and self._faults.take_foreign():
            self._schedule_companion()
        return request

    def _schedule_companion(self) -> None:
        """The ``foreign_output`` fault: a foreign request some simulated ms after ours."""
        state = self._faults.state
        delay_s = state.foreign_delay_ms * self.time_scale / 1000.0
        words = [self.vocab[i % len(self.vocab)] for i in range(state.foreign_prompt - 1)]
        spec = GenerationSpec(prompt_ids=[BOS_ID, *words], max_new_tokens=state.foreign_output,
                              ignore_eos=True)
        asyncio.get_running_loop().call_later(delay_s, self.submit, spec, True)

    def admit_running(self, request: SimRequest) -> None:
        """Put a submitted request straight into the running batch (benchmarks only)."""
        self._waiting.remove(request)
        request.commit(1, is_repetitive(self._physics, request.window))
        self._running.append(request)

    def abort(self, request: SimRequest) -> None:
        """Stop a request now (client gone, shutdown, background no longer wanted)."""
        if request.finish_reason is not None:
            return
        for queue in (self._waiting, self._running):
            if request in queue:
                queue.remove(request)
        loop_time = asyncio.get_running_loop().time()
        reason = {"type": "abort", "message": "request aborted", "status_code": 499,
                  "err_type": "abort"}
        request.finish(loop_time, time.time(), reason)

    def flush_cache(self) -> bool:
        """Empty the prefix cache; refused (False) while any request is active."""
        if self._waiting or self._prefilling or self._foreground_running():
            return False
        self._cache.clear()
        return True

    def set_background(self, count: int) -> None:
        """Keep ``count`` foreign long generations running (0 stops them)."""
        self._background_target = count
        active = [r for r in self._active() if r.background]
        for request in active[count:]:
            self.abort(request)
        for _ in range(count - len(active)):
            self._spawn_background()

    def truth(self) -> list[dict[str, Any]]:
        """Ground truth of the last requests, oldest first."""
        return [request.truth() for request in self._truth]

    def _active(self) -> list[SimRequest]:
        return [*self._waiting, *self._prefilling, *self._running]

    def _foreground_running(self) -> bool:
        return any(not r.background for r in self._running)

    def _notify(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._wake is not None
        while True:
            if not self._waiting and not self._running:
                self._wake.clear()
                await self._wake.wait()
                self._deadline = self._wake_up_deadline(loop.time())
                continue
            if self._waiting:
                await self._prefill()
            else:
                await self._decode()

    def _wake_up_deadline(self, now: float) -> float:
        """Where an idle loop's clock restarts: at the earliest arrival, not at "now".

        Parsing and tokenizing a request took real (unscaled) CPU time before it was queued;
        starting the simulated prefill at arrival keeps that overhead out of the time-scaled
        wall time, as the GPU would have been free then. Bounded so stale stamps never count.
        """
        arrivals = [r.received_mono for r in self._waiting]
        earliest = min(arrivals, default=now)
        return min(now, max(earliest, now - _MAX_ARRIVAL_CREDIT_S))

    def _gpu_clock(self) -> float:
        """Now on the modelled GPU's clock: the deadline just slept to, not this machine's
        wake-up lag (never ahead of the loop's clock, which may wake a tick early)."""
        return min(self._deadline, asyncio.get_running_loop().time())

    async def _sleep(self, sim_ms: float) -> float:
        """Sleep one simulated duration to the running deadline; returns the wall seconds."""
        loop = asyncio.get_running_loop()
        wall = sim_ms * self.time_scale / 1000.0
        now = loop.time()
        if self._deadline < now - _MAX_LAG_S:
            self._deadline = now
        self._deadline += wall
        await asyncio.sleep(max(self._deadline - now, 0.0))
        return wall

    async def _prefill(self) -> None:
        batch, self._waiting = self._waiting, []
        self._prefilling = batch
        running_before = len(self._running)
        loop_now = asyncio.get_running_loop().time()
        total_ms = 0.0
        for request in batch:
            request.prefill_start_mono = loop_now
            request.step_factor = self._faults.request_factor()
            prompt = request.spec.prompt_ids
            key = _cache_key(request.spec)
            matched = max(self._cache.match(key) - (len(key) - len(prompt)), 0)
            request.cached_tokens = min(matched, len(prompt) - 1)
            request.prefill_ms = prefill_ms(self._physics, len(prompt) - request.cached_tokens) \
                * self._faults.state.prefill_mult
            total_ms += request.prefill_ms
        await self._sleep(total_ms)
        self._prefilling = []
        report = PrefillReport([r for r in batch if r.finish_reason is None], running_before,
                               len(self._waiting))
        for observer in self.observers:
            observer.on_prefill(report)
        now = self._gpu_clock()
        for request in batch:
            if request.finish_reason is not None:
                continue
            self._cache.insert(_cache_key(request.spec))
            request.commit(1, is_repetitive(self._physics, request.window))
            request.first_token_mono = now
            if request.updates is not None:
                request.updates.put_nowait(len(request.output_ids))
            for observer in self.observers:
                observer.on_first_token(request)
            if request.finished:
                self._finish(request)
            else:
                self._running.append(request)

    async def _decode(self) -> None:
        batch = list(self._running)
        ms = self.step_duration(batch)
        wall = await self._sleep(ms)
        self.apply_step(batch, ms, wall)

    def step_duration(self, batch: Sequence[SimRequest]) -> float:
        """Simulated ms of the next verify step of ``batch`` (draws the step noise)."""
        state = self._faults.state
        noise = self._physics.noise if state.noise is None else state.noise
        context = sum(r.context for r in batch)
        # The slowest member's per-request factor sets the pace of the whole batch.
        factor = max((r.step_factor for r in batch), default=1.0)
        # One verify forward pass serves the whole running batch, as in SGLang, whose
        # scheduler (sglang/srt/managers/scheduler.py, get_next_batch_to_run) decodes every
        # running request together and whose EAGLE worker (sglang/srt/speculative/
        # eagle_worker.py, verify) verifies bs × num_draft_tokens tokens in one pass with
        # per-request accept lengths: the step's cost grows with the batch (c_ms per extra
        # request, and the batch's summed context), each request's acceptance does not.
        # batch_step_mult (faults.py) is a regression in batched steps only.
        factor *= 1.0 + state.batch_step_mult * max(len(batch) - 1, 0)
        return step_ms(self._physics, context, len(batch), self._noise.normal(), noise,
                       state.step_time_mult * factor, state.slope_mult)

    def apply_step(self, batch: Sequence[SimRequest], ms: float, wall: float) -> None:
        """Commit one verify step for every request of ``batch`` (the hot path; no waiting)."""
        context = sum(r.context for r in batch)
        acceptance_mult = self._faults.state.acceptance_mult
        committed = 0
        for request in batch:
            committed += self._advance(request, ms, acceptance_mult)
        report = StepReport(batch, committed, wall, context, len(self._waiting))
        for observer in self.observers:
            observer.on_step(report)
        for request in batch:
            if request.finished and request.finish_reason is None:
                self._finish(request)
        self._running = [r for r in self._running if not r.finished]

    def _advance(self, request: SimRequest, ms: float, acceptance_mult: float) -> int:
        if request.finish_reason is not None:
            return 0  # aborted while the step ran
        late = self._faults.state.late_factor(len(request.output_ids))  # faults.py
        mean = mean_commit(self._physics, request.window, acceptance_mult * late)
        before = len(request.output_ids)
        copy = is_repetitive(self._physics, request.window)
        request.commit(request.commit_draw.draw(mean, request.remaining), copy)
        count = len(request.output_ids) - before
        request.step_ms.append(ms)
        request.commits.append(count)
        self._lifetime[0] += count
        self._lifetime[1] += 1
        if request.updates is not None:
            request.updates.put_nowait(len(request.output_ids))
        return count

    def _finish(self, request: SimRequest) -> None:
        request.finish(self._gpu_clock(), time.time())
        for observer in self.observers:
            observer.on_finish(request)
        if request.background and self._background_target > 0:
            active = sum(1 for r in self._active() if r.background and not r.finished)
            if active < self._background_target:
                self._spawn_background()

    def _spawn_background(self) -> None:
        draws = Draws([self._seed, 3, self._background_started])
        words = [self.vocab[int(draws.uniform() * len(self.vocab))] for _ in range(255)]
        room = self.profile.context_length - _BACKGROUND_PROMPT
        spec = GenerationSpec(
            prompt_ids=[BOS_ID, *words],
            max_new_tokens=max(1, min(_BACKGROUND_OUTPUT, room)),
            ignore_eos=True,
        )
        self.submit(spec, background=True)


def _cache_key(spec: GenerationSpec) -> list[int]:
    """The prefix-cache key of a prompt: its ids, behind a salt token when the request carries
    vLLM's ``cache_salt`` (negative: no real id), so salted prompts share only with their salt."""
    if spec.cache_salt is None:
        return spec.prompt_ids
    salt = -1 - int.from_bytes(hashlib.sha256(spec.cache_salt.encode()).digest()[:6], "big")
    return [salt, *spec.prompt_ids]
