"""The measuring loop: the :class:`Measurer` takes samples of cases, one request at a time
(:meth:`Measurer.attempt`, the one measured request every path takes; see attempt.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from ..core import stop
from ..core.errors import AcceptanceUnavailable, ConfigError, UnstableMeasurement
from ..core.stats import UNSTABLE_REL_MAD
from ..plan import nonce, reuse
from ..plan.workload import Case, Prompts
from ..servers import acceptance, llamacpp, routes, vllm
from ..servers.acceptance import LogSource, MetricsSnapshot
from ..servers.client import Client, TimeoutPolicy
from ..servers.messages import Completion
from ..servers.probe import ServerInfo
from . import determinism, guard
from .attempt import ReadTiming, Reply, Request, Timing, acceptance_shape, validate
from .repeats import RepeatDecision, decide_repeats
from .sample import (
    Measurement,
    Sample,
    limit_raw,
    sample_values,
)

__all__ = ["Decide", "Measurer", "RunConfig"]


# -- taking measurements ------------------------------------------------------------------------
@dataclass(frozen=True)
class RunConfig:
    """What the measuring loop needs from the settings."""

    repeats: int
    max_repeats: int
    warmup: int
    request_timeout: float
    max_spread: float = UNSTABLE_REL_MAD
    guard_retries: int = 3
    guard_wait_s: float = 5.0
    case_repeats: Mapping[str, int] = field(default_factory=dict)  # per case, instead of repeats
    # A warm-up's output length where the case decodes more (None: the case's own length).
    warmup_tokens: int | None = None

    def bounds(self, case_id: str) -> tuple[int, int]:
        """A case's fewest and most repeats: its own minimum where named, else the run's."""
        least = self.case_repeats.get(case_id, self.repeats)
        return least, max(least, self.max_repeats)


Decide = Callable[[Mapping[str, Sequence[float]]], RepeatDecision]


class Measurer:
    """Takes samples of cases against one probed server, one request at a time.

    Per request: check the server is idle (metrics), send one non-streaming fixed-length
    request, check exactly one request finished and the length was honoured, read the
    step count from the chosen acceptance source, convert times to the server's time base.
    """

    def __init__(self, client: Client, server: ServerInfo, prompts: Prompts,
                 run: RunConfig, *, log: LogSource | None = None,
                 on_sample: Callable[[Sample, int], None] | None = None) -> None:
        self.client = client
        self.server = server
        self.prompts = prompts
        self.run = run
        self.log = log
        self.on_sample = on_sample or (lambda s, total: None)
        self.traffic = guard.TrafficGuard(self._snapshot, wait_s=run.guard_wait_s)
        self.timeouts = TimeoutPolicy(run.request_timeout)
        self._class_norms: dict[str, float] = {}
        self._shared_prefix: int | None = None
        self._template_tokens: dict[tuple[bool, bool], int] = {}
        # Reproducible prompts (reuse.py): random nonces until a run sets a prompt seed.
        self.prompt_plan = reuse.PromptPlan()
        self.last_prompt: reuse.PromptUsed | None = None
        self.deterministic: dict[str, bool | None] = {}  # case id -> determinism.deterministic
        self.taken: dict[str, list[Sample]] = {}  # case id -> its samples so far (warm-ups too)
        self.metrics_text = ""  # the last /metrics scrape (paths read histogram sums off it)

    def reproduce_prompts(self, seed: str) -> reuse.PromptPlan:
        """Derive every measured prompt from ``seed`` where the server can bypass its prefix
        cache for a repeated prompt (else prompts keep random nonces); returns the plan."""
        self.prompt_plan = reuse.plan_for(self.client, self.server.flavour, seed,
                                          kind=self.server.kind)
        return self.prompt_plan

    def measure(self, case: Case, decide: Decide | None = None) -> Measurement:
        """Warm up, then repeat until ``decide`` says stop (bounded by max_repeats).

        Without ``decide``, repeats stop once the minimum is taken and every metric is
        stable; a case still too noisy at the bound raises UnstableMeasurement.
        """
        least, most = self.run.bounds(case.id)
        decide = decide or (lambda values: self._stable_enough(values, least, most))
        samples = []
        short = self.run.warmup_tokens
        warm = self.request(case, short) if short and short < case.output_tokens else None
        for i in range(self.run.warmup):
            samples.append(self.sample(case, -1 - i, warmup=True, request=warm))
            self.on_sample(samples[-1], least)
        measured: list[Sample] = []
        while True:
            measured.append(self.sample(case, len(measured), warmup=False))
            self.taken[case.id] = samples + measured
            self.on_sample(measured[-1], least)
            if len(measured) == 1:  # the warm-ups re-sent this prompt: does it repeat?
                # (None: no warm-up re-sent the whole request, so nothing was checked)
                self.deterministic[case.id] = determinism.deterministic(samples + measured)
            if len(measured) < least:
                continue
            decision = decide(sample_values(measured))
            if decision.action == "unstable":
                raise UnstableMeasurement(f"{case.id}: {decision.reason}")
            if decision.action == "stop" or len(measured) >= most:
                break
        return self.finish(case, samples + measured)

    def finish(self, case: Case, samples: Sequence[Sample]) -> Measurement:
        """The measurement of ``case`` made of ``samples`` (warm-ups included)."""
        return Measurement(case, tuple(samples), self._decode_method(),
                           self.server.acceptance_source)

    def _stable_enough(self, values: Mapping[str, Sequence[float]], least: int,
                       most: int) -> RepeatDecision:
        return decide_repeats(values, None, {}, min_repeats=least,
                              max_spread=self.run.max_spread, max_repeats=most)

    def _decode_method(self) -> str:
        return "server-timings" if self.server.server_timings else "two-point"

    def check_fits(self, case: Case, request: Request, flag: str = "--specperf-contexts") -> None:
        """A case whose prompt and output exceed the server's context length is a usage error,
        before its first request (only the cases a run measures: a concurrency run checks
        its own case, not the main matrix)."""
        limit = self.server.max_model_len
        worst = case.context + request.max_tokens
        if limit is not None and worst > limit:
            raise ConfigError(
                f"context {case.context} + {request.max_tokens} output tokens = {worst} exceeds "
                f"the server's context length {limit}: lower {flag} or --specperf-output-tokens.")

    def request(self, case: Case, max_tokens: int | None = None) -> Request:
        """The main job's request of ``case``: the probed route, plain."""
        return Request(self.server.api, max_tokens or case.output_tokens,
                       template_tokens=self._chat_overhead(case))

    def sample(self, case: Case, repeat: int, *, warmup: bool, request: Request | None = None,
               timing: ReadTiming | None = None) -> Sample:
        """One clean sample; contaminated attempts are discarded and retried (bounded)."""
        stop.check()  # a stop signal swallowed by a finalizer ends the run here
        asked = request or self.request(case)
        sample, discarded = guard.retry_clean(
            asked.where(case), lambda: self.attempt(case, repeat, warmup, asked, timing),
            self.run.guard_retries)
        if discarded:
            sample.raw["discarded_attempts"] = discarded
        return sample

    def attempt(self, case: Case, repeat: int, warmup: bool, request: Request | None = None,
                timing: ReadTiming | None = None) -> Sample:
        """The one measured request every path takes (see attempt.py): build, guard, send,
        validate, check the output, sample. ``request`` and ``timing`` are what a path
        varies; without them, the main job's request and step/time reading."""
        request = request or self.request(case)
        self.check_fits(case, request)
        before = self.traffic.before()
        before_text = self.metrics_text
        comp, wall_s, retries, started, chunks = self._send(case, request, repeat)
        used = self.last_prompt
        after = self._after(before, request, comp, retries)
        validate(case, request, comp, calibrated=self.prompts.tokenizer is None,
                 url=self.client.base_url)
        checks = self._checks(case, comp, request)
        reply = Reply(comp, wall_s, retries, started, before, after, before_text,
                      self.metrics_text if after is not None else "", chunks)
        got = (timing or self._timing)(case, reply)
        scale = self.server.time_scale
        return Sample(
            case_id=case.id, repeat=repeat, warmup=warmup, prompt_tokens=comp.prompt_tokens,
            completion_tokens=comp.completion_tokens, wall_s=wall_s / scale,
            verify_steps=got.steps,
            decode_s=None if got.decode_s is None else got.decode_s / scale,
            ttft_s=None if got.ttft_s is None else got.ttft_s / scale,
            server_accept_length=comp.accept_length, cached_tokens=comp.cached_tokens,
            acceptance_source=got.acceptance_source, finish_reason=comp.finish,
            retries=retries, raw={"wall_s_unscaled": wall_s,
                                  **limit_raw(self.server.fingerprint), **got.raw, **checks,
                                  **acceptance_shape(reply, request.where(case)),
                                  **(used.raw(comp.text, comp.ids) if used else {})})

    def _after(self, before: MetricsSnapshot | None, request: Request, comp: Completion,
               retries: int) -> MetricsSnapshot | None:
        """The traffic guard's check that only our request ran (raises Disturbed)."""
        if before is not None and before.requests is None and before.progress is not None:
            return self.traffic.after_counted(before, comp.completion_tokens)  # llama.cpp
        return self.traffic.after(
            before, sent=1 + retries,
            exact=request.bracket_measures(self.server.acceptance_source, comp),
            prompt_tokens=comp.prompt_tokens, completion_tokens=comp.completion_tokens)

    def _timing(self, case: Case, reply: Reply) -> Timing:
        """The main job's reading: steps from the acceptance source, decode time from the
        server's timings or two points."""
        comp = reply.comp
        extra: dict[str, Any] = {}
        if self.server.kind == "vllm" and self.server.acceptance_source in ("response",
                                                                           "metrics"):
            steps = self.vllm_steps(case, reply, extra)
        else:
            steps = self._steps(comp, reply.before, reply.after, reply.started)
        decode_s = self._decode_s(comp, case, steps, reply.wall_s)
        return Timing(steps, decode_s, comp.ttft_s, self.server.acceptance_source,
                      {"e2e_s": comp.e2e_s, "histogram_sum": comp.histogram_sum, **extra})

    def vllm_steps(self, case: Case, reply: Reply, extra: dict[str, Any]) -> int | None:
        """vLLM's S: its iteration counters, else the response's estimate (servers/vllm.py:
        num_spec_steps counts only the steps that drafted), checked against [1, k + 1]."""
        comp = reply.comp
        if self.server.acceptance_source == "response" and comp.spec is None:
            return self._steps(comp, reply.before, reply.after, reply.started)  # raises
        k = self.server.fingerprint.get("num_speculative_tokens")
        counted = vllm.count_steps(comp, reply.before_text, reply.after_text,
                                   spec_tokens=k if isinstance(k, int) else None,
                                   where=case.id)
        extra.update(counted.raw())
        if counted.steps is None:
            return self._steps(comp, reply.before, reply.after, reply.started)
        return counted.steps

    def _checks(self, case: Case, comp: Completion, request: Request) -> dict[str, Any]:
        """Prefix-cache and degenerate-output guards (see guard.py); flags for Sample.raw."""
        if self._shared_prefix is None:
            self._shared_prefix = nonce.shared_prefix(self.prompts.tokenizer)
        # The chat template and tool declaration precede the nonce: cacheable by design.
        where = request.where(case)  # a path's errors name the path and its route
        flags = guard.check_prefix_cache(where, comp.cached_tokens, comp.prompt_tokens,
                                         self._shared_prefix + request.template_tokens)
        if case.text_class not in self._class_norms:
            self._class_norms[case.text_class] = guard.class_norm(
                self.prompts.classes[case.text_class])
        # The thinking a reasoning parser split out is output too: a loop there is as
        # easy to draft as one in the answer.
        text = " ".join(t for t in (comp.reasoning, comp.text) if t)
        units = guard.output_units(text, comp.ids)
        return {**flags, **guard.check_output(where, units, self._class_norms[case.text_class])}

    def _send(self, case: Case, request: Request, repeat: int | None
              ) -> tuple[Completion, float, int, datetime, tuple[routes.Chunk, ...] | None]:
        """Build a fresh body per attempt (a flush or a new nonce each) and send it."""
        api = request.api
        # The server adds its template: build the content that much shorter, so the server
        # decodes at exactly the case's context.
        body_case = replace(case, context=case.context - request.template_tokens)

        def fresh_body() -> dict[str, Any]:
            nonce, kept = self.prompt_plan.nonce(
                self.client, case.id, repeat if request.reproducible else None)
            prompt = self.prompts.build(body_case, nonce,
                                        want_ids=api in ("sglang", "llamacpp"))
            self.last_prompt = reuse.PromptUsed(repeat, kept, reuse.prompt_digest(prompt))
            body = routes.request_body(api, prompt, request.max_tokens, self.server.model,
                                       nonce.strip(": "), request.options)[1]
            if self.server.flavour == "llamacpp" and api != "llamacpp":
                body = llamacpp.openai_extras(body)
            if self.server.kind == "vllm" and self.prompt_plan.policy == "per-request":
                body = vllm.with_cache_salt(body)  # the repeated prompt misses the cache
            return body

        started = datetime.now()
        kind = f"{case.id}/{request.label or request.max_tokens}"
        timeout_s, basis = self.timeouts.seconds(kind)
        if request.options.stream:
            streamed = self.client.stream_json(routes.PATHS[api], fresh_body,
                                               timeout_s=timeout_s, timeout_basis=basis)
            self.timeouts.observe(kind, streamed.elapsed_s)
            parsed = routes.parse_stream(api, streamed.events)
            return parsed.completion, streamed.elapsed_s, streamed.retries, started, \
                parsed.chunks
        reply = self.client.post_json(routes.PATHS[api], fresh_body, timeout_s=timeout_s,
                                      timeout_basis=basis)
        self.timeouts.observe(kind, reply.elapsed_s)
        return routes.parse(api, reply.data), reply.elapsed_s, reply.retries, started, None

    def template_tokens(self, case: Case, options: routes.RouteOptions | None = None) -> int:
        """Tokens the chat route adds around the content (its template, a tool declaration),
        for chat requests with ``options``. Measured once per kind with a short one-token
        request; chat prompts are then built that much shorter, so the server decodes at
        exactly the case's context."""
        options = options or routes.RouteOptions()
        key = (options.separate_reasoning, bool(options.tools))
        if key not in self._template_tokens:
            probe = replace(case, context=min(case.context, 64))
            prompt = self.prompts.build(probe, nonce.new_nonce(), want_ids=False)
            plain = replace(options, stream=False, meta_info=False)
            path, body = routes.request_body("openai-chat", prompt, 1, self.server.model,
                                             "template", plain)
            reply = self.client.post_json(path, body, timeout_s=self.run.request_timeout)
            counted = routes.parse("openai-chat", reply.data).prompt_tokens
            self._template_tokens[key] = counted - (prompt.tokens if prompt.tokens > 0
                                                    else probe.context)
        return self._template_tokens[key]

    def _chat_overhead(self, case: Case) -> int:
        """The template's tokens on the measured chat route (0 elsewhere); a context the
        template alone fills is a ConfigError."""
        if self.server.api != "openai-chat":
            return 0
        overhead = self.template_tokens(case)
        if case.context - overhead < 8:
            raise ConfigError(
                f"{case.id}: the chat template alone takes {overhead} tokens of "
                f"the {case.context}-token context: measure short contexts with "
                "--specperf-api sglang or openai, or raise --specperf-contexts.")
        return overhead

    def _steps(self, comp: Completion, before: MetricsSnapshot | None,
               after: MetricsSnapshot | None, started: datetime) -> int | None:
        source = self.server.acceptance_source
        if source == "response":
            if comp.verify_steps is None:
                raise AcceptanceUnavailable(
                    "the response carries no spec_verify_ct although --specperf-acceptance-source "
                    "response is in use; the server stopped returning spec fields.")
            return comp.verify_steps
        if source == "metrics" and before is not None and after is not None:
            if self.server.flavour == "llamacpp":
                return llamacpp.steps_from_metrics(before, after, comp.completion_tokens)
            return acceptance.steps_from_metrics(before, after)
        if source == "log" and self.log is not None and self.server.flavour == "llamacpp":
            return llamacpp.steps_from_log(self.log.lines(started), comp.completion_tokens)
        if source == "log" and self.log is not None:
            windows = self.log.read(started)
            commit = acceptance.avg_commit_from_windows(windows, started, datetime.now())
            return None if commit is None else max(1, round((comp.completion_tokens - 1) / commit))
        return None

    def _decode_s(self, comp: Completion, case: Case, steps: int | None,
                  wall_s: float) -> float | None:
        if comp.e2e_s is not None and comp.ttft_s is not None:
            return comp.e2e_s - comp.ttft_s
        if steps is None:
            return None
        return self._two_point(case, steps, wall_s)

    def _two_point(self, case: Case, steps: int, wall_s: float) -> float | None:
        """No server timings: a short request on the same prompt length gives prefill."""
        short = max(2, case.output_tokens // 8)
        # With counters as the source the short request needs its own bracket (vLLM without
        # per-request metrics has only these), or step time could not be measured at all.
        before = self._snapshot() if self.server.acceptance_source == "metrics" else None
        comp, short_s, _, started, _ = self._send(case, self.request(case, short), None)
        after = self._snapshot() if before is not None else None
        short_steps = self._steps(comp, before, after, started) if \
            self.server.acceptance_source != "metrics" or after is not None else None
        if short_steps is None or steps <= short_steps:
            return None
        step_s = (wall_s - short_s) / (steps - short_steps)
        prefill_s = short_s - short_steps * step_s
        return wall_s - prefill_s

    def _snapshot(self) -> MetricsSnapshot | None:
        if not self.server.metrics:
            return None
        self.metrics_text = self.client.get_text("/metrics", timeout_s=30)
        return acceptance.parse_metrics(self.metrics_text)
