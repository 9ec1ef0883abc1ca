"""Fault and regression injection: the simulator's own API under ``/_sim/`` (not SGLang).

``GET /_sim/faults`` returns the current state; ``POST /_sim/faults`` merges the given fields
into it (unknown names -> 400 listing the accepted ones); ``POST /_sim/reset`` restores the
defaults and stops background traffic; ``GET /_sim/truth`` serves the ground truth.

Fields (all apply to generation requests: /generate, /v1/completions, /v1/chat/completions):

- ``error_rate`` (0.0): fraction answered with ``error_status`` and an SGLang-like error body.
- ``error_status`` (500): the status used by error_rate (and /health_generate answers 503).
- ``hang_s`` (0.0): wall seconds (not time-scaled) to sleep before answering.
- ``drop_rate`` (0.0): fraction whose connection is closed mid-response (headers and half
  the body, or the first stream chunks, then the connection is dropped).
- ``malformed_rate`` (0.0): fraction answered 200 with an invalid JSON body.
- ``early_stop_rate`` (0.0): fraction that finish with ``{"type": "stop"}`` at 10-50 % of
  max_new_tokens although ignore_eos was set.
- ``omit_spec_fields`` (false): drop every speculative field from responses.
- ``extra_verify_steps`` (0): /generate's ``meta_info`` reports this many verify steps more
  than were run (``spec_verify_ct``, ``spec_accept_length`` = N / S and the histogram's
  zero-draft entry agree with it), as a server whose step counter also counts steps it never
  ran: avg commit (N − 1) / S falls below 1 once S reaches N. Counters, log and timings are
  unchanged.
- ``background_requests`` (0): foreign long generations kept running in the scheduler, each
  restarted when it ends; they share verify steps and move the counters and gauges.
- ``foreign_output`` (0): when positive, each of our requests (not background ones) gets a
  foreign companion: a generation of this many tokens on a ``foreign_prompt``-token (256)
  prompt, submitted ``foreign_delay_ms`` simulated ms (0.0) after ours arrived. It moves the
  counters like any request and is never restarted. ``foreign_times`` (0): how many of our
  next requests get one (0: every request while ``foreign_output`` is positive).
- ``step_time_mult`` (1.0), ``slope_mult`` (1.0): multiply the whole step time, or only the
  context slope b.
- ``acceptance_mult`` (1.0): multiplies the mean commit per step.
- ``late_accept_mult`` (1.0), ``late_after`` (0): multiplies the mean commit of every step a
  request takes once it has produced ``late_after`` output tokens: acceptance that falls only
  late in the output (a drafter losing track of long generations), early output unchanged.
- ``prefill_mult`` (1.0): multiplies every request's prefill time (time to first token) and
  nothing else: a prompt-processing regression that leaves steps and commits alone.
- ``batch_step_mult`` (0.0): x in a step-time factor ``1 + x · (B − 1)`` for a verify step
  of a batch of B running requests: a regression that hurts only batched steps (a batched
  kernel or a scheduler change), invisible at concurrency 1.
- ``noise`` (null): overrides the profile's relative step-time noise (independent per step,
  so it averages out over a request's many steps).
- ``request_noise`` (0.0): relative sd of a slowdown factor drawn once per request and applied
  to every step it takes part in (clock or thermal states, a neighbour on the GPU): noise that
  does *not* average out within a request, so repeats of one case disagree.
- ``parser_chunk_ms`` (0.0): wall ms (not time-scaled) the chat route spends parsing each
  scheduler output (one verify step) of a stream while a parser is engaged (reasoning
  parser with ``separate_reasoning``, or the tool-call parser on a request with tools).
- ``parser_response_ms`` (0.0): wall ms (not time-scaled) added once to a non-streaming chat
  response while a parser is engaged.
- ``loop_output`` (false): every one of our requests emits a four-token cycle instead of
  its own text (think and tool-call markers stay): a model collapsed into a loop, as greedy
  decoding does on some prompts. Counts, steps and timings are unchanged.
- ``draft_model`` (""): the draft model path ``/server_info`` reports instead of the
  profile's (a drafter deploy changes the fingerprint; examples/sim_deploy.py sets it). A
  label only: the physics are the knobs above.

The parser costs model post-processing in SGLang's HTTP server process, after the scheduler
produced the tokens: the client sees the delay, the decode does not. ``meta_info`` timings
(``first_token_latency``, ``decode_throughput``, ``e2e_latency``), ``/metrics`` histograms and
the decode log are unchanged. A stream is never coalesced (see ``generation.progress``), so a
per-chunk cost above the step time makes the stream fall behind the decode.

Fault draws come from their own RNG seeded by the simulator seed, so injecting faults does not
change any request's tokens or commits.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, fields, replace
from typing import Any


class FaultError(ValueError):
    """A POST /_sim/faults body the simulator cannot apply."""


@dataclass(frozen=True)
class FaultState:
    """The current faults; every field documented in the module docstring."""

    error_rate: float = 0.0
    error_status: int = 500
    hang_s: float = 0.0
    drop_rate: float = 0.0
    malformed_rate: float = 0.0
    early_stop_rate: float = 0.0
    omit_spec_fields: bool = False
    extra_verify_steps: int = 0
    background_requests: int = 0
    step_time_mult: float = 1.0
    slope_mult: float = 1.0
    acceptance_mult: float = 1.0
    late_accept_mult: float = 1.0
    late_after: int = 0
    prefill_mult: float = 1.0
    batch_step_mult: float = 0.0
    noise: float | None = None
    request_noise: float = 0.0
    parser_chunk_ms: float = 0.0
    parser_response_ms: float = 0.0
    foreign_output: int = 0
    foreign_prompt: int = 256
    foreign_delay_ms: float = 0.0
    foreign_times: int = 0
    loop_output: bool = False
    draft_model: str = ""


    def late_factor(self, produced: int) -> float:
        """``late_accept_mult`` for a step taken after ``produced`` output tokens, else 1."""
        return self.late_accept_mult if produced >= self.late_after else 1.0


FIELD_NAMES = tuple(f.name for f in fields(FaultState))
_RATES = ("error_rate", "drop_rate", "malformed_rate", "early_stop_rate")
_MULTS = ("step_time_mult", "slope_mult", "acceptance_mult", "prefill_mult",
          "late_accept_mult")
_BOOLS = ("omit_spec_fields", "loop_output")
_STRS = ("draft_model",)
_INTS = ("error_status", "extra_verify_steps", "background_requests", "foreign_output",
         "foreign_prompt", "foreign_times", "late_after")


class Faults:
    """Holds the fault state and the fault RNG."""

    def __init__(self, seed: int) -> None:
        self._seed = seed
        self._rng = random.Random(seed * 7919 + 17)
        self.state = FaultState()
        self._foreign_left = 0

    def update(self, body: object) -> FaultState:
        """Merge a JSON object into the state; raises FaultError naming the problem."""
        if not isinstance(body, dict):
            raise FaultError("body must be a JSON object")
        unknown = sorted(set(body) - set(FIELD_NAMES))
        if unknown:
            raise FaultError(f"unknown fault fields {unknown}; accepted: {list(FIELD_NAMES)}")
        changes = {name: _coerce(name, value) for name, value in body.items()}
        self.state = replace(self.state, **changes)
        if "foreign_times" in changes or "foreign_output" in changes:
            self._foreign_left = self.state.foreign_times
        return self.state

    def take_foreign(self) -> bool:
        """Whether the request arriving now gets a foreign companion (counts it down)."""
        if self.state.foreign_output <= 0:
            return False
        if self.state.foreign_times == 0:
            return True
        if self._foreign_left <= 0:
            return False
        self._foreign_left -= 1
        return True

    def reset(self) -> None:
        """Back to defaults (also reseeds the fault RNG so runs stay reproducible)."""
        self.state = FaultState()
        self._foreign_left = 0
        self._rng = random.Random(self._seed * 7919 + 17)

    def roll(self, rate: float) -> bool:
        """True with probability rate (no draw at all when the rate is zero)."""
        return rate > 0.0 and self._rng.random() < rate

    def uniform(self, low: float, high: float) -> float:
        return self._rng.uniform(low, high)

    def request_factor(self) -> float:
        """The per-request step-time factor (1.0, and no draw, when request_noise is 0)."""
        sd = self.state.request_noise
        return 1.0 if sd == 0.0 else max(0.2, 1.0 + sd * self._rng.gauss(0.0, 1.0))

    def as_dict(self) -> dict[str, Any]:
        return asdict(self.state)

    def over_count(self, meta: dict[str, Any]) -> dict[str, Any]:
        """``meta_info`` with ``extra_verify_steps`` more verify steps than were run."""
        extra = self.state.extra_verify_steps
        if not extra or "spec_verify_ct" not in meta:
            return meta
        steps = int(meta["spec_verify_ct"]) + extra
        out = {**meta, "spec_verify_ct": steps,
               "spec_accept_length": meta["completion_tokens"] / steps}
        for key in ("spec_correct_drafts_histogram", "spec_accept_histogram"):
            if isinstance(meta.get(key), list) and meta[key]:  # the extra steps drafted 0
                out[key] = [meta[key][0] + extra, *meta[key][1:]]
        return out


def _coerce(name: str, value: object) -> Any:
    if name in _STRS:
        if not isinstance(value, str):
            raise FaultError(f"{name} must be a string, got {value!r}")
        return value
    if name in _BOOLS:
        if not isinstance(value, bool):
            raise FaultError(f"{name} must be true or false")
        return value
    if name == "noise" and value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise FaultError(f"{name} must be a number, got {value!r}")
    if name in _INTS:
        return _int_field(name, value)
    number = float(value)
    if name in _RATES and not 0.0 <= number <= 1.0:
        raise FaultError(f"{name} must be within [0, 1], got {number}")
    if name in _MULTS and number <= 0.0:
        raise FaultError(f"{name} must be positive, got {number}")
    if number < 0.0:
        raise FaultError(f"{name} must not be negative, got {number}")
    return number


def _int_field(name: str, value: float) -> int:
    if int(value) != value:
        raise FaultError(f"{name} must be an integer, got {value}")
    number = int(value)
    if name == "error_status" and not 400 <= number <= 599:
        raise FaultError(f"error_status must be an HTTP error status, got {number}")
    if name == "background_requests" and not 0 <= number <= 64:
        raise FaultError(f"background_requests must be within [0, 64], got {number}")
    if number < (1 if name == "foreign_prompt" else 0):
        raise FaultError(f"{name} must not be below {int(name == 'foreign_prompt')}, "
                         f"got {number}")
    return number
