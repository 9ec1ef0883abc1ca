"""What kind of run a record is, so nobody mistakes a partial run or an outage for a sweep.

Kinds: ``full`` (every case of the default planned matrix in the main job), ``custom`` (every
case of a planned matrix with its own contexts or text classes, e.g. ``--contexts 13,3333``:
its cells are not a full sweep's), ``gate`` (the smoke subset only), ``ab`` (candidate against
production), ``concurrency`` (only the concurrency_scaling tests: its scope names the levels
and the case, e.g. "levels 1,2,4,8 of reasoning-ctx13"), ``subset`` (anything else). Beside the
kind, two conditions: ``interrupted`` (stopped before every test ran) and ``stopped_by``: why
nothing was measured when every perf test that ran errored — the GPU lock was held too long
(``lock-timeout``), the deployment's baseline was missing or unreadable (``no-baseline``:
``--require-baseline``, or a ``--deployment`` with no baseline beside others, baselines/
preflight.py), the settings pointed at no LLM server or asked for what the server cannot do,
such as a context beyond its limit (``config-error``), every case was too noisy to judge
(``unstable``), or the box or the endpoint was down (``outage``). ``outage`` stays a flag of
its own: true only for that last one.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

KIND_LABELS = {"full": "full sweep", "custom": "custom sweep", "gate": "gate", "ab": "A/B",
               "concurrency": "concurrency", "subset": "subset"}
# The suite error (core/errors.py) that stopped a run, checked in this order, and its words.
# An endpoint that answers but is no LLM server is a wrong setting, not a box that was down.
STOPPED_BY = (("GpuLockTimeout", "lock-timeout"), ("BaselineError", "no-baseline"),
              ("ConfigError", "config-error"), ("NotAnLlmServer", "config-error"),
              ("UnstableMeasurement", "unstable"))
STOPPED_LABELS = {
    "lock-timeout": "LOCK TIMEOUT (nothing was measured: another run held the GPU lock; "
                    "{errored} of {ran} perf tests errored)",
    "no-baseline": "NO BASELINE (nothing was measured: the deployment's baseline is missing "
                   "or unreadable; {errored} of {ran} perf tests errored)",
    "config-error": "USAGE ERROR (nothing was measured: the settings point at no LLM server "
                    "or ask for what the server cannot do; {errored} of {ran} perf tests "
                    "errored)",
    "unstable": "UNSTABLE (nothing was measured: every case was too noisy to judge; "
                "{errored} of {ran} perf tests errored)",
    "outage": "OUTAGE (nothing was measured: {errored} of {ran} perf tests errored)"}


@dataclass(frozen=True)
class RunKind:
    """The kind of one run and how much of it happened."""

    kind: str
    interrupted: bool
    outage: bool
    cases: int  # perf tests the run collected
    measured: int
    errored: int
    not_run: int
    stopped_by: str | None = None  # see the module docstring
    # a custom sweep's matrix, e.g. "contexts 13, 3333"; a concurrency run's levels and case
    scope: str = ""

    def label(self) -> str:
        """e.g. 'full sweep', 'concurrency levels 1,2,4 of reasoning-ctx13', 'subset,
        INTERRUPTED (5 of 10 not run)', 'gate, OUTAGE …'."""
        head = KIND_LABELS[self.kind]
        if self.scope:
            head += f" {self.scope}" if self.kind == "concurrency" else f" ({self.scope})"
        parts = [head]
        if self.interrupted:
            parts.append(f"INTERRUPTED ({self.not_run} of {self.cases} perf tests not run)")
        if self.stopped_by is not None:
            parts.append(STOPPED_LABELS[self.stopped_by].format(
                errored=self.errored, ran=self.cases - self.not_run))
        elif self.errored:
            parts.append(f"{self.errored} of {self.cases} perf tests errored")
        return ", ".join(parts)

    @property
    def comparable(self) -> str:
        """The group a trend compares within: like with like."""
        return "partial" if self.interrupted or self.stopped_by else self.kind

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "label": self.label()}


def classify(*, ab: bool, interrupted: bool, outcomes: Mapping[str, str],
             smoke: Collection[str], scaling_cases: Collection[str],
             planned: Collection[str], measured: int,
             error_kinds: Mapping[str, Sequence[str]] | None = None,
             custom: str = "", concurrency: Collection[str] = (),
             concurrency_scope: str = "") -> RunKind:
    """The kind of a run from its perf tests' outcomes (node id → outcome).

    ``error_kinds``: per errored test, its suite error's class and bases (why nothing was
    measured); ``custom``: the planned matrix when it is not the default one (its kind is
    then ``custom``, never ``full``); ``concurrency``: the node ids of the concurrency_scaling
    tests, and ``concurrency_scope`` what they measured (:func:`concurrency_scope`).
    """
    errored = sum(o == "error" for o in outcomes.values())
    not_run = sum(o == "not run" for o in outcomes.values())
    scope = ""
    if ab:
        kind = "ab"
    elif outcomes and set(outcomes) <= set(smoke):
        kind = "gate"
    elif outcomes and set(outcomes) <= set(concurrency):
        kind, scope = "concurrency", concurrency_scope
    elif planned and set(planned) <= set(scaling_cases):
        kind, scope = ("custom", custom) if custom else ("full", "")
    else:
        kind = "subset"
    ran = len(outcomes) - not_run
    stopped = measured == 0 and errored > 0 and errored == ran
    why = _stopped_by(error_kinds or {}, outcomes) if stopped else None
    return RunKind(kind, interrupted, why == "outage", len(outcomes), measured, errored,
                   not_run, why, scope)


def _stopped_by(error_kinds: Mapping[str, Sequence[str]], outcomes: Mapping[str, str]) -> str:
    """Why a run that measured nothing stopped: the first of STOPPED_BY any test errored with."""
    seen = {name for nodeid, o in outcomes.items() if o == "error"
            for name in error_kinds.get(nodeid, ())}
    return next((why for name, why in STOPPED_BY if name in seen), "outage")


def custom_matrix(contexts: Sequence[int], default_contexts: Sequence[int],
                  text_classes: Sequence[str], default_classes: Sequence[str]) -> str:
    """The words for a planned matrix that is not the default one; "" for the default."""
    parts = []
    if tuple(contexts) != tuple(default_contexts):
        parts.append("contexts " + ", ".join(str(c) for c in contexts))
    if tuple(text_classes) != tuple(default_classes):
        parts.append("text classes " + ", ".join(text_classes))
    return "; ".join(parts)


def concurrency_scope(levels: Sequence[int], case_id: str) -> str:
    """What a concurrency run measured: 'levels 1,2,4,8 of reasoning-ctx13'."""
    noun = "level" if len(levels) == 1 else "levels"
    return f"{noun} {','.join(str(c) for c in sorted(levels))} of {case_id}"
