"""llama.cpp's ``llama-server`` as a server kind: everything specperf must know about it.

Routes and bodies, response parsing, acceptance sources, metric names and when they move,
and the fingerprint, for the build vendored by llama-cpp-python 0.3.36 (llama.cpp
0c1e570, ``tools/server``).

**Verify steps.** Every generation step of a slot is one target ``llama_decode``: a
*verify step* when the draft proposed tokens (it commits the accepted drafts plus one token
of the target's own), a *plain decode* when it proposed none (it commits one). The first
token comes from the prompt's last batch. A draft never reaches past ``n_predict`` (the
server caps it at ``n_remaining − 1``), so no step overshoots, and for one request of N
tokens::

    N − 1 = draft_n_accepted + S        so   S = N − 1 − draft_n_accepted

``timings`` omits ``draft_n``/``draft_n_accepted`` when nothing was drafted: on a
speculative server that is 0 accepted (S = N − 1), not unknown. On /metrics, measured on
the real server for one request at a time: ``Δspec_decode_num_accepted_tokens_total`` equals
``draft_n_accepted``; ``Δspec_decode_num_drafts_total`` counts the verify steps only; and
``Δn_decode_total`` = S + the prompt's batches (⌈prompt / n_batch⌉, n_batch 2048 by default),
since every target ``llama_decode`` counts, prefill included (16-token prompt, N = 64:
22 steps = 21 verify + 1 plain, n_decode 23; 2500-token prompt: 20 steps, n_decode 22).

**When counters move.** ``n_decode_total`` moves per ``llama_decode`` (one per iteration,
whatever slots it batches); ``tokens_predicted_total`` and every ``spec_decode_*`` counter
move once, when a request finishes. There is no finished-request counter, so the
contamination guard checks that ``tokens_predicted_total`` moved by exactly our N and that
``requests_processing``/``requests_deferred`` read 0 around the request.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..core.errors import (
    AcceptanceUnavailable,
    BadStatus,
    EndpointError,
    ImpossibleSample,
    MalformedResponse,
)
from ..core.fingerprint import NOT_REPORTED
from ..plan.workload import Prompt
from .acceptance import MetricsSnapshot
from .client import Client, StreamEvent
from .messages import Chunk, Completion, RouteOptions, Streamed

API = "llamacpp"
PATH = "/completion"
# Greedy decoding ignores the seed; --spec-synth-rates draws acceptance from it, and a fixed
# seed makes a dialled acceptance the same on every run.
SEED = 20261130
# /metrics sample names (this build), as the acceptance table reads them.
METRIC_NAMES = {
    "verify_calls": "llamacpp:spec_decode_num_drafts_total",
    "draft_tokens": "llamacpp:spec_decode_num_draft_tokens_total",
    "accepted_tokens": "llamacpp:spec_decode_num_accepted_tokens_total",
    "decodes": "llamacpp:n_decode_total",
    "generation_tokens": "llamacpp:tokens_predicted_total",
    "running": "llamacpp:requests_processing",
    "queued": "llamacpp:requests_deferred",
}


# -- discovery and fingerprint ------------------------------------------------------------------
def read_props(client: Client) -> dict[str, Any] | None:
    """``GET /props`` when it is llama.cpp's (it carries ``build_info``); else None."""
    try:
        data = client.get_json("/props", timeout_s=30)
    except (BadStatus, MalformedResponse):
        return None
    return data if isinstance(data, dict) and "build_info" in data else None


def release_of(props: Mapping[str, Any]) -> str | None:
    """The build the server names in ``/props`` (``build_info``, e.g. ``b1-0c1e570``)."""
    value = props.get("build_info")
    return value if isinstance(value, str) and value else None


def read_slots(client: Client) -> list[dict[str, Any]]:
    """``GET /slots`` (absent with ``--no-slots``: then an empty list)."""
    try:
        data = client.get_json("/slots", timeout_s=30)
    except EndpointError:
        return []
    return [s for s in data if isinstance(s, dict)] if isinstance(data, list) else []


def speculative(slots: Sequence[Mapping[str, Any]]) -> bool | None:
    """Whether the slots speculate (``/props`` ``speculative.types`` says ``none`` even when
    they do, so it is never read); None when ``/slots`` is off."""
    flags = [s.get("speculative") for s in slots if isinstance(s.get("speculative"), bool)]
    return any(flags) if flags else None


def context_per_slot(props: Mapping[str, Any], slots: Sequence[Mapping[str, Any]]) -> int | None:
    """The context one request can use (``-c`` is shared out among ``-np`` slots)."""
    for value in [s.get("n_ctx") for s in slots] + [_settings(props).get("n_ctx")]:
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _settings(props: Mapping[str, Any]) -> Mapping[str, Any]:
    value = props.get("default_generation_settings")
    return value if isinstance(value, Mapping) else {}


def fingerprint(props: Mapping[str, Any], slots: Sequence[Mapping[str, Any]],
                simulated: bool, pinned: str | bool | None = None) -> dict[str, Any]:
    """What identifies a llama.cpp deployment: build, model, slots, speculation, and what
    changes its speed when the server reports it (:func:`speed_settings`).

    This build (0c1e570) tells nothing of its drafter but that it has one: /props has
    ``model_path`` and ``model_alias`` of the target only, and of speculation only
    ``default_generation_settings.params["speculative.types"]`` ("none" even when it
    speculates); /slots has ``speculative: true`` per slot; /v1/models lists the target; the
    draft model's path, its draft length, threads and batch sizes are nowhere (read in its
    ``tools/server/server-context.cpp`` and on a real llama-server started with ``-md
    draft.gguf``; only its start-up log names the draft file). So a speculating server's
    ``draft_model`` is :data:`NOT_REPORTED` (None without speculation or without /slots), and
    a drafter swap shows as an acceptance change until the user declares the drafter with
    ``--specperf-fingerprint draft_model=FILE``: then it is a fingerprint difference.
    ``pinned``: the server's synthetic acceptance flags, if any
    (:func:`specperf.servers.pinned.pinned_acceptance`).
    """
    spec = speculative(slots)
    return {
        "model": props.get("model_path"),
        "simulated": simulated,
        "server_kind": "llama.cpp",
        "version": props.get("build_info"),
        "speculative_algorithm": None if spec is None else ("draft" if spec else "none"),
        "draft_model": NOT_REPORTED if spec else None,
        "total_slots": props.get("total_slots"),
        "context_per_slot": context_per_slot(props, slots),
        "reasoning_parser": None,
        "tool_call_parser": None,
        "acceptance_pinned": pinned,
        **speed_settings(props, slots),
    }


# What changes speed, as llama.cpp builds name it when they report it: fingerprint key, then
# the name in /props' default_generation_settings.params or a slot's params. Upstream builds
# report the draft length there (speculative.n_max/n_min); this one reports neither, nor
# the threads, batch sizes or the draft model's path anywhere (see fingerprint).
_SPEED = (("draft_n_max", "speculative.n_max"), ("draft_n_min", "speculative.n_min"))


def speed_settings(props: Mapping[str, Any],
                   slots: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The draft length where /props or /slots report it; None for what they do not."""
    places = [_mapping(_settings(props).get("params"))]
    places += [_mapping(s.get("params")) for s in slots[:1]]
    return {key: next((p[name] for p in places if p.get(name) is not None), None)
            for key, name in _SPEED}


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


# -- tokenizer ----------------------------------------------------------------------------------
class LlamaTokenizer:
    """``POST /tokenize {content, add_special}`` and ``POST /detokenize {tokens}``."""

    path = "/tokenize"

    def __init__(self, client: Client) -> None:
        self.client = client

    def tokenize(self, text: str, add_special_tokens: bool) -> list[int]:
        data = self.client.post_json(
            "/tokenize", {"content": text, "add_special": add_special_tokens}).data
        tokens = data.get("tokens") if isinstance(data, dict) else None
        if not isinstance(tokens, list):
            raise MalformedResponse(f"/tokenize answered without a tokens list: {data!r:.200}")
        return [int(t) for t in tokens]

    def detokenize(self, ids: list[int]) -> str:
        data = self.client.post_json("/detokenize", {"tokens": ids}).data
        if not isinstance(data, dict) or not isinstance(data.get("content"), str):
            raise MalformedResponse(f"/detokenize answered without content: {data!r:.200}")
        return str(data["content"])


# -- requests and answers -----------------------------------------------------------------------
def request_body(prompt: Prompt, max_tokens: int, options: RouteOptions | None = None
                 ) -> tuple[str, dict[str, Any]]:
    """``/completion``: greedy, exactly ``max_tokens`` tokens, no prompt cache."""
    stream = options.stream if options is not None else False
    source: Any = list(prompt.input_ids) if prompt.input_ids is not None else prompt.text
    return PATH, {"prompt": source, "n_predict": max_tokens, "ignore_eos": True,
                  "cache_prompt": False, "temperature": 0, "seed": SEED,
                  "stream": stream}


def openai_extras(body: dict[str, Any]) -> dict[str, Any]:
    """llama.cpp's own fields on its OpenAI routes (no prompt cache, a fixed seed)."""
    return {**body, "cache_prompt": False, "seed": SEED}


def _num(obj: Mapping[str, Any], key: str) -> float | None:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def steps_of(timings: Mapping[str, Any], completion_tokens: int) -> int | None:
    """S = N − 1 − draft_n_accepted (module docstring); None for an unusable count.

    More tokens accepted than drafted is no count at all: an ImpossibleSample.
    """
    accepted = _num(timings, "draft_n_accepted") if "draft_n" in timings else 0.0
    if accepted is None or accepted != int(accepted) or accepted < 0:
        return None
    drafted = _num(timings, "draft_n")
    if drafted is not None and accepted > drafted:
        raise ImpossibleSample(
            f"llama.cpp's timings count {accepted:.0f} draft tokens accepted but only "
            f"{drafted:.0f} proposed (draft_n_accepted > draft_n): no step accepts more than it "
            "drafted, so the server's spec counters disagree; check its speculative metrics.")
    steps = completion_tokens - 1 - int(accepted)
    return steps if steps >= 1 else None


def apply_timings(comp: Completion, timings: Any) -> Completion:
    """A completion with what ``timings`` says: steps, server times, cached tokens."""
    if not isinstance(timings, Mapping):
        return comp
    prompt_ms, predicted_ms = _num(timings, "prompt_ms"), _num(timings, "predicted_ms")
    # prompt_ms runs to the first token, predicted_ms from it to the last: T_d
    e2e_s = ttft_s = None
    if prompt_ms is not None and predicted_ms is not None:
        e2e_s, ttft_s = (prompt_ms + predicted_ms) / 1000.0, prompt_ms / 1000.0
    return Completion(
        prompt_tokens=comp.prompt_tokens, completion_tokens=comp.completion_tokens,
        finish=comp.finish,
        cached_tokens=int(c) if (c := _num(timings, "cache_n")) is not None
        else comp.cached_tokens,
        verify_steps=steps_of(timings, comp.completion_tokens),
        accept_length=None,  # llama.cpp reports no per-request accept length
        e2e_s=e2e_s, ttft_s=ttft_s,
        histogram_sum=None, output_ids=comp.output_ids, text=comp.text, ids=comp.ids,
        reasoning=comp.reasoning, tool_calls=comp.tool_calls,
        timings_from="timings" if e2e_s is not None else "")


def parse(data: Any) -> Completion:
    """A ``/completion`` answer; MalformedResponse naming the field when it is unusable."""
    if not isinstance(data, Mapping):
        raise MalformedResponse(f"{PATH} answered {type(data).__name__}, not an object")
    timings = data.get("timings")
    if not isinstance(timings, Mapping):
        raise MalformedResponse(f"{PATH} answer has no timings object")
    n = _whole(data, "tokens_predicted")
    raw_ids = data.get("tokens")
    ids = tuple(raw_ids) if isinstance(raw_ids, list) and raw_ids and all(
        isinstance(t, int) and not isinstance(t, bool) for t in raw_ids) else None
    stop = data.get("stop_type")
    base = Completion(
        prompt_tokens=_whole(data, "tokens_evaluated"), completion_tokens=n,
        # "limit": n_predict reached, the one way a fixed-length request should end
        finish="length" if stop == "limit" else str(stop),
        cached_tokens=None, verify_steps=None, accept_length=None, e2e_s=None, ttft_s=None,
        histogram_sum=None, output_ids=None, text=str(data.get("content") or ""), ids=ids)
    return apply_timings(base, timings)


def _whole(data: Mapping[str, Any], key: str) -> int:
    value = _num(data, key)
    if value is None or value < 0 or value != int(value):
        shown = "missing" if key not in data else repr(data.get(key))[:60]
        raise MalformedResponse(f"{PATH} {key} is {shown}: expected a whole number of tokens")
    return int(value)


def parse_stream(events: Sequence[StreamEvent]) -> Streamed:
    """A ``/completion`` stream: one token per event, the last (``stop: true``) carries the
    final counts and timings."""
    if not events or not all(isinstance(e.data, Mapping) for e in events):
        raise MalformedResponse(f"{PATH} streamed no events, or events that are not objects")
    final = events[-1].data
    if final.get("stop") is not True:
        raise MalformedResponse(f"{PATH} stream ended without its final (stop) event")
    chunks = [Chunk(e.at_s, len(e.data["tokens"]) if isinstance(e.data.get("tokens"), list)
                    else None) for e in events[:-1] if e.data.get("content")]
    text = "".join(str(e.data.get("content") or "") for e in events)
    return Streamed(parse({**final, "content": text}), tuple(chunks))


# -- acceptance from /metrics and from the log --------------------------------------------------
def steps_from_metrics(before: MetricsSnapshot, after: MetricsSnapshot,
                       completion_tokens: int) -> int:
    """S of the one request between two scrapes: N − 1 − Δaccepted drafts (the
    ``spec_decode_*`` counters move when a request finishes, so after its answer)."""
    if before.accepted_drafts is None or after.accepted_drafts is None:
        raise AcceptanceUnavailable(
            f"/metrics has no {METRIC_NAMES['accepted_tokens']}; choose another "
            "--specperf-acceptance-source.")
    accepted = after.accepted_drafts - before.accepted_drafts
    steps = completion_tokens - 1 - accepted
    if not math.isfinite(steps) or steps < 1 or accepted < 0 or steps != int(steps):
        raise MalformedResponse(
            f"{METRIC_NAMES['accepted_tokens']} moved by {accepted:g} during one request of "
            f"{completion_tokens} tokens: expected a whole number below it; was the server "
            "restarted mid-measurement?")
    return int(steps)


_ACCEPTANCE = re.compile(
    r"draft acceptance\s*=\s*[0-9.]+\s*\(\s*(?P<accepted>\d+)\s+accepted\s*/\s*"
    r"(?P<drafted>\d+)\s+generated\)")


def parse_acceptance_log(lines: Iterable[str]) -> list[tuple[int, int]]:
    """``(accepted, drafted)`` of every ``draft acceptance = …`` line, in order."""
    found = []
    for line in lines:
        m = _ACCEPTANCE.search(line)
        if m:
            found.append((int(m["accepted"]), int(m["drafted"])))
    return found


def steps_from_log(lines: Iterable[str], completion_tokens: int) -> int | None:
    """S of the last request the log reports (None when it reports none)."""
    found = parse_acceptance_log(lines)
    if not found:
        return None
    steps = completion_tokens - 1 - found[-1][0]
    return steps if steps >= 1 else None
