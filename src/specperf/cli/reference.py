"""The gate's same-night reference: the running deployment measured just before a deploy.

A stored baseline was measured on another night: comparing with it carries the run-to-run
noise (a neighbour on the box, a driver state), which only a comparison measured the same
night on the same box cancels. The box holds one deployment at a time, so the gate does it in
two phases:

1. ``specperf gate --save-reference DIR --endpoint URL`` (before the deploy) measures the
   running deployment's gate subset and writes it as a baseline into ``DIR`` through the
   baseline store (``DIR/<deployment>/v<N>.json``, never overwritten), with ``DIR/reference.json``
   saying when, where and what: created time, endpoint, deployment, version, fingerprint,
   cases and output length.
2. ``specperf gate --reference DIR --endpoint URL`` (after it) judges the candidate against
   that version with ``--specperf-same-night``, so the judges leave the run-to-run term out.

A reference that is stale (older than ``--reference-max-age``), of another endpoint or
deployment, or of another subset is a usage error (exit 2) with one sentence naming what
differs and the command that measures the right one. Pure values and files: nothing here
runs pytest (the gate command wires it).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError
from ..measure.identity import server_identity

REFERENCE_FILE = "reference.json"
DEFAULT_MAX_AGE_H = 4.0
# A baseline holds a whole text-class × context grid, so the reference measures the main
# job's cases at the smoke subset's contexts (perf_tests/test_smoke.py: reasoning-ctx3333,
# padding-ctx3333, padding-ctx13; reasoning-ctx13 comes with the grid).
SUBSET_MARKER = "context_scaling"
SUBSET_CONTEXTS = (13, 3333)
SUBSET_CLASSES = ("padding", "reasoning")
# Requests per reference case. Same night, the run terms cancel and the reference's request
# spread is the comparison's floor (top-ups shrink only tonight's side): at the baseline's 10
# a 5 % step rise was caught in 95 % of gates, at 12 in 97 % for ~70 GPU s more per deploy
# (benchmarks/sweep_power.py --configs "same-night gate 3%" --baseline-repeats 12, seed 11).
REFERENCE_REPEATS = 12
_TIME = "%Y-%m-%dT%H:%M:%SZ"


@dataclass(frozen=True)
class Reference:
    """What ``reference.json`` says about the baseline version phase 1 wrote."""

    directory: Path
    created: datetime
    endpoint: str
    deployment: str
    version: int
    cases: tuple[str, ...]
    output_tokens: int
    fingerprint: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"created": self.created.strftime(_TIME), "endpoint": self.endpoint,
                "deployment": self.deployment, "version": self.version,
                "baseline": f"{self.deployment}/v{self.version}.json",
                "cases": list(self.cases), "output_tokens": self.output_tokens,
                "fingerprint": self.fingerprint}

    def age_h(self, now: datetime) -> float:
        return (now - self.created).total_seconds() / 3600.0

    def describe(self) -> str:
        """'deployment d v3, 4 cases at 600 output tokens, measured 2026-12-02T19:40:00Z on URL'."""
        return (f"deployment {self.deployment} v{self.version}, {len(self.cases)} cases at "
                f"{self.output_tokens} output tokens, measured {self.created.strftime(_TIME)} "
                f"on {self.endpoint}")


def same_endpoint(a: str, b: str) -> bool:
    """Whether two spellings name one server, as the GPU lock decides it (``127.0.0.1`` and
    ``localhost``, a host name and its address, a default port written or not)."""
    try:
        return server_identity(a) == server_identity(b)
    except ConfigError:  # not a URL the lock could name: only the same spelling is the same
        return a.rstrip("/") == b.rstrip("/")


def save_command(directory: Path, endpoint: str, deployment: str | None,
                 pytest_args: Sequence[str] = ()) -> str:
    """The phase-1 command that measures the reference this gate needs."""
    cmd = ["specperf", "gate", "--save-reference", str(directory), "--endpoint", endpoint]
    if deployment:
        cmd += ["--deployment", deployment]
    extra = [a for a in pytest_args if a != "--"]
    return shlex.join(cmd + (["--", *extra] if extra else []))


# -- phase 1 ---------------------------------------------------------------------------------
def measure_flags(directory: Path) -> list[str]:
    """The pytest flags of phase 1 (with ``SUBSET_MARKER``): the subset's grid, at least
    ``REFERENCE_REPEATS`` requests per case, written as a new baseline version into
    ``directory`` from tonight's run alone (never merged with runs of other nights, whatever
    ``baseline_runs`` the ini or environment sets)."""
    return ["--specperf-baseline-dir", str(directory),
            f"--specperf-contexts={','.join(map(str, SUBSET_CONTEXTS))}",
            f"--specperf-text-classes={','.join(SUBSET_CLASSES)}",
            f"--specperf-baseline-repeats={REFERENCE_REPEATS}", "--specperf-baseline-runs=1",
            "--specperf-update-baselines"]


def baseline_files(directory: Path) -> set[Path]:
    return set(directory.glob("*/v*.json"))


def written(directory: Path, before: set[Path], endpoint: str) -> Reference | None:
    """The reference phase 1 wrote (the baseline file new since ``before``), recorded in
    ``reference.json``; None when the run wrote none."""
    new = sorted(baseline_files(directory) - before, key=lambda p: p.stat().st_mtime)
    if not new:
        return None
    data = json.loads(new[-1].read_text(encoding="utf-8"))
    cases = data.get("cases", {})
    tokens = {int(c.get("output_tokens", 0)) for c in cases.values()}
    ref = Reference(directory, _parse_time(str(data["created"])), endpoint,
                    str(data["deployment"]), int(data["version"]), tuple(sorted(cases)),
                    max(tokens) if tokens else 0, dict(data.get("fingerprint") or {}))
    (directory / REFERENCE_FILE).write_text(
        json.dumps(ref.to_dict(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return ref


# -- phase 2 ---------------------------------------------------------------------------------
def load(directory: Path) -> Reference:
    """``DIR/reference.json``; OSError/ValueError/KeyError/TypeError when missing or bad."""
    data = json.loads((directory / REFERENCE_FILE).read_text(encoding="utf-8"))
    return Reference(directory, _parse_time(str(data["created"])), str(data["endpoint"]),
                     str(data["deployment"]), int(data["version"]),
                     tuple(str(c) for c in data["cases"]), int(data["output_tokens"]),
                     dict(data.get("fingerprint") or {}))


def mismatch(ref: Reference, endpoint: str, deployment: str | None, max_age_h: float,
             now: datetime, fix: str) -> str | None:
    """Why this reference cannot judge this gate, in one sentence ending with ``fix``; None
    when it can."""
    where = f"the reference in {ref.directory}"
    if not same_endpoint(ref.endpoint, endpoint):
        return (f"{where} was measured on {ref.endpoint}, not on {endpoint}: measure one on "
                f"this endpoint just before its deploy with `{fix}`.")
    if deployment is not None and deployment != ref.deployment:
        return (f"{where} is of deployment '{ref.deployment}', not '{deployment}': measure "
                f"one of '{deployment}' just before its deploy with `{fix}`.")
    age = ref.age_h(now)
    if age > max_age_h:
        return (f"{where} is {age:.1f} h old (measured {ref.created.strftime(_TIME)}), older "
                f"than --reference-max-age {max_age_h:g} h: the night has moved on; measure a "
                f"fresh one just before the deploy with `{fix}`.")
    if age < -5.0 / 60.0:  # a clock a few minutes off is fine; a reference from the future is not
        return (f"{where} is dated {ref.created.strftime(_TIME)}, later than now: check the "
                f"box's clock, then measure a fresh one with `{fix}`.")
    return None


def judge_flags(ref: Reference) -> list[str]:
    """The pytest flags of phase 2: judged against exactly that version, the same night."""
    return ["--specperf-baseline-dir", str(ref.directory),
            "--specperf-deployment", ref.deployment,
            "--specperf-baseline-version", str(ref.version),
            "--specperf-require-baseline", "--specperf-same-night"]


def other_subset(ref: Reference, fix: str) -> str:
    """The sentence for a gate whose cases the reference does not hold (preflight said so
    before any request): another --perf-tests, -k, or output length."""
    return (f"the reference in {ref.directory} holds {', '.join(ref.cases)} at "
            f"{ref.output_tokens} output tokens, not every case this gate judges (another "
            f"--perf-tests, -k or output length?): measure it with the same perf tests and "
            f"pytest arguments with `{fix}`.")


def missing(directory: Path, why: str, fix: str) -> str:
    return (f"no usable reference in {directory} ({REFERENCE_FILE}: {why}): measure one just "
            f"before the deploy with `{fix}`.")


def now_utc() -> datetime:
    return datetime.now(timezone.utc)


def _parse_time(text: str) -> datetime:
    return datetime.strptime(text, _TIME).replace(tzinfo=timezone.utc)
