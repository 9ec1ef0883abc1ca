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
from collections import Counter
from collections.abc import Mapping, Sequence
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
# Requests per reference case the design below does not name (REFERENCE_CASE_REPEATS names
# the subset's). Same night, the run terms cancel and the reference's request spread is the
# comparison's floor (top-ups shrink only tonight's side): at 600 tokens a case, 12 caught a
# 5 % step rise in 97 % of gates (benchmarks/sweep_power.py "same-night gate 3%", seed 11).
REFERENCE_REPEATS = 12
# Decode lengths by purpose (issue 52; benchmarks/sweep_power.py "same-night gate lean 3%"):
# step time is one verify pass, whose per-request noise does not shrink with the output, and
# both phases send identical prompts and lengths, so the length's bias cancels. These cases
# decode SHORT_TOKENS (16 verify steps of padding) in both phases; reasoning-ctx3333, the
# traffic, decodes --specperf-output-tokens and sees acceptance along the output (the
# incident's trap: a drop after the 200th token).
SHORT_TOKENS = 128
SHORT_CASES = ("padding-ctx13", "padding-ctx3333", "reasoning-ctx13")
# The candidate's parser path (the chat route with the deployed parsers against the native
# route, interleaved, one run) decodes SHORT_TOKENS too: it compares two routes of one run, so
# no reference holds it, and a parser's cost per token weighs the same on any length. At 600
# tokens it was 8 requests of ~20 s on reasoning-ctx3333, 157 s of a candidate's 209 s on the
# simulator (docs/benchmarks.md §11). A cost per response weighs more on a short response:
# the gate's decode line says how much.
PATH_TOKENS = SHORT_TOKENS
# Every case warms up at SHORT_TOKENS in both phases: the long case's warm-up re-sent its
# 600-token request (19.5 s of a drained box a phase) only to check the server repeats itself.
# Unchecked, an identical exact-acceptance result against the reference still settles
# acceptance (the same verify steps on the same prompt), and a changed one goes to the
# statistics (judge/exact.py): the same verdicts in the model, 170 → 140 GPU s per gate
# (docs/benchmarks.md §11).
WARMUP_TOKENS = SHORT_TOKENS
# Requests per case by purpose, from the same model (tuned on seeds 3, 5, 7; docs/benchmarks.md
# §11): the reference's are the comparison's floor, so most go where a request is cheapest
# (padding-ctx13 at 128 tokens, under a second); the long case's acceptance is settled
# exactly where the server repeats itself, and its statistics need few requests (3 in the
# reference: at 2, a drop on its class alone is judged on one degree of freedom). The
# candidate's are its first requests: the sweep's sequential test takes more where they decide.
# Other cases (another -k) take REFERENCE_REPEATS and the run's repeats.
REFERENCE_CASE_REPEATS = {"padding-ctx13": 32, "padding-ctx3333": 4, "reasoning-ctx13": 4,
                          "reasoning-ctx3333": 3}
CANDIDATE_CASE_REPEATS = {"padding-ctx13": 8, "padding-ctx3333": 2, "reasoning-ctx3333": 1}
# A reference measures whatever runs now, however it compares with an earlier reference in
# the same directory: an update that judges first (plugin/updatecheck.py) must not refuse it,
# and the file says why it moved.
REFERENCE_ACCEPT = "same-night reference: the running deployment, measured before a deploy"
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
    # What measuring it cost the box: requests sent and server seconds (phase 2's cost line
    # counts both phases). 0 in a reference written before it was recorded.
    requests: int = field(default=0, compare=False)
    server_s: float = field(default=0.0, compare=False)
    # Each case's output length (a reference written before they differed: output_tokens).
    case_tokens: dict[str, int] = field(default_factory=dict, compare=False)

    def lengths(self) -> dict[str, int]:
        return {c: self.case_tokens.get(c, self.output_tokens) for c in self.cases}

    def to_dict(self) -> dict[str, Any]:
        return {"created": self.created.strftime(_TIME), "endpoint": self.endpoint,
                "deployment": self.deployment, "version": self.version,
                "baseline": f"{self.deployment}/v{self.version}.json",
                "cases": list(self.cases), "output_tokens": self.output_tokens,
                "fingerprint": self.fingerprint,
                "cost": {"requests": self.requests, "server_s": self.server_s},
                "case_output_tokens": self.lengths()}

    def age_h(self, now: datetime) -> float:
        return (now - self.created).total_seconds() / 3600.0

    def describe(self) -> str:
        """'deployment d v3, 4 cases at 600 output tokens, measured 2026-12-02T19:40:00Z on URL'
        (cases at several lengths: '4 cases (3 at 128 output tokens, 1 at 600)')."""
        return (f"deployment {self.deployment} v{self.version}, {self.cases_text()}, measured "
                f"{self.created.strftime(_TIME)} on {self.endpoint}")

    def cases_text(self) -> str:
        """'4 cases at 600 output tokens', or '4 cases (3 at 128 output tokens, 1 at 600)'."""
        counts = sorted(Counter(self.lengths().values()).items())
        if len(counts) <= 1:
            return f"{len(self.cases)} cases at {self.output_tokens} output tokens"
        parts = [f"{n} at {tokens}" for tokens, n in counts]
        parts[0] += " output tokens"
        return f"{len(self.cases)} cases ({', '.join(parts)})"

    def decode_sentence(self) -> str | None:
        """What the short decodes can and cannot see, and which case sees the rest; None
        when every case decodes one length."""
        lengths = self.lengths()
        longest = max(lengths.values(), default=0)
        short = sorted((c for c, n in lengths.items() if n < longest), key=lengths.__getitem__)
        if not short:
            return None
        long_ = [c for c, n in lengths.items() if n == longest]
        at = sorted({lengths[c] for c in short})
        return (f"{', '.join(short)} decode {'/'.join(map(str, at))} tokens: enough for step "
                f"time and prefill, blind to acceptance that changes later in the output; "
                f"{', '.join(long_)} decode{'s' if len(long_) == 1 else ''} {longest} tokens "
                f"to see it.")


def path_sentence(record: Mapping[str, Any] | None, longest: int) -> str | None:
    """What the parser path's short decode sees, when the run measured one at another length
    than ``longest`` (the gate's long case); None otherwise."""
    lengths = {int(p["case"]["output_tokens"]) for p in (record or {}).get("paths") or ()
               if isinstance(p, Mapping) and isinstance(p.get("case"), Mapping)
               and "output_tokens" in p["case"]}
    if len(lengths) != 1 or (n := lengths.pop()) >= longest:
        return None
    return (f"The parser path compares the chat route with the native one at {n} tokens: a "
            f"parser cost per token weighs as much as at {longest} tokens, one per response up "
            f"to {longest / n:.1f} times as much.")


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
    """The pytest flags of phase 1 (with ``SUBSET_MARKER``): the subset's grid, each case at
    its length and requests by purpose (``SHORT_CASES``, ``REFERENCE_CASE_REPEATS``; another
    case at least ``REFERENCE_REPEATS``), written as a new baseline version into
    ``directory`` from tonight's run alone (never merged with runs of other nights, whatever
    ``baseline_runs`` the ini or environment sets), accepted whatever an earlier reference in
    the directory says (``REFERENCE_ACCEPT``)."""
    return ["--specperf-baseline-dir", str(directory),
            f"--specperf-contexts={','.join(map(str, SUBSET_CONTEXTS))}",
            f"--specperf-text-classes={','.join(SUBSET_CLASSES)}",
            f"--specperf-baseline-repeats={REFERENCE_REPEATS}", "--specperf-baseline-runs=1",
            "--specperf-update-baselines", f"--specperf-accept={REFERENCE_ACCEPT}",
            length_flag(), repeats_flag(REFERENCE_CASE_REPEATS),
            f"--specperf-warmup-output-tokens={WARMUP_TOKENS}"]


def repeats_flag(counts: dict[str, int]) -> str:
    return "--specperf-case-repeats=" + ",".join(f"{c}={n}" for c, n in counts.items())


def length_flag() -> str:
    """The decode lengths by purpose, the same in both phases (SHORT_CASES)."""
    return "--specperf-case-output-tokens=" + ",".join(f"{c}={SHORT_TOKENS}" for c in SHORT_CASES)


def baseline_files(directory: Path) -> set[Path]:
    return set(directory.glob("*/v*.json"))


def written(directory: Path, before: set[Path], endpoint: str,
            cost: tuple[int, float] = (0, 0.0)) -> Reference | None:
    """The reference phase 1 wrote (the baseline file new since ``before``), recorded in
    ``reference.json`` with what it ``cost`` (requests, server seconds); None when the run
    wrote none."""
    new = sorted(baseline_files(directory) - before, key=lambda p: p.stat().st_mtime)
    if not new:
        return None
    data = json.loads(new[-1].read_text(encoding="utf-8"))
    cases = data.get("cases", {})
    tokens = {cid: int(c.get("output_tokens", 0)) for cid, c in cases.items()}
    ref = Reference(directory, _parse_time(str(data["created"])), endpoint,
                    str(data["deployment"]), int(data["version"]), tuple(sorted(cases)),
                    max(tokens.values(), default=0), dict(data.get("fingerprint") or {}),
                    cost[0], cost[1], tokens)
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
                     dict(data.get("fingerprint") or {}),
                     int((data.get("cost") or {}).get("requests", 0)),
                     float((data.get("cost") or {}).get("server_s", 0.0)),
                     {str(c): int(n) for c, n in (data.get("case_output_tokens") or {}).items()})


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
            "--specperf-require-baseline", "--specperf-same-night", length_flag(),
            repeats_flag(CANDIDATE_CASE_REPEATS), f"--specperf-path-output-tokens={PATH_TOKENS}",
            f"--specperf-warmup-output-tokens={WARMUP_TOKENS}"]


def other_subset(ref: Reference, fix: str) -> str:
    """The sentence for a gate whose cases the reference does not hold (preflight said so
    before any request): another --perf-tests, -k, or output length."""
    lengths = ref.lengths()
    held = ", ".join(f"{c} at {lengths[c]}" for c in ref.cases)
    return (f"the reference in {ref.directory} holds {held} output tokens, not every case "
            f"this gate judges at its output length (another "
            f"--perf-tests, -k or output length?): measure it with the same perf tests and "
            f"pytest arguments with `{fix}`.")


def missing(directory: Path, why: str, fix: str) -> str:
    return (f"no usable reference in {directory} ({REFERENCE_FILE}: {why}): measure one just "
            f"before the deploy with `{fix}`.")


def now_utc() -> datetime:
    return datetime.now(timezone.utc)


def _parse_time(text: str) -> datetime:
    return datetime.strptime(text, _TIME).replace(tzinfo=timezone.utc)
