"""What a production server did over a window, from its ``/metrics`` alone (``specperf explain``).

Passive: no request to the model, no GPU lock, no GPU time. The counters are read at the
start and at the end of the window; the running-requests gauge is also read every ``poll_s``
in between (a gauge has no history), for the concurrency. From the counters' deltas:

- **tok/s per request**: tokens generated over the life of the requests that finished in the
  window (SGLang ``generation_tokens_total`` over ``e2e_request_latency_seconds_sum``; vLLM's
  ``request_generation_tokens`` and ``e2e_request_latency_seconds`` histograms; llama.cpp's
  ``tokens_predicted_total`` over its prompt and generation seconds). A vLLM without the
  request histograms gives only the window's decode rate per running request, an
  approximation that counts prefill and idle gaps as decoding (it reads slow by their share).
- **avg commit** (tokens committed per verify step): SGLang (Δgeneration − Δrequests) /
  Δ``spec_verify_calls_total``; vLLM 1 + Δaccepted / Δdrafts; llama.cpp (N − R) / S with
  S = N − R − Δaccepted (its plain decodes are steps too, servers/llamacpp.py).
- **step time**: the finished requests' decode seconds over their verify steps — each request
  counts its own steps, so a batch's step counts once per request, as its seconds do.
- **context**: prompt tokens per finished request (the prompt counter or histogram over the
  requests; llama.cpp counts no requests: the caller's ``--context``), and **output** tokens
  per request.

Finish-time counters are read only against finish-time counters (a request that is still
running at an edge of the window is in none of them); a counter that moves every step enters
only as a ratio of two such counters (vLLM's avg commit), which the edges do not bias.

Every figure says where it came from (``sources``). A simulator's times are rescaled by its
time scale through its adapter (:mod:`specperf.servers.simulated`), as the measuring loop's.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..core.errors import AcceptanceUnavailable, BadStatus, EndpointError
from . import simulated
from .acceptance import metric_samples
from .client import Client

NO_TRAFFIC = "nothing was generated in the window: explain needs live traffic"
# The series read, per server family (sample names as exposed; histograms by _sum/_count).
SGLANG = {
    "generated": "sglang:generation_tokens_total", "requests": "sglang:num_requests_total",
    "steps": "sglang:spec_verify_calls_total", "prompt": "sglang:prompt_tokens_total",
    "life_sum": "sglang:e2e_request_latency_seconds_sum",
    "ttft_sum": "sglang:time_to_first_token_seconds_sum",
    "ttft_count": "sglang:time_to_first_token_seconds_count",
    "running": "sglang:num_running_reqs", "decode": "sglang:realtime_tokens_total",
}
VLLM = {
    "generated": "vllm:request_generation_tokens_sum",
    "requests": "vllm:request_generation_tokens_count",
    "finished": "vllm:request_success_total",
    "iteration_generated": "vllm:generation_tokens_total",
    "steps": "vllm:spec_decode_num_drafts_total",
    "accepted": "vllm:spec_decode_num_accepted_tokens_total",
    "prompt": "vllm:request_prompt_tokens_sum", "prompt_count": "vllm:request_prompt_tokens_count",
    "iteration_prompt": "vllm:prompt_tokens_total",
    "life_sum": "vllm:e2e_request_latency_seconds_sum",
    "decode_sum": "vllm:request_decode_time_seconds_sum",
    "ttft_sum": "vllm:time_to_first_token_seconds_sum",
    "ttft_count": "vllm:time_to_first_token_seconds_count",
    "running": "vllm:num_requests_running",
}
LLAMACPP = {
    "generated": "llamacpp:tokens_predicted_total",
    "decode_s": "llamacpp:tokens_predicted_seconds_total",
    "prompt": "llamacpp:prompt_tokens_total", "prompt_s": "llamacpp:prompt_seconds_total",
    "steps": "llamacpp:spec_decode_num_drafts_total",
    "accepted": "llamacpp:spec_decode_num_accepted_tokens_total",
    "running": "llamacpp:requests_processing",
}
FAMILIES = {"sglang": SGLANG, "vllm": VLLM, "llamacpp": LLAMACPP}
_WANTED = frozenset(n for names in FAMILIES.values() for n in names.values())


@dataclass(frozen=True)
class Scrape:
    """One reading of /metrics: each wanted series summed over its label sets (SGLang's
    realtime counter only its ``decode`` mode), and when it was read: ``sent`` before the
    request left, ``at`` after the reply came (the server read its counters in between)."""

    at: float
    sums: Mapping[str, float]
    sent: float = math.nan

    @classmethod
    def of(cls, text: str, at: float, sent: float = math.nan) -> Scrape:
        sums: dict[str, float] = {}
        for sample in metric_samples(text, _WANTED):
            if sample.name == SGLANG["decode"] and sample.labels.get("mode") != "decode":
                continue
            value = float(sample.value)
            if math.isfinite(value):
                sums[sample.name] = sums.get(sample.name, 0.0) + value
        return cls(at, sums, sent)

    @property
    def family(self) -> str | None:
        return next((f for f in FAMILIES if any(n.startswith(f"{f}:") for n in self.sums)), None)


@dataclass(frozen=True)
class LiveObservation:
    """What production did over the window; ``sources`` names each figure's origin."""

    endpoint: str
    family: str
    window_s: float
    tok_s: float
    avg_commit: float | None
    step_ms: float | None
    context: float
    output_tokens: float
    concurrency: float
    ttft_ms: float | None
    requests: float
    sources: Mapping[str, str] = field(default_factory=dict)
    # When the two readings were taken (this host's monotonic clock, seconds): each reply's
    # arrival, and each reading's (sent, replied) bracket, inside which the server read it.
    read_at: tuple[float, float] = (math.nan, math.nan)
    read_brackets: tuple[tuple[float, float], tuple[float, float]] = (
        (math.nan, math.nan), (math.nan, math.nan))

    def to_dict(self) -> dict[str, Any]:
        return {"endpoint": self.endpoint, "family": self.family, "window_s": self.window_s,
                "tok_s": self.tok_s, "avg_commit": self.avg_commit, "step_ms": self.step_ms,
                "context": self.context, "output_tokens": self.output_tokens,
                "concurrency": self.concurrency, "ttft_ms": self.ttft_ms,
                "requests": self.requests, "sources": dict(self.sources),
                "read_at": list(self.read_at),
                "read_brackets": [list(b) for b in self.read_brackets]}


def scrape(client: Client, clock: Callable[[], float] = time.monotonic) -> Scrape:
    """One /metrics reading; a server without /metrics is one sentence saying how to get it."""
    sent = clock()
    try:
        text = client.get_text("/metrics", timeout_s=30)
    except BadStatus as exc:
        raise EndpointError(
            f"{client.base_url} serves no /metrics (HTTP {exc.status}): explain reads the "
            f"server's counters; start it with --enable-metrics (SGLang), or --metrics "
            f"(llama-server), or point --endpoint at the server itself.") from exc
    return Scrape.of(text, clock(), sent)


def observe(client: Client, window_s: float, *, poll_s: float = 1.0,
            context: float | None = None, clock: Callable[[], float] = time.monotonic,
            sleep: Callable[[float], None] = time.sleep) -> LiveObservation:
    """Read /metrics over ``window_s`` seconds and derive what production did in it.

    ``context`` (the traffic's prompt tokens, when the caller knows them) lets llama.cpp,
    which counts no requests, count them from its prompt tokens."""
    first = scrape(client, clock)
    family = first.family
    if family is None:
        raise AcceptanceUnavailable(
            f"{client.base_url}/metrics has none of the series explain reads (SGLang's "
            f"sglang:*, vLLM's vllm:* or llama.cpp's llamacpp:*): it cannot tell what the "
            f"server generated.")
    running = [first.sums.get(FAMILIES[family]["running"], 0.0)]
    end = first.at + window_s
    while (now := clock()) < end:
        sleep(min(poll_s, end - now))
        running.append(scrape(client, clock).sums.get(FAMILIES[family]["running"], 0.0))
    last = scrape(client, clock)
    running.append(last.sums.get(FAMILIES[family]["running"], 0.0))
    sim = simulated.identity(client)
    scale = sim.time_scale if sim else 1.0
    if family == "llamacpp":
        seen = _llamacpp(client.base_url, first, last, running, scale, context)
    else:
        seen = (_sglang if family == "sglang" else _vllm)(client.base_url, first, last, running,
                                                          scale)
    return replace(seen, read_at=(first.at, last.at),
                   read_brackets=((first.sent, first.at), (last.sent, last.at)))


class _Delta:
    """Counter deltas between two scrapes, by the family's short names."""

    def __init__(self, names: Mapping[str, str], first: Scrape, last: Scrape) -> None:
        self.names = names
        self.first, self.last = first, last

    def has(self, key: str) -> bool:
        return self.names[key] in self.last.sums and self.names[key] in self.first.sums

    def __call__(self, key: str) -> float:
        name = self.names[key]
        return self.last.sums.get(name, 0.0) - self.first.sums.get(name, 0.0)

    def src(self, *keys: str) -> str:
        return ", ".join(f"Δ{self.names[k]}" for k in keys)


def _missing(url: str, what: str, names: str) -> AcceptanceUnavailable:
    return AcceptanceUnavailable(f"{url}/metrics lacks {names}, so explain cannot derive {what}: "
                                 f"use a server release that exports it.")


def _concurrency(running: list[float], name: str) -> tuple[float, str]:
    mean = sum(running) / len(running)
    return max(mean, 1.0), f"mean of {name} over {len(running)} scrapes (at least 1)"


def _sglang(url: str, first: Scrape, last: Scrape, running: list[float],
            scale: float) -> LiveObservation:
    d = _Delta(SGLANG, first, last)
    window = (last.at - first.at) / scale
    if d("generated") <= 0 and (not d.has("decode") or d("decode") <= 0):
        raise EndpointError(NO_TRAFFIC)
    requests = d("requests")
    if requests <= 0:
        raise EndpointError(f"no request finished in the {window:.0f} s window although tokens "
                            f"were generated: make --window longer than one request.")
    if not d.has("life_sum"):
        raise _missing(url, "tok/s per request", SGLANG["life_sum"])
    life = d("life_sum") / scale
    generated = d("generated")
    commit, step, ttft = None, None, None
    sources = {"tok_s": f"{d.src('generated')} / {d.src('life_sum')}",
               "context": f"{d.src('prompt')} / {d.src('requests')}",
               "output_tokens": f"{d.src('generated')} / {d.src('requests')}"}
    if d.has("ttft_count") and d("ttft_count") > 0:
        ttft = d("ttft_sum") / scale / d("ttft_count")
        sources["ttft_ms"] = f"{d.src('ttft_sum')} / {d.src('ttft_count')}"
    if d.has("steps") and d("steps") > 0:
        commit = (generated - requests) / d("steps")
        sources["avg_commit"] = (f"({d.src('generated')} − {d.src('requests')}) / "
                                 f"{d.src('steps')}")
        if ttft is not None:
            step = 1000.0 * (life - requests * ttft) / d("steps")
            sources["step_ms"] = (f"({d.src('life_sum')} − requests × mean TTFT) / "
                                  f"{d.src('steps')}")
    conc, sources["concurrency"] = _concurrency(running, SGLANG["running"])
    return LiveObservation(url, "sglang", window, generated / life, commit, step,
                           d("prompt") / requests, generated / requests, conc,
                           None if ttft is None else 1000.0 * ttft, requests, sources)


def _vllm(url: str, first: Scrape, last: Scrape, running: list[float],
          scale: float) -> LiveObservation:
    """vLLM: its request histograms (moved at finish) for tok/s, output, context and decode
    time; its spec-decode counters (moved every step) only as the ratio avg commit, which a
    window's edges do not bias. Step time = decode seconds / steps, with steps = (N − R) /
    avg commit over the finished requests."""
    d = _Delta(VLLM, first, last)
    window = (last.at - first.at) / scale
    if d("iteration_generated") <= 0 and d("generated") <= 0:
        raise EndpointError(NO_TRAFFIC)
    commit = None
    sources: dict[str, str] = {}
    if d.has("steps") and d("steps") > 0:
        commit = 1.0 + d("accepted") / d("steps")
        sources["avg_commit"] = f"1 + {d.src('accepted')} / {d.src('steps')}"
    conc, sources["concurrency"] = _concurrency(running, VLLM["running"])
    if not (d.has("life_sum") and d.has("requests")):
        return _vllm_iterations(url, d, window, conc, commit, sources)
    requests, generated, life = d("requests"), d("generated"), d("life_sum") / scale
    if requests <= 0:
        raise EndpointError(f"no request finished in the {window:.0f} s window although tokens "
                            f"were generated: make --window longer than one request.")
    ttft = d("ttft_sum") / scale / d("ttft_count") if d("ttft_count") > 0 else None
    step = None
    if commit is not None and d.has("decode_sum"):
        step = 1000.0 * d("decode_sum") / scale * commit / (generated - requests)
        sources["step_ms"] = (f"{d.src('decode_sum')} / steps, steps = "
                              f"({d.src('generated')} − {d.src('requests')}) / avg commit")
    elif commit is not None and ttft is not None:
        step = 1000.0 * (life - requests * ttft) * commit / (generated - requests)
        sources["step_ms"] = (f"({d.src('life_sum')} − requests × mean TTFT) / steps, steps = "
                              f"({d.src('generated')} − {d.src('requests')}) / avg commit")
    sources.update(tok_s=f"{d.src('generated')} / {d.src('life_sum')}",
                   context=f"{d.src('prompt')} / {d.src('prompt_count')}",
                   output_tokens=f"{d.src('generated')} / {d.src('requests')}")
    if ttft is not None:
        sources["ttft_ms"] = f"{d.src('ttft_sum')} / {d.src('ttft_count')}"
    prompt_count = d("prompt_count") or requests
    return LiveObservation(url, "vllm", window, generated / life, commit, step,
                           d("prompt") / prompt_count, generated / requests, conc,
                           None if ttft is None else 1000.0 * ttft, requests, sources)


def _vllm_iterations(url: str, d: _Delta, window: float, conc: float, commit: float | None,
                     sources: dict[str, str]) -> LiveObservation:
    """A vLLM without request histograms: the window's decode rate per running request, and
    the context from the prompt counter over the requests that started in the window.

    vLLM counts a request's prompt tokens with its first output (vllm/v1/metrics/stats.py,
    IterationStats.update_from_output when prefilling), a request as running from its
    scheduling and as finished at its end: over a window the prompts counted belong, up to a
    prefill cut by an edge, to the requests that started in it, the finished ones plus those
    still running at its end, less those running at its start (Δ finished + Δ running). An
    edge inside a prefill counts one request without its prompt or one prompt without its
    request, so the figure is exact to one request in N. Over the finished alone, a window
    with one more start than finish read a 1500-token context as 1636."""
    requests = d("finished") if d.has("finished") else 0.0
    started = requests + (d.last.sums.get(VLLM["running"], 0.0)
                          - d.first.sums.get(VLLM["running"], 0.0))
    if requests <= 0 or not d.has("iteration_prompt"):
        raise _missing(url, "the context of the requests",
                       f"{VLLM['prompt']} (or {VLLM['iteration_prompt']} and {VLLM['finished']})")
    rate = d("iteration_generated") / window / conc
    sources["tok_s"] = (f"{d.src('iteration_generated')} / window / concurrency (the decode "
                        f"rate per running request)")
    step = None
    if commit is not None:
        step = 1000.0 * commit / rate
        sources["step_ms"] = "avg commit / the decode rate per running request"
    sources["context"] = (f"{d.src('iteration_prompt')} / ({d.src('finished', 'running')}: "
                          f"the requests that started in the window)")
    sources["output_tokens"] = f"{d.src('iteration_generated')} / {d.src('finished')}"
    return LiveObservation(url, "vllm", window, rate, commit, step,
                           d("iteration_prompt") / (started if started > 0 else requests),
                           d("iteration_generated") / requests, conc, None, requests, sources)


def _llamacpp(url: str, first: Scrape, last: Scrape, running: list[float], scale: float,
              context: float | None) -> LiveObservation:
    """llama.cpp: its finish-time token, draft and seconds counters (servers/llamacpp.py says
    when each moves). A step is a verify step or a plain decode (no draft): for N tokens
    N − 1 = accepted + S, so over R requests S = ΔN − R − Δaccepted; llama.cpp counts no
    requests, so R is its prompt tokens over the traffic's ``context`` (R is a small term:
    one token per request)."""
    d = _Delta(LLAMACPP, first, last)
    window = (last.at - first.at) / scale
    if d("generated") <= 0:
        raise EndpointError(NO_TRAFFIC)
    if not d.has("decode_s") or d("decode_s") <= 0:
        raise _missing(url, "tok/s per request", LLAMACPP["decode_s"])
    decode_s, prompt_s = d("decode_s") / scale, d("prompt_s") / scale
    sources = {"tok_s": f"{d.src('generated')} / ({d.src('decode_s')} + {d.src('prompt_s')})"}
    commit, step = None, None
    requests = d("prompt") / context if context and d.has("prompt") else math.nan
    if d.has("accepted") and d.has("steps") and d("steps") > 0:
        if math.isnan(requests):
            steps = d("steps")
            commit = 1.0 + d("accepted") / steps
            where = f"{d.src('steps')} (verify steps; plain decodes unknown without --context)"
        else:
            steps = d("generated") - requests - d("accepted")
            commit = (d("generated") - requests) / steps
            where = (f"{d.src('generated')} − requests ({d.src('prompt')} / context) − "
                     f"{d.src('accepted')}")
        step = 1000.0 * decode_s / steps
        sources["avg_commit"] = f"committed tokens / steps, steps = {where}"
        sources["step_ms"] = f"{d.src('decode_s')} / steps"
    conc, sources["concurrency"] = _concurrency(running, LLAMACPP["running"])
    # llama.cpp counts tokens and seconds, not requests: the context per request is the
    # caller's (--context), the output per request unknown.
    sources["context"] = "not exported by llama.cpp: --context"
    return LiveObservation(url, "llamacpp", window, d("generated") / (decode_s + prompt_s),
                           commit, step, math.nan if context is None else context, math.nan,
                           conc, None, requests, sources)
