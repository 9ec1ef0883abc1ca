"""Does the server repeat itself? What one case's samples say about exact acceptance.

At temperature 0 a deterministic speculative server, sent the same prompt twice, answers with
the same output in the same verify steps. The measuring loop checks that on the warm-up that
re-sends repeat 0's prompt (:func:`deterministic`), and a baseline keeps each reproducible
prompt's steps (:func:`records`); :mod:`specperf.judge.exact` compares them with a baseline's.
Samples are read through :class:`Repeat`, so this module sits below :mod:`specperf.measure.loop`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

# Step counts that are per request and exact; a log's windows are an estimate.
EXACT_SOURCES = ("response", "metrics")


class Repeat(Protocol):
    """What this module reads of a measured request (:class:`specperf.measure.sample.Sample`)."""

    @property
    def raw(self) -> Mapping[str, Any]: ...
    @property
    def verify_steps(self) -> int | None: ...
    @property
    def acceptance_source(self) -> str: ...
    @property
    def warmup(self) -> bool: ...
    @property
    def repeat(self) -> int: ...
    @property
    def completion_tokens(self) -> int: ...


@dataclass(frozen=True)
class PromptRecord:
    """One prompt of a case in a baseline: its verify steps and the identities of the
    prompt sent and the output received."""

    steps: int
    prompt: str
    output: str

    def to_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, "prompt": self.prompt, "output": self.output}


def _usable(sample: Repeat) -> bool:
    raw = sample.raw
    return bool(raw.get("reproducible")) and sample.verify_steps is not None \
        and sample.acceptance_source in EXACT_SOURCES and raw.get("prompt_k") is not None


def records(samples: Sequence[Repeat]) -> dict[int, PromptRecord]:
    """The measured reproducible prompts of a case, by repeat index."""
    return {int(s.raw["prompt_k"]): PromptRecord(int(s.verify_steps or 0),
                                                 str(s.raw["prompt_digest"]),
                                                 str(s.raw["output_digest"]))
            for s in samples if not s.warmup and _usable(s)}


def _repeat_pairs(samples: Sequence[Repeat]) -> list[tuple[Repeat, Repeat]]:
    """(warm-up, repeat 0) pairs that sent the same request: the same prompt, decoded as long
    (a shorter warm-up, --specperf-warmup-output-tokens, re-sends no whole request)."""
    first = next((s for s in samples if not s.warmup and s.repeat == 0 and _usable(s)), None)
    if first is None:
        return []
    return [(w, first) for w in samples if w.warmup and _usable(w)
            and w.raw["prompt_digest"] == first.raw["prompt_digest"]
            and w.completion_tokens == first.completion_tokens]


def deterministic(samples: Sequence[Repeat]) -> bool | None:
    """Whether re-sending one prompt gave identical verify steps and output (None: no
    warm-up re-sent a measured prompt, so nothing was checked)."""
    pairs = _repeat_pairs(samples)
    if not pairs:
        return None
    return all(w.verify_steps == f.verify_steps and w.raw["output_digest"] ==
               f.raw["output_digest"] for w, f in pairs)


def determinism_detail(samples: Sequence[Repeat]) -> str:
    for w, f in _repeat_pairs(samples):
        if w.verify_steps != f.verify_steps:
            return (f"the same prompt took {w.verify_steps} verify steps in the warm-up and "
                    f"{f.verify_steps} in repeat 1")
        if w.raw["output_digest"] != f.raw["output_digest"]:
            return "the same prompt gave different output text in the warm-up and repeat 1"
    if any(s.warmup for s in samples):
        return ("no warm-up re-sent a whole measured request (a shorter warm-up: "
                "--specperf-warmup-output-tokens), so determinism is unchecked")
    return "no warm-up re-sent a measured prompt (--specperf-warmup 0), so determinism is unchecked"
