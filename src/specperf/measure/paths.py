"""One case on several request paths, interleaved: the parser and streaming comparisons.

A path is a route plus how it is asked: ``native`` (``/generate``; ``/v1/completions`` on a
server without the native API) is the reference; ``chat`` is ``/v1/chat/completions`` with
the deployed parsers engaged (``separate_reasoning`` when ``/model_info`` names a reasoning
parser, one ``tools`` entry when it names a tool-call parser) and ``return_meta_info``;
``native stream`` and ``chat stream`` are the same, streamed.

Lifecycle (:class:`PathSampler`): warm-up requests on every path, then rounds of one
request per path in a fixed order (A B A B …) until each path has ``--specperf-repeats`` samples
and its server-side figures are stable (bounded by ``--specperf-max-repeats``; still noisy →
:class:`~specperf.core.errors.UnstableMeasurement`). Interleaving puts any drift of the server
(clocks, heat, a neighbour) on every path alike, so the comparison needs no baseline.
Every request is the measurer's one attempt (:meth:`specperf.measure.loop.Measurer.attempt`),
with the main job's guards: an idle server before, exactly our request after, ignore_eos
honoured, no prefix cache past the nonce, no output collapsed into a loop. A path adds only
its :class:`~specperf.measure.attempt.Request` and how its reply is read (:meth:`PathSampler.read`).

Server timings (decode time T_d = e2e − first-token latency) come from the response's
``meta_info`` (native, and chat with ``return_meta_info``); where a route has none (chat
streams: SGLang rejects ``return_meta_info`` there) from the ``/metrics`` latency
histograms' sums bracketing the one request; else they are unknown and said so. A /metrics
text that is not Prometheus exposition is a MalformedResponse, as everywhere it is read.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import (
    BadStatus,
    ConfigError,
    EndpointError,
    MalformedResponse,
    UnstableMeasurement,
)
from ..core.stats import Summary, summarize
from ..plan.workload import Case
from ..servers import acceptance, routes
from ..servers.acceptance import MetricsSnapshot
from ..servers.client import Client
from ..servers.messages import Completion, RouteOptions
from ..servers.streaming import stream_stats
from .attempt import Reply, Request, Timing
from .repeats import decide_repeats
from .sample import Measurement, Sample
from .session import PerfSession

# The one tool sent on the chat route: the tool-call parser is engaged by a request that
# carries tools; tool_choice stays "auto" ("required" would constrain decoding).
TOOL: dict[str, Any] = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}
_HISTOGRAM_SUMS = {
    "e2e": ("sglang:e2e_request_latency_seconds_sum", "vllm:e2e_request_latency_seconds_sum"),
    "ttft": ("sglang:time_to_first_token_seconds_sum", "vllm:time_to_first_token_seconds_sum"),
}
_HISTOGRAM_NAMES = frozenset(name for names in _HISTOGRAM_SUMS.values() for name in names)


@dataclass(frozen=True)
class Parsers:
    """The parsers the server says it runs (``/model_info``), None when it names none."""

    reasoning: str | None = None
    tool_call: str | None = None

    @property
    def any(self) -> bool:
        return bool(self.reasoning or self.tool_call)

    def describe(self) -> str:
        parts = [f"reasoning parser {self.reasoning}" if self.reasoning else "",
                 f"tool-call parser {self.tool_call}" if self.tool_call else ""]
        return " and ".join(p for p in parts if p) or "no parsers"


def deployed_parsers(client: Client) -> Parsers:
    """The server's reasoning and tool-call parsers from /model_info (old: /get_model_info)."""
    for path in ("/model_info", "/get_model_info"):
        try:
            info = client.get_json(path, timeout_s=30)
        except (BadStatus, MalformedResponse):
            continue
        if isinstance(info, Mapping):
            return Parsers(_name(info.get("reasoning_parser")), _name(info.get("tool_call_parser")))
    return Parsers()


def _name(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True)
class Path:
    """A route and its request options, named as reports show it."""

    name: str
    api: str
    options: RouteOptions = RouteOptions()

    @property
    def chat(self) -> bool:
        return self.api == "openai-chat"


def native_path(server_api: str, *, stream: bool = False) -> Path:
    """The reference route: /generate on SGLang, else /v1/completions (no parser runs)."""
    api = "sglang" if server_api == "sglang" else "openai"
    return Path("native stream" if stream else "native", api, RouteOptions(stream=stream))


def parser_pair(server_api: str, parsers: Parsers, *, stream: bool = False
                ) -> tuple[Path, Path]:
    """Native and chat route, both streamed or both not: the parser comparison."""
    return native_path(server_api, stream=stream), chat_path(parsers, stream=stream)


def stream_pair(server_api: str) -> tuple[Path, Path]:
    """The native route unstreamed and streamed: the streaming comparison."""
    return native_path(server_api), native_path(server_api, stream=True)


def chat_path(parsers: Parsers, *, stream: bool = False) -> Path:
    """/v1/chat/completions with every deployed parser engaged."""
    options = RouteOptions(stream=stream, separate_reasoning=bool(parsers.reasoning),
                           tools=(TOOL,) if parsers.tool_call else (), meta_info=not stream)
    return Path("chat stream" if stream else "chat", "openai-chat", options)


@dataclass(frozen=True)
class PathRun:
    """Every path's measurement of one case, and the parsers that were engaged."""

    case: Case
    paths: tuple[Path, ...]
    measurements: dict[str, Measurement]
    parsers: Parsers

    def figures(self, name: str) -> Figures:
        return figures(self.measurements[name], name)

    def to_dict(self) -> dict[str, Any]:
        return {"case": self.case.to_dict(), "parsers": {"reasoning": self.parsers.reasoning,
                                                        "tool_call": self.parsers.tool_call},
                "paths": {p.name: {"api": p.api, "route": routes.PATHS[p.api],
                                   "stream": p.options.stream,
                                   # The medians the verdicts judged: the report shows these.
                                   "figures": self.figures(p.name).values,
                                   "measurement": self.measurements[p.name].to_dict()}
                          for p in self.paths}}


class PathSampler:
    """Takes interleaved samples of a case on several paths (lifecycle: module docstring)."""

    def __init__(self, session: PerfSession, parsers: Parsers) -> None:
        session.start()
        assert session.measurer is not None and session.server is not None
        self.session = session
        self.measurer = session.measurer
        self.server = session.server
        self.client = self.measurer.client
        self.parsers = parsers
        self.run = self.measurer.run
        self._runs: dict[tuple[str, tuple[str, ...]], PathRun] = {}

    def measure_once(self, case: Case, paths: Sequence[Path],
                     decided: Callable[[PathRun], bool] | None = None) -> PathRun:
        """:meth:`measure`, remembered per case and paths (tests sharing it measure once)."""
        key = (case.id, tuple(p.name for p in paths))
        if key not in self._runs:
            self._runs[key] = self.measure(case, paths, decided)
        return self._runs[key]

    def measure(self, case: Case, paths: Sequence[Path],
                decided: Callable[[PathRun], bool] | None = None) -> PathRun:
        """Warm up every path, then alternate them until each is measured and stable and, with
        ``decided`` (the comparison's judge: False while its verdict is undetermined), until
        the comparison is decided — up to ``max_repeats`` rounds either way: a comparison
        whose interval straddles its tolerance after the minimum repeats is answered with
        more requests, not left undetermined."""
        with self.session.case_lock():  # xdist workers: one case at a time per endpoint
            found: dict[str, list[Sample]] = {p.name: [] for p in paths}
            for i in range(self.run.warmup):
                for path in paths:
                    found[path.name].append(self.sample(case, path, -1 - i, warmup=True))
            rounds = 0
            while rounds < self.run.max_repeats:
                for path in paths:
                    found[path.name].append(self.sample(case, path, rounds, warmup=False))
                rounds += 1
                if rounds >= self.run.repeats and self._stable(case, paths, found, rounds) \
                        and (decided is None or decided(self._run(case, paths, found))):
                    break
        return self._run(case, paths, found)

    def _run(self, case: Case, paths: Sequence[Path],
             found: Mapping[str, list[Sample]]) -> PathRun:
        source = self.server.acceptance_source
        return PathRun(case, tuple(paths), {
            p.name: Measurement(case, tuple(found[p.name]), "server-timings", source)
            for p in paths}, self.parsers)

    def _stable(self, case: Case, paths: Sequence[Path], found: Mapping[str, list[Sample]],
                rounds: int) -> bool:
        for path in paths:
            measured = [s for s in found[path.name] if not s.warmup]
            # A stream's client-side rate is what is being judged, not a reason to repeat.
            metrics = ("decode_tok_s", "step_ms", "avg_commit") if path.options.stream \
                else ("tok_s", "decode_tok_s", "step_ms", "avg_commit")
            values = {m: [v for s in measured if (v := s.metric(m)) is not None]
                      for m in metrics}
            decision = decide_repeats({m: v for m, v in values.items() if v}, None, {},
                                      min_repeats=self.run.repeats,
                                      max_repeats=self.run.max_repeats,
                                      max_spread=self.run.max_spread)
            if decision.action == "unstable":
                raise UnstableMeasurement(f"{case.id} ({path.name}): {decision.reason}")
            if decision.action == "more" and rounds < self.run.max_repeats:
                return False
        return True

    # -- one request: the measurer's attempt, with this path's request and reading --------
    def sample(self, case: Case, path: Path, repeat: int, *, warmup: bool) -> Sample:
        """One clean sample of ``case`` on ``path``: :meth:`Measurer.sample` with this path's
        request and reading."""
        return self.measurer.sample(case, repeat, warmup=warmup,
                                    request=self.request(case, path),
                                    timing=lambda c, reply: self.read(c, path, reply))

    def request(self, case: Case, path: Path) -> Request:
        """What ``path`` sends for ``case``: its route and options, a random nonce, steps from
        the response (else the /metrics bracket)."""
        return Request(path.api, case.output_tokens, path.options, label=path.name,
                       template_tokens=self._overhead(case, path), reproducible=False,
                       steps_from="response")

    def read(self, case: Case, path: Path, reply: Reply) -> Timing:
        """Steps, server times, stream figures and parser checks of one path's reply."""
        comp, scale = reply.comp, self.server.time_scale
        e2e, ttft, timings_from = _timings(comp, reply.before_text, reply.after_text)
        raw: dict[str, Any] = {"path": path.name, "timings_from": timings_from,
                               "template_tokens": self._overhead(case, path)}
        if self.server.kind == "vllm":  # num_spec_steps counts only drafting steps
            steps = self.measurer.vllm_steps(case, reply, raw)
        else:
            steps = comp.verify_steps if comp.verify_steps is not None else \
                _metric_steps(reply.before, reply.after)
        if e2e is not None:
            raw["e2e_s"] = e2e / scale
            raw["post_ms"] = 1000.0 * (reply.wall_s - e2e) / scale
        if reply.chunks is not None:
            raw["stream"] = stream_stats(reply.chunks, comp.completion_tokens, steps,
                                         scale).to_dict()
        if path.chat:
            raw["parser"] = parser_check(self.parsers, path, comp)
        return Timing(steps, None if e2e is None or ttft is None else e2e - ttft, ttft,
                      "response" if comp.verify_steps is not None else "metrics", raw)

    def _overhead(self, case: Case, path: Path) -> int:
        """Tokens the chat template and tool declaration add, so the server sees ``context``.

        Measured once per kind of chat request with a one-token generation; the chat
        prompts are then built that much shorter, so both routes decode at equal context.
        """
        if not path.chat:
            return 0
        overhead = self.measurer.template_tokens(case, path.options)
        if case.context - overhead < max(64, overhead):
            raise ConfigError(
                f"{case.id}: the chat template and tool declaration take {overhead} tokens, "
                f"too much of a {case.context}-token context to compare the chat route with "
                "the native one at equal context: measure parser cases at a larger context.")
        return overhead


def _timings(comp: Completion, before_text: str, after_text: str
             ) -> tuple[float | None, float | None, str]:
    """(e2e, ttft, where from): the response's meta_info, else the /metrics histograms' sums
    bracketing the request, else unknown."""
    if comp.e2e_s is not None and comp.ttft_s is not None:
        return comp.e2e_s, comp.ttft_s, "meta_info"
    if before_text and after_text:
        sums = histogram_deltas(before_text, after_text)
        if sums is not None:
            return sums[0], sums[1], "metrics"
    return None, None, ""


def _metric_steps(before: MetricsSnapshot | None, after: MetricsSnapshot | None) -> int | None:
    if before is None or after is None or not after.has_steps:
        return None
    try:
        return acceptance.steps_from_metrics(before, after)
    except EndpointError:
        return None


def histogram_deltas(before: str, after: str) -> tuple[float, float] | None:
    """(e2e, ttft) of the one request between two /metrics texts: the histograms' sum deltas;
    None when a sum is not exported. Text that is not Prometheus exposition raises
    MalformedResponse (acceptance.metric_sums, the one /metrics parser)."""
    first, second = _sums(before), _sums(after)
    if first is None or second is None:
        return None
    e2e, ttft = second[0] - first[0], second[1] - first[1]
    return (e2e, ttft) if 0 <= ttft <= e2e and math.isfinite(e2e) else None


def _sums(text: str) -> tuple[float, float] | None:
    totals = acceptance.metric_sums(text, _HISTOGRAM_NAMES)
    found = [next((totals[n] for n in names if n in totals), None)
             for names in _HISTOGRAM_SUMS.values()]
    return (found[0], found[1]) if found[0] is not None and found[1] is not None else None


def parser_check(parsers: Parsers, path: Path, comp: Completion) -> dict[str, Any]:
    """Did the parsers run on this answer? Flags for ``Sample.raw["parser"]``."""
    out: dict[str, Any] = {}
    if parsers.reasoning and path.options.separate_reasoning:
        out["reasoning"] = bool(comp.reasoning)
    if path.options.tools:
        out["tool_calls"] = len(comp.tool_calls or ())
        problems = [p for call in comp.tool_calls or () if (p := _call_problem(call))]
        if problems:
            out["tool_call_problem"] = problems[0]
    return out


def _call_problem(call: Mapping[str, Any]) -> str | None:
    """Why a returned tool call is not well-formed, or None."""
    function = call.get("function")
    if not isinstance(function, Mapping):
        return f"a call without a function object: {json.dumps(call, default=str)[:80]}"
    name = function.get("name")
    if name != TOOL["function"]["name"]:
        return f"a call of {name!r}, a function that was never offered"
    arguments = function.get("arguments")
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) else None
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        return f"arguments {str(arguments)[:60]!r} that are not a JSON object"
    return None


@dataclass(frozen=True)
class Figures:
    """One path's medians over its measured samples (times in the server's time base)."""

    name: str
    n: int
    values: dict[str, float]
    timings_from: str
    reasoning_missing: int = 0
    tool_calls_missing: int = 0
    tool_call_problem: str | None = None
    # Median, MAD and n of each figure's repeats: the path verdicts' intervals.
    spreads: dict[str, Summary] = field(default_factory=dict)

    def get(self, key: str) -> float | None:
        return self.values.get(key)


_STREAM_KEYS = ("ttft_ms", "delivery_tok_s", "chunks_per_step", "gap_ms", "itl_ms", "tpot_ms",
                "span_ms")


def figures(measured: Measurement, name: str) -> Figures:
    """Medians of every figure the comparisons use."""
    samples = measured.measured
    spreads = {m: s for m in ("tok_s", "decode_tok_s", "step_ms", "avg_commit")
               if (s := measured.summary(m)) is not None}
    for key in ("post_ms",):
        vals = [float(s.raw[key]) for s in samples if s.raw.get(key) is not None]
        if vals:
            spreads[key] = summarize(vals)
    for key in _STREAM_KEYS:
        vals = [float(v) for s in samples if (v := (s.raw.get("stream") or {}).get(key))
                is not None]
        if vals:
            spreads[key] = summarize(vals)
    values = {key: summary.median for key, summary in spreads.items()}
    checks = [s.raw.get("parser") or {} for s in samples]
    problems = [c["tool_call_problem"] for c in checks if c.get("tool_call_problem")]
    sources = {str(s.raw.get("timings_from", "")) for s in samples}
    return Figures(
        name=name, n=len(samples), values=values,
        timings_from="" if "" in sources else "/".join(sorted(sources)),
        reasoning_missing=sum(1 for c in checks if c.get("reasoning") is False),
        tool_calls_missing=sum(1 for c in checks if c.get("tool_calls") == 0),
        tool_call_problem=problems[0] if problems else None, spreads=spreads)
