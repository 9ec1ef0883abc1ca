"""What one measured request is: the :class:`Request` a path asks for, the :class:`Reply` the
guarded exchange gives, and the checks every reply passes.

:meth:`specperf.measure.loop.Measurer.attempt` is the one function that performs a measured
request — build the prompt and body, check the server is idle, send, check exactly our
request ran, validate, check the output, build the :class:`~specperf.measure.sample.Sample` —
for every path the suite measures: the main job's native route, the chat route with its
parsers, streams, and both arms of an A/B comparison. A path varies only its
:class:`Request` (route, options, template tokens) and the :data:`ReadTiming` hook that
reads steps and server times off the reply (the stream figures and parser checks of
:mod:`specperf.measure.paths`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..core.errors import IgnoreEosNotHonoured, MalformedResponse
from ..plan.workload import Case
from ..servers import positions, routes, vllm
from ..servers.acceptance import MetricsSnapshot
from ..servers.messages import Completion, RouteOptions
from .sample import StepFigures, check_possible


@dataclass(frozen=True)
class Request:
    """How one kind of measured request is asked (the main job's: the probed route, plain).

    ``label`` names a path in messages and timeout histories ("" for the main job);
    ``template_tokens`` is what the chat template and tool declaration add, so the prompt is
    built that much shorter and that much of it may come from the prefix cache;
    ``reproducible`` lets the run's prompt plan derive the nonce (else a random one);
    ``steps_from`` "response" reads steps from the response and else from the /metrics
    bracket ("" follows the server's acceptance source).
    """

    api: str
    max_tokens: int
    options: RouteOptions = RouteOptions()
    label: str = ""
    template_tokens: int = 0
    reproducible: bool = True
    steps_from: str = ""

    def where(self, case: Case) -> str:
        """How messages name the case: its id, and the path and route when not the main job."""
        if not self.label:
            return case.id
        return f"{case.id} ({self.label}, {routes.PATHS[self.api]})"

    def bracket_measures(self, source: str, comp: Completion) -> bool:
        """Whether the /metrics bracket is itself the step count (then even our own retried
        attempts spoil it: the traffic guard's exact check)."""
        if self.steps_from == "response":
            return comp.verify_steps is None
        return source == "metrics"


@dataclass(frozen=True)
class Reply:
    """One guarded, validated exchange: everything a sample is made of."""

    comp: Completion
    wall_s: float  # the client's wall time, unscaled
    retries: int
    started: datetime
    before: MetricsSnapshot | None
    after: MetricsSnapshot | None
    before_text: str  # the /metrics texts bracketing the request ("" without metrics)
    after_text: str
    chunks: tuple[routes.Chunk, ...] | None = None  # a stream's output events


@dataclass(frozen=True)
class Timing:
    """What a path reads off a reply: steps, server times (unscaled), extra raw fields."""

    steps: int | None
    decode_s: float | None
    ttft_s: float | None
    acceptance_source: str
    raw: dict[str, Any] = field(default_factory=dict)


ReadTiming = Callable[[Case, Reply], Timing]


def validate(case: Case, request: Request, comp: Completion, *, calibrated: bool,
             url: str) -> None:
    """The reply is the request asked for: its length honoured, its prompt counted as
    built, its fields consistent; else the error that says which and what to do."""
    where = request.where(case)
    if comp.completion_tokens != request.max_tokens or comp.finish != "length":
        raise IgnoreEosNotHonoured(
            f"{where}: asked for exactly {request.max_tokens} tokens with ignore_eos, "
            f"got {comp.completion_tokens} (finish reason {comp.finish!r}): ignore_eos not "
            "honoured, so tok/s would be measured on a different length. Check that the "
            "server accepts ignore_eos on this route.", url=url)
    _check_prompt(case, request, comp, calibrated=calibrated)
    if comp.output_ids is not None and comp.output_ids != comp.completion_tokens:
        raise MalformedResponse(
            f"{where}: completion_tokens is {comp.completion_tokens} but output_ids has "
            f"{comp.output_ids} entries.")
    # The response's own step count and counters, before any is read as a sample.
    check_possible(StepFigures(where, comp.completion_tokens, comp.verify_steps,
                               _steps_field(comp), histogram_sum=comp.histogram_sum,
                               **_drafts(comp)))


def _steps_field(comp: Completion) -> str:
    """What the response's step count is, in the server's words."""
    if isinstance(comp.spec, Mapping):
        return "num_spec_steps"  # vLLM's metrics.speculative_decoding
    if comp.timings_from == "timings":
        return "N − 1 − draft_n_accepted"  # llama.cpp's timings
    return "spec_verify_ct"


def _drafts(comp: Completion) -> dict[str, int | None]:
    """Draft tokens accepted and proposed, as a response counts them (vLLM's
    ``metrics.speculative_decoding``); empty when it does not."""
    spec = comp.spec if isinstance(comp.spec, Mapping) else {}
    found = {name: spec.get(key) for name, key in (("accepted", "num_accepted_draft_tokens"),
                                                   ("drafted", "num_draft_tokens"))}
    return {k: v for k, v in found.items() if isinstance(v, int) and not isinstance(v, bool)}


def _check_prompt(case: Case, request: Request, comp: Completion, *, calibrated: bool) -> None:
    where = request.where(case)
    if calibrated:
        # Calibrated prompts (no /tokenize): a token either way is the nonce's doing.
        if abs(comp.prompt_tokens - case.context) > max(2, case.context // 200):
            raise MalformedResponse(
                f"{where}: the prompt was calibrated to {case.context} tokens but the "
                f"server counted {comp.prompt_tokens}: its token counts are not stable; "
                "enable the server's /tokenize route for exact prompts.")
    elif comp.prompt_tokens != case.context:
        if request.template_tokens:
            raise MalformedResponse(
                f"{where}: the prompt was built to {case.context} tokens (chat template "
                f"{request.template_tokens}) but the server counted {comp.prompt_tokens}: "
                "its tokenizer, chat template and /tokenize disagree.")
        raise MalformedResponse(
            f"{where}: the prompt was built to {case.context} tokens but the server "
            f"counted {comp.prompt_tokens}: its tokenizer and /tokenize disagree.")


def acceptance_shape(reply: Reply, where: str) -> dict[str, Any]:
    """Acceptance per draft position and along the output of one reply, as ``Sample.raw``
    fields (``accepted_per_pos``, ``drafts``, ``positions_from``; ``commit_along``,
    ``along_from``), from what the reply already carries, so no request is added.

    Positions: the response's own accept histogram (SGLang ``spec_correct_drafts_histogram``,
    vLLM ``acceptance_histogram``), else the per-position counters of the traffic guard's
    /metrics bracket (llama.cpp, vLLM), trusted only when the attempt was not retried. Along
    the output: vLLM's ``per_step_accepted``; SGLang sends its spec fields on the finished
    response only (tokenizer_manager.py ``_calculate_spec_decoding_metrics``, called when the
    request finished) and llama.cpp only totals, so they have no curve.
    """
    comp = reply.comp
    spec = vllm.spec_of(comp)
    counts = positions.positions_from_histogram(comp.histogram, "accept histogram", where) \
        if comp.histogram else vllm.positions_of(spec, where)
    if counts is None and reply.retries == 0:
        counts = positions.positions_from_metrics(reply.before_text, reply.after_text, where)
    out: dict[str, Any] = counts.raw() if counts is not None else {}
    commits = vllm.step_commits(spec)
    if commits is not None:
        out.update(commit_along=[round(v, 4) for v in positions.commit_along(commits)],
                   along_from="per_step_accepted")
    return out
