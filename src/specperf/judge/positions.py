"""Where acceptance changed: per draft position, and along the output.

A case's avg commit says *that* acceptance moved; this module says *where*. Two views of
one case, both from what the measured requests already carried (measure/attempt.py
``acceptance_shape``):

- **per draft position**: the conditional rate of position i given position i − 1 was
  accepted (position 1: over the drafting steps). Servers count accepted drafts per position
  unconditionally — a miss at position 1 removes every deeper acceptance — so a fall at the
  first position shows in every deeper count too, and only the conditional rate locates it.
- **along the output**: avg commit per 100 output tokens, where the server reports per-step
  data (vLLM ``per_step_accepted``): a shape change is late-output acceptance falling while
  early output held, or the reverse.

Both are judged with the case's acceptance tolerance (``avg_commit``) through the one
contract (:mod:`specperf.core.contract`); a sentence locating the change is added to the
case's verdict when acceptance regressed or a position or stretch moved beyond it.

Two limits keep a position from claiming what its figures cannot say:

- a rate from fewer than ``MIN_REQUESTS`` requests is never judged against the limit (three
  requests' spread says little of the next ones', and a case has many positions: one would
  "move" by chance every run); it only locates a fall avg commit already shows;
- a run that re-sent the baseline's own prompts (plan/reuse.py) measures the rates of *those*
  prompts, while the baseline's rates are the mean over all of its prompts (its repeats,
  merged nights): the prompt mix differs, not acceptance. So when every request re-sent a
  baseline prompt with the same output in the same number of drafting steps — exact
  acceptance's "identical verify steps" (judge/exact.py) — nothing moved and nothing is said;
  on re-sent prompts otherwise, positions only locate a fall avg commit shows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core import contract, interval
from ..core.contract import IMPROVED, PASS, REGRESSION, UNDETERMINED
from ..core.limits import MINUS, Move, format_percent, format_share, tolerance
from ..core.stats import Summary
from ..servers.positions import ALONG_TOKENS, half_width_by_index, mean_by_index, shape_rows

if TYPE_CHECKING:
    from ..baselines.store import CaseBaseline

Rates = Sequence[float | None]
# Requests a position's (or stretch's) rate must come from to be judged against the limit.
MIN_REQUESTS = 5
# (repeat index, prompt digest, output digest, drafting steps) of a request that re-sent a
# reproducible prompt; None for one that did not.
PromptIdentity = tuple[int, str, str, int] | None


@dataclass(frozen=True)
class Shape:
    """A case's acceptance beyond its average: the mean conditional rate per draft position
    (index 0 = position 1) and the mean avg commit per 100 output tokens; empty where the
    server reports none."""

    positions: tuple[float | None, ...] = ()
    along: tuple[float | None, ...] = ()
    # The 95 % half-width of each mean over the samples (None with one sample): how sure
    # this run is of each figure; a deep position few steps reach is not sure of much.
    positions_hw: tuple[float | None, ...] = ()
    along_hw: tuple[float | None, ...] = ()
    # Requests each figure is the mean of (empty: not known, judged as before).
    positions_n: tuple[int, ...] = ()
    along_n: tuple[int, ...] = ()
    # Each request's prompt, when it re-sent a reproducible one (see the module docstring).
    prompts: tuple[PromptIdentity, ...] = ()

    @classmethod
    def of(cls, raws: Iterable[Mapping[str, Any]]) -> Shape:
        """The shape of a case from its measured samples' raw fields."""
        kept = list(raws)
        rates, curves = shape_rows(kept)
        return cls(tuple(mean_by_index(rates)), tuple(mean_by_index(curves)),
                   tuple(half_width_by_index(rates)), tuple(half_width_by_index(curves)),
                   _counts(rates), _counts(curves), tuple(_identity(r) for r in kept))


def _counts(rows: Sequence[Sequence[float | None]]) -> tuple[int, ...]:
    width = max((len(row) for row in rows), default=0)
    return tuple(sum(1 for row in rows if i < len(row) and row[i] is not None)
                 for i in range(width))


def _identity(raw: Mapping[str, Any]) -> PromptIdentity:
    k, drafts = raw.get("prompt_k"), raw.get("drafts")
    if not raw.get("reproducible") or not isinstance(k, int) \
            or not isinstance(drafts, (int, float)):
        return None
    return k, str(raw.get("prompt_digest")), str(raw.get("output_digest")), int(drafts)


@dataclass(frozen=True)
class Step:
    """One position's (or stretch's) rate before and after, and its contract status."""

    index: int
    base: float
    new: float
    status: str
    half_width: float | None = None
    requests: int = 0  # set when too few requests to judge it (compare's ``counts``)

    @property
    def change(self) -> float:
        return self.new / self.base - 1.0


def compare(base: Rates, new: Rates, tol: float, half_widths: Rates = (), *,
            padded: bool = False, run_sd: float = 0.0,
            counts: Sequence[int] = ()) -> list[Step]:
    """Each index both sides have, judged through the contract: must not fall by more than
    ``tol``; as an interval when there is any uncertainty to state (a straddling one is
    undetermined), else as a point estimate.

    The interval holds both sides: this run's 95 % ``half_widths`` stand for the baseline's
    too (its requests were as many and as spread; the file keeps only the rates), and
    ``run_sd`` is the relative run-to-run σ of acceptance between this run and the
    baseline's night (core/noise.py).

    ``padded`` (draft positions): a position the current run reports nothing for, just past
    its deepest reported one, may never have been accepted there (an SGLang histogram ends
    at the deepest accepted count; llama.cpp exports a position's series only once it
    accepted there), or the run's few requests never reached it: its rate is a 0 no sample
    vouches for, so it is undetermined, never a regression. Nothing reported at all is not
    reported, not 0.

    ``counts``: the requests each index's rate is the mean of; fewer than ``MIN_REQUESTS``
    is undetermined (no limit is claimed from them).
    """
    if not new:
        return []
    padding = [0.0] if padded and len(base) > len(new) and (new[-1] or 0) > 0 else []
    steps = []
    for i, (b, n) in enumerate(zip(base, [*new, *padding], strict=False)):
        if b is None or n is None or b <= 0:
            continue
        if i >= len(new):  # the padded position: no sample reached it
            steps.append(Step(i, b, n, UNDETERMINED, None))
            continue
        hw = half_widths[i] if i < len(half_widths) else None
        if half_widths and hw is None:  # one sample reached it: nothing to be sure of
            steps.append(Step(i, b, n, UNDETERMINED, None))
            continue
        if i < len(counts) and counts[i] < MIN_REQUESTS:  # too few to judge: say so
            steps.append(Step(i, b, n, UNDETERMINED, hw, counts[i]))
            continue
        if run_sd > 0:
            hw = interval.combine(math.sqrt(2.0) * (hw or 0.0), interval.half_width(b * run_sd))
        elif hw is not None:
            hw = math.sqrt(2.0) * hw
        change = contract.Change(n / b - 1.0) if hw is None else \
            contract.Change(n / b - 1.0, (n - hw) / b - 1.0, (n + hw) / b - 1.0)
        steps.append(Step(i, b, n, contract.status(change, +1, tol), hw))
    return steps


def _span(indices: Sequence[int]) -> str:
    """'1', '1 and 3', '1–3' for 1-based positions."""
    ordinal = [i + 1 for i in indices]
    if len(ordinal) > 1 and ordinal == list(range(ordinal[0], ordinal[-1] + 1)):
        return f"{ordinal[0]}–{ordinal[-1]}"
    return ", ".join(map(str, ordinal[:-1])) + (" and " if len(ordinal) > 1 else "") \
        + str(ordinal[-1])


def _plural(indices: Sequence[int]) -> str:
    return f"position{'s' if len(indices) > 1 else ''} {_span(indices)}"


def _moved(steps: Sequence[Step], word: str, limit: str) -> str:
    """'draft position 3 (conditional acceptance) fell from 0.88 to 0.12 (−86.2%, limit …)'."""
    one = len(steps) == 1
    each = ", ".join(f"{'' if one else f'{s.index + 1} '}from {s.base:.2f} to {s.new:.2f} "
                     f"({format_percent(s.change)}" + (limit if one else "") + ")"
                     for s in steps)
    head = f"draft {_plural([s.index for s in steps])} (conditional acceptance) {word}"
    return f"{head} {each}" if one else f"{head} ({limit.lstrip(', ')}): {each}"


def position_sentence(base: Rates, new: Rates, tol: float, regressed: bool,
                      half_widths: Rates = (), run_sd: float = 0.0,
                      counts: Sequence[int] = ()) -> str | None:
    """The sentence locating a per-position change, or None when there is nothing to say:
    no position moved beyond ``tol`` and acceptance did not regress (``counts``: the
    requests behind each rate, see :func:`compare`)."""
    steps = compare(base, new, tol, half_widths, padded=True, run_sd=run_sd, counts=counts)
    if not steps:
        return None
    if all(s.requests for s in steps):  # every rate from too few requests: no limit claimed
        return _few(steps, tol) if regressed else None
    fell = [s for s in steps if s.status == REGRESSION]
    rose = [s for s in steps if s.status == IMPROVED]
    unsure = [s for s in steps if s.status == UNDETERMINED]
    held = [s.index for s in steps if s not in fell and s not in rose and s not in unsure]
    limit = f", limit {MINUS}{format_share(tol)}"
    parts = []
    if fell:
        parts.append(_moved(fell, "fell", limit))
    if rose:
        parts.append(_moved(rose, "rose", "" if fell else limit))
    if not parts:
        if not regressed:
            return None
        shown = ", ".join(f"{s.base:.2f} → {s.new:.2f}" for s in steps)
        if unsure:  # some may have moved beyond it: say only what is known
            return (f"No draft position is sure to have moved beyond the "
                    f"{format_share(tol)} limit (conditional acceptance per position "
                    f"{shown}; {_plural([s.index for s in unsure])} undetermined).")
        return (f"No single draft position moved beyond the {format_share(tol)} limit "
                f"(conditional acceptance per position {shown}): the fall is spread over "
                "every position.")
    if held:
        parts.append(f"{_plural(held)} held")
    if unsure:
        each = ", ".join(f"{s.base:.2f} → {s.new:.2f} ± {s.half_width:.2f}"
                         if s.half_width is not None else
                         f"{s.base:.2f} → {_unreached(s)}" for s in unsure)
        parts.append(f"{_plural([s.index for s in unsure])} undetermined ({each})")
    return "; ".join(parts)[0].upper() + "; ".join(parts)[1:] + "."


def _unreached(step: Step) -> str:
    """A position with no interval: never reached, or reached by one request only."""
    return "not reached by this run's requests" if step.new == 0 else \
        f"{step.new:.2f} from one request"


def _few(steps: Sequence[Step], tol: float) -> str:
    """Where a fall avg commit shows sits, from rates too few requests give to judge one
    position against the limit: the largest fall, and every rate."""
    requests = max(s.requests for s in steps)
    why = (f"over {requests} requests: too few to judge one position against the "
           f"{format_share(tol)} limit")
    worst = min(steps, key=lambda s: s.change)
    if worst.change < 0:
        return (f"Draft position {worst.index + 1} (conditional acceptance) fell most, from "
                f"{worst.base:.2f} to {worst.new:.2f} ({format_percent(worst.change)}), {why}.")
    shown = ", ".join(f"{s.base:.2f} → {s.new:.2f}" for s in steps)
    return f"No draft position fell (conditional acceptance per position {shown}), {why}."


def _stretch(indices: Sequence[int], output_tokens: int) -> str:
    start = indices[0] * ALONG_TOKENS
    end = min((indices[-1] + 1) * ALONG_TOKENS, output_tokens or (indices[-1] + 1) * ALONG_TOKENS)
    return f"tokens {start}–{end}"


def _mean(steps: Sequence[Step], side: str) -> float:
    values = [s.base if side == "base" else s.new for s in steps]
    return sum(values) / len(values)


def along_sentence(base: Rates, new: Rates, tol: float, output_tokens: int,
                   half_widths: Rates = (), run_sd: float = 0.0,
                   counts: Sequence[int] = ()) -> str | None:
    """The sentence for a change of shape along the output: some stretches fell beyond
    ``tol`` while others held; None when the curve kept its shape (or is not reported)."""
    steps = compare(base, new, tol, half_widths, run_sd=run_sd, counts=counts)
    fell = [s for s in steps if s.status == REGRESSION]
    held = [s for s in steps if s.status in (PASS, contract.NOTED)]
    if not fell or not held:
        return None
    first_fell, last_held = min(s.index for s in fell), max(s.index for s in held)
    where = "late-output" if first_fell > last_held else \
        "early-output" if max(s.index for s in fell) < min(s.index for s in held) else "some"
    before, after = _mean(fell, "base"), _mean(fell, "new")
    return (f"Acceptance along the output changed shape: {where} avg commit fell "
            f"({_stretch([s.index for s in fell], output_tokens)}: {before:.2f} → {after:.2f}, "
            f"{format_percent(after / before - 1.0)}) while "
            f"{_stretch([s.index for s in held], output_tokens)} held "
            f"({_mean(held, 'base'):.2f} → {_mean(held, 'new'):.2f}).")


def locate(shape: Shape, current: Mapping[str, Summary], base: CaseBaseline,
           tolerances: Mapping[str, float], run_sd: float = 0.0) -> list[str]:
    """The sentences locating an acceptance change in a case: per draft position and along
    the output; none when nothing moved (``run_sd``: see :func:`compare`; the baseline's
    own prompts re-sent: see the module docstring)."""
    tol = tolerance(tolerances, "avg_commit")
    regressed = "avg_commit" in current and bool(base.metrics.get("avg_commit")) and Move(
        "avg_commit", base.metrics["avg_commit"].median, current["avg_commit"].median,
        tol).regressed
    resent = _resent(shape, base)
    if resent == "identical" or (resent and not regressed):
        return []
    return [s for s in (
        position_sentence(base.positions, shape.positions, tol, regressed, shape.positions_hw,
                          run_sd, shape.positions_n),
        along_sentence(base.along, shape.along, tol, base.output_tokens, shape.along_hw,
                       run_sd, shape.along_n))
        if s]


def _resent(shape: Shape, base: CaseBaseline) -> str:
    """"identical" when every request re-sent a baseline prompt and got its output in as
    many drafting steps; "resent" when every request re-sent one; "" otherwise."""
    known = base.prompts
    if base.deterministic is not True or not known or not shape.prompts:
        return ""
    if any(p is None or p[0] not in known or known[p[0]].prompt != p[1] for p in shape.prompts):
        return ""
    same = all(p is not None and known[p[0]].output == p[2] and known[p[0]].steps == p[3]
               for p in shape.prompts)
    return "identical" if same else "resent"
