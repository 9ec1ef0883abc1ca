"""Samples (one request each) and measurements (one case), and the loop that takes them."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from . import acceptance, determinism, guard, llamacpp, reuse, routes
from .acceptance import LogSource, MetricsSnapshot
from .client import Client, TimeoutPolicy
from .errors import (
    AcceptanceUnavailable,
    ConfigError,
    IgnoreEosNotHonoured,
    MalformedResponse,
    UnstableMeasurement,
)
from .probe import ServerInfo
from .repeats import RepeatDecision, decide_repeats
from .routes import Completion
from .stats import UNSTABLE_REL_MAD, Summary, summarize
from .workload import Case, Prompts

# The metrics every measurement summarises; names as in DESIGN.md.
METRICS = ("tok_s", "decode_tok_s", "step_ms", "avg_commit")


@dataclass(frozen=True)
class Sample:
    """One non-streaming request and every raw number it gave.

    Times are in the server's own time base: for the simulator, wall time divided
    by its announced ``sim_time_scale``, so figures read like the real box's.
    """

    case_id: str
    repeat: int
    warmup: bool
    prompt_tokens: int
    completion_tokens: int
    wall_s: float
    verify_steps: int | None
    decode_s: float | None
    ttft_s: float | None
    server_accept_length: float | None
    cached_tokens: int | None
    acceptance_source: str
    finish_reason: str
    retries: int = 0
    raw: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def tok_s(self) -> float:
        """N / T: what the user feels."""
        return self.completion_tokens / self.wall_s

    @property
    def avg_commit(self) -> float | None:
        """(N − 1) / S: tokens committed per verify step (the first comes from prefill)."""
        if not self.verify_steps:
            return None
        return (self.completion_tokens - 1) / self.verify_steps

    @property
    def step_ms(self) -> float | None:
        """T_d / S: one verify forward pass, in milliseconds."""
        if not self.verify_steps or self.decode_s is None:
            return None
        return 1000.0 * self.decode_s / self.verify_steps

    @property
    def decode_tok_s(self) -> float | None:
        """(N − 1) / T_d."""
        if not self.decode_s:
            return None
        return (self.completion_tokens - 1) / self.decode_s

    def metric(self, name: str) -> float | None:
        value: float | None = getattr(self, name)
        return value

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "raw"}
        out.update({m: self.metric(m) for m in METRICS})
        out["raw"] = self.raw
        return out


@dataclass(frozen=True)
class Measurement:
    """All measured samples of one case and their robust summaries."""

    case: Case
    samples: tuple[Sample, ...]
    decode_method: str
    acceptance_source: str

    @property
    def measured(self) -> tuple[Sample, ...]:
        return tuple(s for s in self.samples if not s.warmup)

    def summary(self, metric: str) -> Summary | None:
        """Median/MAD of ``metric`` over the non-warm-up samples, or None if unavailable."""
        values = [v for s in self.measured if (v := s.metric(metric)) is not None]
        return summarize(values) if values else None

    def summaries(self) -> dict[str, Summary]:
        return {m: s for m in METRICS if (s := self.summary(m)) is not None}

    @property
    def mean_context(self) -> float:
        """Average context over a request's decode: prompt plus half the output."""
        return self.case.context + self.case.output_tokens / 2

    def to_dict(self) -> dict[str, Any]:
        return {
            "case": self.case.to_dict(),
            "decode_method": self.decode_method,
            "acceptance_source": self.acceptance_source,
            "summaries": {k: v.to_dict() for k, v in self.summaries().items()},
            "samples": [s.to_dict() for s in self.samples],
        }


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

    def reproduce_prompts(self, seed: str) -> reuse.PromptPlan:
        """Derive every measured prompt from ``seed`` where the server can bypass its prefix
        cache for a repeated prompt (else prompts keep random nonces); returns the plan."""
        self.prompt_plan = reuse.plan_for(self.client, self.server.flavour, seed)
        return self.prompt_plan

    def measure(self, case: Case, decide: Decide | None = None) -> Measurement:
        """Warm up, then repeat until ``decide`` says stop (bounded by max_repeats).

        Without ``decide``, repeats stop once the minimum is taken and every metric is
        stable; a case still too noisy at the bound raises UnstableMeasurement.
        """
        decide = decide or self._stable_enough
        samples = []
        for i in range(self.run.warmup):
            samples.append(self.sample(case, -1 - i, warmup=True))
            self.on_sample(samples[-1], self.run.repeats)
        measured: list[Sample] = []
        while True:
            measured.append(self.sample(case, len(measured), warmup=False))
            self.on_sample(measured[-1], self.run.repeats)
            if len(measured) == 1:  # the warm-ups re-sent this prompt: does it repeat?
                self.deterministic[case.id] = determinism.deterministic(samples + measured)
            if len(measured) < self.run.repeats:
                continue
            decision = decide(sample_values(measured))
            if decision.action == "unstable":
                raise UnstableMeasurement(f"{case.id}: {decision.reason}")
            if decision.action == "stop" or len(measured) >= self.run.max_repeats:
                break
        return self.finish(case, samples + measured)

    def finish(self, case: Case, samples: Sequence[Sample]) -> Measurement:
        """The measurement of ``case`` made of ``samples`` (warm-ups included)."""
        return Measurement(case, tuple(samples), self._decode_method(),
                           self.server.acceptance_source)

    def _stable_enough(self, values: Mapping[str, Sequence[float]]) -> RepeatDecision:
        return decide_repeats(values, None, {}, min_repeats=self.run.repeats,
                              max_spread=self.run.max_spread,
                              max_repeats=self.run.max_repeats)

    def _decode_method(self) -> str:
        return "server-timings" if self.server.server_timings else "two-point"

    def sample(self, case: Case, repeat: int, *, warmup: bool) -> Sample:
        """One clean sample; contaminated attempts are discarded and retried (bounded)."""
        sample, discarded = guard.retry_clean(
            case.id, lambda: self._attempt(case, repeat, warmup), self.run.guard_retries)
        if discarded:
            sample.raw["discarded_attempts"] = discarded
        return sample

    def _attempt(self, case: Case, repeat: int, warmup: bool) -> Sample:
        before = self.traffic.before()
        comp, wall_s, retries, started = self._generate(case, case.output_tokens, repeat)
        used = self.last_prompt
        after: MetricsSnapshot | None
        if before is not None and before.requests is None and before.progress is not None:
            after = self.traffic.after_counted(before, comp.completion_tokens)  # llama.cpp
        else:
            after = self.traffic.after(before, sent=1 + retries,
                                       exact=self.server.acceptance_source == "metrics",
                                       prompt_tokens=comp.prompt_tokens,
                                       completion_tokens=comp.completion_tokens)
        self._validate(case, comp)
        checks = self._checks(case, comp)
        steps = self._steps(comp, before, after, started)
        decode_s = self._decode_s(comp, case, steps, wall_s)
        scale = self.server.time_scale
        return Sample(
            case_id=case.id, repeat=repeat, warmup=warmup, prompt_tokens=comp.prompt_tokens,
            completion_tokens=comp.completion_tokens, wall_s=wall_s / scale,
            verify_steps=steps, decode_s=None if decode_s is None else decode_s / scale,
            ttft_s=None if comp.ttft_s is None else comp.ttft_s / scale,
            server_accept_length=comp.accept_length, cached_tokens=comp.cached_tokens,
            acceptance_source=self.server.acceptance_source, finish_reason=comp.finish,
            retries=retries, raw={"e2e_s": comp.e2e_s, "wall_s_unscaled": wall_s,
                                  "histogram_sum": comp.histogram_sum, **checks,
                                  **(used.raw(comp.text, comp.ids) if used else {})})

    def _checks(self, case: Case, comp: Completion) -> dict[str, Any]:
        """Prefix-cache and degenerate-output guards (see guard.py); flags for Sample.raw."""
        if self._shared_prefix is None:
            self._shared_prefix = guard.shared_prefix(self.prompts.tokenizer)
        flags = guard.check_prefix_cache(case.id, comp.cached_tokens, comp.prompt_tokens,
                                         self._shared_prefix)
        if case.text_class not in self._class_norms:
            self._class_norms[case.text_class] = guard.class_norm(
                self.prompts.classes[case.text_class])
        units = guard.output_units(comp.text, comp.ids)
        return {**flags, **guard.check_output(case.id, units, self._class_norms[case.text_class])}

    def _generate(self, case: Case, max_tokens: int, repeat: int | None = None
                  ) -> tuple[Completion, float, int, datetime]:
        api = self.server.api
        # On the chat route the server adds its template: build the content that much
        # shorter, so the server decodes at exactly the case's context.
        body_case = replace(case, context=case.context - self._chat_overhead(case))

        def fresh_body() -> dict[str, Any]:  # a flush or a new nonce for every attempt
            nonce, kept = self.prompt_plan.nonce(self.client, case.id, repeat)
            prompt = self.prompts.build(body_case, nonce,
                                        want_ids=api in ("sglang", "llamacpp"))
            self.last_prompt = reuse.PromptUsed(repeat, kept, reuse.prompt_digest(prompt))
            body = routes.request_body(api, prompt, max_tokens, self.server.model,
                                       nonce.strip(": "))[1]
            if self.server.flavour == "llamacpp" and api != "llamacpp":
                body = llamacpp.openai_extras(body)
            return body

        started = datetime.now()
        kind = f"{case.id}/{max_tokens}"
        timeout_s, basis = self.timeouts.seconds(kind)
        reply = self.client.post_json(routes.PATHS[api], fresh_body, timeout_s=timeout_s,
                                      timeout_basis=basis)
        self.timeouts.observe(kind, reply.elapsed_s)
        return routes.parse(self.server.api, reply.data), reply.elapsed_s, reply.retries, started

    def template_tokens(self, case: Case, options: routes.RouteOptions | None = None) -> int:
        """Tokens the chat route adds around the content (its template, a tool declaration),
        for chat requests with ``options``. Measured once per kind with a short one-token
        request; chat prompts are then built that much shorter, so the server decodes at
        exactly the case's context."""
        options = options or routes.RouteOptions()
        key = (options.separate_reasoning, bool(options.tools))
        if key not in self._template_tokens:
            probe = replace(case, context=min(case.context, 64))
            prompt = self.prompts.build(probe, guard.new_nonce(), want_ids=False)
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
                f"the {case.context}-token context: measure short contexts with --api sglang "
                "or openai, or raise --contexts.")
        return overhead

    def _validate(self, case: Case, comp: Completion) -> None:
        if comp.completion_tokens != case.output_tokens or comp.finish != "length":
            raise IgnoreEosNotHonoured(
                f"{case.id}: asked for exactly {case.output_tokens} tokens with ignore_eos, "
                f"got {comp.completion_tokens} (finish reason {comp.finish!r}): ignore_eos not "
                "honoured, so tok/s would be measured on a different length. Check that the "
                "server accepts ignore_eos on this route.", url=self.client.base_url)
        if self.prompts.tokenizer is None:
            # Calibrated prompts (no /tokenize): a token either way is the nonce's doing.
            if abs(comp.prompt_tokens - case.context) > max(2, case.context // 200):
                raise MalformedResponse(
                    f"{case.id}: the prompt was calibrated to {case.context} tokens but the "
                    f"server counted {comp.prompt_tokens}: its token counts are not stable; "
                    "enable the server's /tokenize route for exact prompts.")
        elif comp.prompt_tokens != case.context:
            raise MalformedResponse(
                f"{case.id}: the prompt was built to {case.context} tokens but the server "
                f"counted {comp.prompt_tokens}: its tokenizer and /tokenize disagree.")
        if comp.output_ids is not None and comp.output_ids != comp.completion_tokens:
            raise MalformedResponse(
                f"{case.id}: completion_tokens is {comp.completion_tokens} but output_ids has "
                f"{comp.output_ids} entries.")
        if comp.histogram_sum is not None and comp.verify_steps is not None \
                and comp.histogram_sum != comp.verify_steps:
            raise MalformedResponse(
                f"{case.id}: the accept histogram sums to {comp.histogram_sum} steps but "
                f"spec_verify_ct is {comp.verify_steps}: the server's spec fields disagree.")

    def _steps(self, comp: Completion, before: MetricsSnapshot | None,
               after: MetricsSnapshot | None, started: datetime) -> int | None:
        source = self.server.acceptance_source
        if source == "response":
            if comp.verify_steps is None:
                raise AcceptanceUnavailable(
                    "the response carries no spec_verify_ct although --acceptance-source "
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
        comp, short_s, _, started = self._generate(case, short)
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
        return acceptance.parse_metrics(self.client.get_text("/metrics", timeout_s=30))


def step_repeats(measurement: Measurement) -> list[float]:
    """The step times of a measurement's repeats (what a context fit weighs its point by)."""
    return [v for s in measurement.measured if (v := s.step_ms) is not None]


def sample_values(samples: Sequence[Sample]) -> dict[str, list[float]]:
    """Each metric's values over ``samples`` (metrics a sample lacks are left out)."""
    out: dict[str, list[float]] = {}
    for metric in METRICS:
        vals = [v for s in samples if (v := s.metric(metric)) is not None]
        if vals:
            out[metric] = vals
    return out
