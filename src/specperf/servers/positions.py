"""Acceptance per draft position and along the output, as the servers count it: unconditional
accepted drafts per position (a step whose draft missed at position i accepts nothing deeper),
read from /metrics deltas or a response's accept histogram, and the per-request shape (the
conditional rate per position, avg commit along the output) that baselines and the judge read.

Every parser here returns a value or raises :class:`MalformedResponse`; none lets another
exception escape on junk input.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core import interval
from ..core.errors import MalformedResponse
from .acceptance import metric_samples

# Accepted drafts per draft position, as the servers count them: unconditional (a step whose
# draft missed at position i accepts nothing deeper), one series per position label.
# - llama.cpp 0c1e570: llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position}, raised
#   when a request finishes; the series appear only once something was accepted there (a fresh
#   server exports none), so an absent position counts 0 while the drafts counter is exported.
# - vLLM 0.33.0: vllm:spec_decode_num_accepted_tokens_per_pos_total{position} (its
#   v1/spec_decode/metrics.py SpecDecodingStats.observe_draft: positions 0 .. accepted − 1 of
#   every drafting step), per engine iteration.
PER_POSITION = ("llamacpp:spec_decode_num_accepted_tokens_per_pos_total",
                "vllm:spec_decode_num_accepted_tokens_per_pos_total")
DRAFTING_STEPS = ("llamacpp:spec_decode_num_drafts_total", "vllm:spec_decode_num_drafts_total")
# Output tokens per point of the acceptance-along-the-output curve.
ALONG_TOKENS = 100


@dataclass(frozen=True)
class PositionCounts:
    """Accepted drafts per draft position (0 = the first draft token) over ``drafts``
    drafting steps. The counts are unconditional: position i is accepted only if every
    position before it was, so ``accepted`` never grows with depth."""

    accepted: tuple[int, ...]
    drafts: int
    source: str  # where the counts came from, in the server's words

    def conditional(self) -> list[float | None]:
        """Each position's rate given the one before it was accepted: accepted_i /
        accepted_{i−1}, position 0 over the drafting steps; None where nothing reached it."""
        return conditional_rates(self.accepted, self.drafts)

    def raw(self) -> dict[str, Any]:
        """The sample's raw fields (``accepted_per_pos``, ``drafts``, ``positions_from``)."""
        return {"accepted_per_pos": list(self.accepted), "drafts": self.drafts,
                "positions_from": self.source}


def conditional_rates(accepted: Sequence[float], drafts: float) -> list[float | None]:
    """accepted_i / accepted_{i−1} (position 0: accepted_0 / drafts), None over a zero."""
    rates: list[float | None] = []
    below = float(drafts)
    for count in accepted:
        rates.append(count / below if below > 0 else None)
        below = float(count)
    return rates


def _checked(accepted: Sequence[int], drafts: int, source: str, where: str) -> PositionCounts:
    """PositionCounts, or MalformedResponse when no chain of drafts can give these counts."""
    chain = [drafts, *accepted]
    if drafts < 0 or any(deeper > shallower or deeper < 0
                         for shallower, deeper in zip(chain, chain[1:], strict=False)):
        raise MalformedResponse(
            f"{where}: accepted drafts per position {list(accepted)} over {drafts} drafting "
            f"steps ({source}): a position can accept no more than the one before it, so the "
            "server's per-position counts are wrong; check its speculative metrics.")
    return PositionCounts(tuple(accepted), drafts, source)


def _per_position(text: str) -> tuple[dict[int, float], float | None]:
    """Per-position accepted sums and the drafting-step counter of one /metrics text."""
    wanted = frozenset((*PER_POSITION, *DRAFTING_STEPS))
    counts: dict[int, float] = {}
    drafts: float | None = None
    for sample in metric_samples(text, wanted):
        if sample.name in DRAFTING_STEPS:
            drafts = (drafts or 0.0) + float(sample.value)
            continue
        label = str(sample.labels.get("position", ""))
        if label.isdigit():
            counts[int(label)] = counts.get(int(label), 0.0) + float(sample.value)
    return counts, drafts


def positions_from_metrics(before_text: str, after_text: str,
                           where: str = "/metrics") -> PositionCounts | None:
    """Per-position counts of the one request bracketed by two /metrics texts (the traffic
    guard's scrapes); None when the server exports no per-position counters or no drafts."""
    if not before_text or not after_text:
        return None
    (before, drafts0), (after, drafts1) = _per_position(before_text), _per_position(after_text)
    if not after or drafts0 is None or drafts1 is None:
        return None
    moved = [after.get(i, 0.0) - before.get(i, 0.0) for i in range(max(after) + 1)]
    steps = drafts1 - drafts0
    if steps <= 0 or not all(math.isfinite(v) and v == int(v) for v in (*moved, steps)):
        return None
    return _checked([int(v) for v in moved], int(steps), "per-position /metrics counters",
                    where)


def positions_from_histogram(histogram: Sequence[int] | None, source: str,
                             where: str = "response") -> PositionCounts | None:
    """Per-position counts from a per-request accept histogram (index = drafts accepted in
    a step, value = steps): position i was accepted in every step that accepted more than i.
    None for an absent or empty histogram."""
    if not histogram or sum(histogram) <= 0:
        return None
    accepted = [sum(histogram[i + 1:]) for i in range(len(histogram) - 1)]
    return _checked(accepted, sum(histogram), source, where)


def commit_along(commits: Sequence[int], first_token: bool = True,
                 every: int = ALONG_TOKENS) -> list[float]:
    """Avg commit per ``every`` output tokens, from the tokens each verify step committed
    in order: a step counts in the stretch its first token falls in (the first output token
    comes from prefill when ``first_token``)."""
    tokens: dict[int, int] = {}
    steps: dict[int, int] = {}
    at = 1 if first_token else 0
    for count in commits:
        bucket = at // every
        tokens[bucket] = tokens.get(bucket, 0) + count
        steps[bucket] = steps.get(bucket, 0) + 1
        at += count
    return [tokens[b] / steps[b] for b in sorted(steps)]


def _columns(rows: Iterable[Sequence[float | None]]) -> list[list[float]]:
    """Each index's values over ``rows`` (Nones and missing entries left out), up to the
    widest index any row has."""
    values: dict[int, list[float]] = {}
    for row in rows:
        for i, value in enumerate(row):
            if value is not None:
                values.setdefault(i, []).append(float(value))
    return [values.get(i, []) for i in range(max(values, default=-1) + 1)]


def mean_by_index(rows: Iterable[Sequence[float | None]]) -> list[float | None]:
    """The mean of each index over ``rows`` (Nones and missing entries left out)."""
    return [sum(c) / len(c) if c else None for c in _columns(rows)]


def half_width_by_index(rows: Iterable[Sequence[float | None]]) -> list[float | None]:
    """The 95 % half-width of each index's mean over ``rows`` (Student t over the rows that
    have it); None where fewer than two do."""
    return [_half_width(c) for c in _columns(rows)]


def _half_width(values: Sequence[float]) -> float | None:
    if len(values) < 2:
        return None
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    return interval.half_width(sd / math.sqrt(len(values)), len(values) - 1)


def sample_rates(raw: Mapping[str, Any]) -> list[float | None] | None:
    """A sample's conditional rates per position, from its raw ``accepted_per_pos`` and
    ``drafts`` (None when it has none)."""
    accepted, drafts = raw.get("accepted_per_pos"), raw.get("drafts")
    if not isinstance(accepted, list) or not isinstance(drafts, (int, float)):
        return None
    return conditional_rates([float(a) for a in accepted], float(drafts))


def shape_rows(raws: Iterable[Mapping[str, Any]]
               ) -> tuple[list[list[float | None]], list[list[float | None]]]:
    """Each measured sample's conditional rates per draft position and its avg commit per
    ``ALONG_TOKENS`` output tokens, from their raw fields (samples without them left out)."""
    raws = list(raws)
    rates = [r for raw in raws if (r := sample_rates(raw)) is not None]
    curves = [list(c) for raw in raws if isinstance(c := raw.get("commit_along"), list)]
    return rates, curves


def case_shape(raws: Iterable[Mapping[str, Any]]
               ) -> tuple[list[float | None], list[float | None]]:
    """A case's acceptance shape from its measured samples' raw fields: the mean conditional
    rate per draft position and the mean avg commit per ``ALONG_TOKENS`` output tokens."""
    rates, curves = shape_rows(raws)
    return mean_by_index(rates), mean_by_index(curves)
