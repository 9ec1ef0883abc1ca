"""Versioned baselines: ``<root>/<deployment>/v<N>.json``, boring JSON, never overwritten.

A :class:`Baseline` is one file: provenance, the server fingerprint, per-case medians
with their spread, tolerance overrides and the context fits. :class:`BaselineStore`
lists, loads and writes them; an update always adds v<N+1> beside the old versions,
atomically and under a lock, so concurrent writers get distinct versions and a
reader never sees a half-written file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..core.errors import BaselineError, ConfigError
from ..core.limits import DEFAULT_TOLERANCES, DIRECTION, tolerance
from ..core.model import ContextFit
from ..core.stats import Summary
from ..measure import determinism
from ..measure.sample import METRICS, Measurement, sample_values
from ..servers.positions import case_shape
from ..settings.hints import perf_command
from .versions import REPAIR, Versions

SCHEMA_VERSION = 2
# Every schema this specperf reads; an older file is migrated as it is read (1: no lineage).
READS = (1, 2)
ABOUT = ("specperf baseline. Per metric: median, MAD and n over the repeats; 'direction' says "
         "which way is a regression; 'tolerance' is the limit in force when the file was "
         "written (informative). To change a limit edit 'tolerances' (file-wide) or a case's "
         "'tolerances' (that case only). Never edit a shipped version in place: write a new one.")
DIRECTION_NAMES = {+1: "higher_is_better", -1: "lower_is_better"}
_DEPLOYMENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class CaseBaseline:
    """The baseline medians of one case, and its own tolerance overrides."""

    text_class: str
    context: int
    output_tokens: int
    metrics: dict[str, Summary]
    tolerances: dict[str, float]
    # Exact acceptance (exact.py): per repeat index, the prompt's verify steps and
    # identities; whether the server repeated itself when this was written.
    prompts: dict[int, determinism.PromptRecord] = field(default_factory=dict)
    deterministic: bool | None = None
    # Each metric's per-request values (files written before they were stored have none):
    # the sweep test compares means of logs, whose error is a mean's, not a median's.
    values: dict[str, list[float]] = field(default_factory=dict)
    # Acceptance per draft position (mean conditional rate, index 0 = position 1) and avg
    # commit per 100 output tokens (judge/positions.py); empty where the server reports none.
    positions: list[float | None] = field(default_factory=list)
    along: list[float | None] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{self.text_class}-ctx{self.context}"

    def to_dict(self, file_tolerances: Mapping[str, float]) -> dict[str, Any]:
        limits = {**file_tolerances, **self.tolerances}
        metrics: dict[str, dict[str, Any]]
        metrics = {m: {**s.to_dict(), "direction": DIRECTION_NAMES[DIRECTION[m]],
                       "tolerance": tolerance(limits, m)} for m, s in self.metrics.items()}
        for m, vals in self.values.items():
            if m in metrics:
                metrics[m]["values"] = list(vals)
        out = {"text_class": self.text_class, "context": self.context,
               "output_tokens": self.output_tokens, "metrics": metrics,
               "tolerances": dict(self.tolerances)}
        if self.prompts:
            out["prompts"] = {str(k): r.to_dict() for k, r in sorted(self.prompts.items())}
        if self.deterministic is not None:
            out["deterministic"] = self.deterministic
        if self.positions:
            out["acceptance_positions"] = _rounded(self.positions)
        if self.along:
            out["commit_along"] = _rounded(self.along)
        return out


@dataclass(frozen=True)
class Baseline:
    """One baseline version of one deployment (the contents of one v<N>.json)."""

    deployment: str
    version: int
    created: str
    suite_version: str
    git_revision: str
    fingerprint: dict[str, Any]
    provenance: str
    simulated: bool
    cases: dict[str, CaseBaseline]
    fits: dict[str, ContextFit]
    tolerances: dict[str, float]
    # Reproducible prompts: the seed of every measured prompt's nonce (reuse.py), and the
    # request digest (digest.py); None in files written before them.
    prompt_seed: str | None = None
    request_digest: dict[str, Any] | None = None
    # The runs it was written from, by run id (baselines/merge.py); empty in older files.
    runs: tuple[str, ...] = ()
    # Why it replaced the one before (schema 2, plugin/updatecheck.py): ``previous`` version
    # (None: the first), ``moved`` per case and metric (change, low, high) against it, and
    # ``accepted`` (reason, who, verdicts; None when nothing needed accepting). None: a
    # schema-1 file, which recorded no reason.
    lineage: dict[str, Any] | None = None

    @property
    def run_count(self) -> int:
        """How many runs its medians come from (1 for a file that does not say)."""
        return max(1, len(self.runs))

    @classmethod
    def from_run(cls, deployment: str, fingerprint: dict[str, Any],
                 measurements: Sequence[Measurement], fits: dict[str, ContextFit], *,
                 version: int, suite_version: str, git_revision: str, provenance: str,
                 simulated: bool, prompt_seed: str | None = None,
                 request_digest: dict[str, Any] | None = None) -> Baseline:
        """A baseline from this run's measurements, stamped with the current UTC time."""
        cases = {m.case.id: CaseBaseline(m.case.text_class, m.case.context,
                                         m.case.output_tokens, m.summaries(), {},
                                         determinism.records(m.samples) if prompt_seed else {},
                                         determinism.deterministic(m.samples),
                                         sample_values(m.measured),
                                         *case_shape(s.raw for s in m.measured))
                 for m in measurements}
        created = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        return cls(deployment, version, created, suite_version, git_revision, dict(fingerprint),
                   provenance, simulated, cases, dict(fits), {}, prompt_seed,
                   request_digest)

    def to_json(self) -> str:
        """Pretty-printed, sorted JSON with a trailing newline, so reviews read the diff."""
        data = {
            "schema_version": SCHEMA_VERSION, "about": ABOUT,
            "deployment": self.deployment, "version": self.version, "created": self.created,
            "suite_version": self.suite_version, "git_revision": self.git_revision,
            "fingerprint": self.fingerprint, "provenance": self.provenance,
            "simulated": self.simulated, "tolerances": self.tolerances,
            "cases": {cid: c.to_dict(self.tolerances) for cid, c in self.cases.items()},
            "fits": {tc: f.to_dict() for tc, f in self.fits.items()},
        }
        if self.prompt_seed is not None:
            data["prompt_seed"] = self.prompt_seed
        if self.request_digest is not None:
            data["request_digest"] = self.request_digest
        if self.runs:
            data["runs"] = list(self.runs)
        if self.lineage is not None:
            data["lineage"] = self.lineage
        return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, text: str, path: Path | str) -> Baseline:
        """Parse one file; any defect is a BaselineError naming the file and the fix."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise BaselineError(f"baseline {path} is not valid JSON ({exc}): {REPAIR}.") from exc
        return _Reader(str(path)).baseline(data)


class _Reader:
    """Checks a parsed baseline field by field, so an error names the exact key."""

    def __init__(self, path: str) -> None:
        self.path = path

    def lineage(self, data: Mapping[str, Any], schema: int) -> dict[str, Any] | None:
        """The file's lineage; the migration of a schema-1 file: it has none to read."""
        if schema == 1:
            return None
        found: dict[str, Any] | None = self.optional(data, "lineage", dict)
        if found is not None:
            for key, kind in (("previous", (int, type(None))), ("moved", dict),
                              ("accepted", (dict, type(None)))):
                self.get(found, key, kind, "lineage")
        return found

    def fail(self, where: str, problem: str) -> BaselineError:
        return BaselineError(f"baseline {self.path}: {where} {problem}: {REPAIR}.")

    def get(self, obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...],
            where: str) -> Any:
        here = f"{where}.{key}" if where else key
        if key not in obj:
            raise self.fail(here, "is missing")
        value = obj[key]
        is_bool = isinstance(value, bool)
        if not isinstance(value, kind) or (is_bool and bool not in _as_tuple(kind)):
            raise self.fail(here, f"should be {_kind_name(kind)}, found {value!r}")
        return value

    def baseline(self, data: Any) -> Baseline:
        if not isinstance(data, dict):
            raise self.fail("the top level", "should be an object")
        schema = self.get(data, "schema_version", int, "")
        if schema not in READS:
            raise self.fail("schema_version", f"is {schema}, this specperf reads "
                            f"{' and '.join(map(str, READS))}")
        tolerances = self.tolerances(self.get(data, "tolerances", dict, ""), "tolerances")
        cases = self.get(data, "cases", dict, "")
        fits = self.get(data, "fits", dict, "")
        return Baseline(
            self.get(data, "deployment", str, ""), self.get(data, "version", int, ""),
            self.get(data, "created", str, ""), self.get(data, "suite_version", str, ""),
            self.get(data, "git_revision", str, ""), self.get(data, "fingerprint", dict, ""),
            self.get(data, "provenance", str, ""), self.get(data, "simulated", bool, ""),
            {cid: self.case(cid, c) for cid, c in cases.items()},
            {tc: self.fit(tc, f) for tc, f in fits.items()}, tolerances,
            self.optional(data, "prompt_seed", str), self.optional(data, "request_digest", dict),
            self.runs(data.get("runs", [])), self.lineage(data, schema))

    def runs(self, data: Any) -> tuple[str, ...]:
        """The run ids a baseline was written from (optional: older files have none)."""
        if not isinstance(data, list) or not all(isinstance(r, str) and r for r in data):
            raise self.fail("runs", f"should be a list of run ids, found {data!r:.80}")
        return tuple(data)

    def optional(self, obj: Mapping[str, Any], key: str, kind: type) -> Any:
        """A key that older files lack: None when absent, checked when present."""
        return self.get(obj, key, kind, "") if key in obj else None

    def case(self, case_id: str, data: Any) -> CaseBaseline:
        where = f"cases.{case_id}"
        if not isinstance(data, dict):
            raise self.fail(where, "should be an object")
        metrics = self.get(data, "metrics", dict, where)
        case = CaseBaseline(
            self.get(data, "text_class", str, where), self.get(data, "context", int, where),
            self.get(data, "output_tokens", int, where),
            {m: self.summary(m, s, f"{where}.metrics") for m, s in metrics.items()},
            self.tolerances(data.get("tolerances", {}), f"{where}.tolerances"),
            self.prompts(data.get("prompts", {}), f"{where}.prompts"),
            self.get(data, "deterministic", bool, where) if "deterministic" in data else None,
            {m: self.values(s, f"{where}.metrics.{m}") for m, s in metrics.items()
             if isinstance(s, dict) and "values" in s},
            self.rates(data.get("acceptance_positions", []), f"{where}.acceptance_positions"),
            self.rates(data.get("commit_along", []), f"{where}.commit_along"))
        if case.id != case_id:
            raise self.fail(where, f"describes case {case.id}, not {case_id}")
        return case

    def rates(self, data: Any, where: str) -> list[float | None]:
        """A list of rates or nulls (an acceptance shape, judge/positions.py)."""
        if not isinstance(data, list) or not all(
                v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))
                for v in data):
            raise self.fail(where, f"should be a list of numbers or nulls, found {data!r:.80}")
        return [None if v is None else float(v) for v in data]

    def prompts(self, data: Any, where: str) -> dict[int, determinism.PromptRecord]:
        if not isinstance(data, dict):
            raise self.fail(where, "should be an object")
        out = {}
        for key, entry in data.items():
            here = f"{where}.{key}"
            if not key.isdigit() or not isinstance(entry, dict):
                raise self.fail(here, "should be a repeat index holding an object")
            out[int(key)] = determinism.PromptRecord(self.get(entry, "steps", int, here),
                                               self.get(entry, "prompt", str, here),
                                               self.get(entry, "output", str, here))
        return out

    def values(self, data: Mapping[str, Any], where: str) -> list[float]:
        """A metric's stored per-request values (optional: older files have none)."""
        vals = data["values"]
        if not isinstance(vals, list) or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in vals):
            raise self.fail(f"{where}.values", "should be a list of non-negative numbers")
        return [float(v) for v in vals]

    def summary(self, metric: str, data: Any, where: str) -> Summary:
        here = f"{where}.{metric}"
        if metric not in METRICS:
            raise self.fail(here, f"is not a metric (known: {', '.join(METRICS)})")
        if not isinstance(data, dict):
            raise self.fail(here, "should be an object")
        direction = data.get("direction", DIRECTION_NAMES[DIRECTION[metric]])
        if direction != DIRECTION_NAMES[DIRECTION[metric]]:
            raise self.fail(f"{here}.direction", f"is {direction!r}, but {metric} is "
                            f"{DIRECTION_NAMES[DIRECTION[metric]]}")
        return Summary(float(self.get(data, "median", (int, float), here)),
                       float(self.get(data, "mad", (int, float), here)),
                       self.get(data, "n", int, here))

    def fit(self, text_class: str, data: Any) -> ContextFit:
        where = f"fits.{text_class}"
        if not isinstance(data, dict):
            raise self.fail(where, "should be an object")
        for key in ("a_ms", "b_ms_per_token", "residual_ms"):
            self.get(data, key, (int, float), where)
        self.get(data, "n_points", int, where)
        # The fit's standard errors (absent from baselines written before fits had them).
        for key in ("a_se_ms", "b_se_ms_per_token", "cov_ab"):
            if data.get(key) is not None:
                self.get(data, key, (int, float), where)
        if data.get("dof") is not None:
            self.get(data, "dof", int, where)
        return ContextFit.from_dict(data)

    def tolerances(self, data: Any, where: str) -> dict[str, float]:
        if not isinstance(data, dict):
            raise self.fail(where, "should be an object")
        out = {}
        for key, value in data.items():
            if key not in DEFAULT_TOLERANCES:
                raise self.fail(f"{where}.{key}", "is not a known tolerance "
                                f"({', '.join(sorted(DEFAULT_TOLERANCES))})")
            value = float(self.get(data, key, (int, float), where))
            if not 0.0 < value <= 1.0:
                raise self.fail(f"{where}.{key}", f"is {value:g}, outside (0, 1]")
            out[key] = value
        return out


def _rounded(values: Sequence[float | None]) -> list[float | None]:
    return [None if v is None else round(v, 4) for v in values]


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {int: "an integer", float: "a number", str: "a string", bool: "true or false",
             dict: "an object"}
    kinds = _as_tuple(kind)
    return "a number" if float in kinds else names.get(kinds[0], kinds[0].__name__)


# --- the store ---------------------------------------------------------------------------


class BaselineStore:
    """The versions of every deployment under one root directory: each deployment's main
    baselines in ``<root>/<deployment>/``, its other dimensions (concurrency.py) in
    subdirectories of it, every one kept by :class:`~specperf.baselines.versions.Versions`.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def directory(self, deployment: str) -> Path:
        if not _DEPLOYMENT_NAME.match(deployment):
            raise ConfigError(f"deployment name {deployment!r} cannot be a directory name: use "
                              f"letters, digits, '.', '_' and '-', starting with a letter or "
                              f"digit.")
        return self.root / deployment

    def files(self, deployment: str, dimension: str = "", noun: str = "baseline") -> Versions:
        """The versions of one dimension of ``deployment`` ("": the main job's cases)."""
        directory = self.directory(deployment)
        return Versions(directory / dimension if dimension else directory, noun)

    def path(self, deployment: str, version: int) -> Path:
        return self.files(deployment).path(version)

    def versions(self, deployment: str) -> list[int]:
        """The version numbers present, ascending."""
        return self.files(deployment).numbers()

    def latest(self, deployment: str) -> int | None:
        return self.files(deployment).latest()

    def load(self, deployment: str, version: int | None = None) -> Baseline:
        """Load one version (None: the latest)."""
        versions = self.versions(deployment)
        if not versions:
            command = perf_command("-m", "context_scaling", "--specperf-update-baselines")
            raise BaselineError(f"no baseline for deployment {deployment!r} in "
                                f"{self.directory(deployment)}: create one with "
                                f"`{command}` against a quiet server.")
        chosen = versions[-1] if version is None else version
        if chosen not in versions:
            listed = ", ".join(str(v) for v in versions)
            raise BaselineError(f"baseline v{chosen} of {deployment!r} does not exist in "
                                f"{self.directory(deployment)} (versions: {listed}): pick one "
                                f"of those, or leave out --specperf-baseline-version for the "
                                f"latest.")
        return self._read(deployment, chosen)

    def _read(self, deployment: str, version: int) -> Baseline:
        path = self.path(deployment, version)
        baseline = Baseline.from_json(self.files(deployment).read(version), path)
        if (baseline.deployment, baseline.version) != (deployment, version):
            raise BaselineError(f"baseline {path} says it is {baseline.deployment!r} "
                                f"v{baseline.version}, which conflicts with its place: {REPAIR}.")
        return baseline

    def write_next(self, baseline: Baseline) -> Path:
        """Write ``baseline`` as v<latest+1> of its deployment; return the new file's path."""
        return self.files(baseline.deployment).write_next(
            lambda version: replace(baseline, version=version).to_json())
