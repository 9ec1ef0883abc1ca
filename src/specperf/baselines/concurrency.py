"""Concurrency baselines: ``<root>/<deployment>/concurrency/v<N>.json``, never overwritten.

Beside the main job's versions (baselines/store.py), one file per version of the
concurrency_scaling test: the case it bursts, per level the medians with their spread
(tok/s per request, aggregate tok/s, avg commit, step time, decode tok/s) and the fit of
step time against batch size. Written by ``--specperf-update-baselines`` from a clean run of every
planned level, with the same atomic, locked, exclusive publish as the main baselines.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..core.errors import BaselineError
from ..core.model import ContextFit
from ..core.stats import Summary
from ..measure.burst import LEVEL_METRICS, Level, batch_fit
from .store import BaselineStore
from .versions import REPAIR, Versions

SCHEMA_VERSION = 2
# Every schema this specperf reads; a schema-1 file (no lineage) is read as written.
READS = (1, 2)
DIRECTORY = "concurrency"
ABOUT = ("specperf concurrency baseline. Per concurrency level: median, MAD and n of tok/s per "
         "request, aggregate tok/s (all tokens / burst wall), avg commit, step time and decode "
         "tok/s; 'fit' is step_ms = a + b * batch size. Never edit in place: write a new one.")


@dataclass(frozen=True)
class ConcurrencyBaseline:
    """One version: provenance, the case, per-level medians, the batch fit."""

    deployment: str
    version: int
    created: str
    suite_version: str
    git_revision: str
    fingerprint: dict[str, Any]
    simulated: bool
    case: dict[str, Any]  # text_class, context, output_tokens
    levels: dict[int, dict[str, Summary]]
    fit: ContextFit | None
    # Why it replaced the one before, as the main baselines keep it (baselines/store.py):
    # previous, moved, accepted; None in a schema-1 file.
    lineage: dict[str, Any] | None = None

    @classmethod
    def from_levels(cls, deployment: str, fingerprint: Mapping[str, Any],
                    levels: Mapping[int, Level], *, suite_version: str, git_revision: str,
                    simulated: bool) -> ConcurrencyBaseline:
        first = next(iter(levels.values()))
        created = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        fit = batch_fit([(c, lv.values("step_ms")) for c, lv in sorted(levels.items())])
        return cls(deployment, 0, created, suite_version, git_revision, dict(fingerprint),
                   simulated, {k: v for k, v in first.case.to_dict().items() if k != "id"},
                   {c: lv.summaries() for c, lv in sorted(levels.items())}, fit)

    def to_json(self) -> str:
        data = {"schema_version": SCHEMA_VERSION, "about": ABOUT,
                "deployment": self.deployment, "version": self.version,
                "created": self.created, "suite_version": self.suite_version,
                "git_revision": self.git_revision, "fingerprint": self.fingerprint,
                "simulated": self.simulated, "case": self.case,
                "levels": {str(c): {m: s.to_dict() for m, s in ms.items()}
                           for c, ms in sorted(self.levels.items())},
                "fit": None if self.fit is None else self.fit.to_dict()}
        if self.lineage is not None:
            data["lineage"] = self.lineage
        return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, text: str, path: Path) -> ConcurrencyBaseline:
        """Parse one file; any defect is a BaselineError naming the file and the fix."""
        try:
            data = json.loads(text)
            if data["schema_version"] not in READS:
                raise ValueError(f"schema_version {data['schema_version']}")
            lineage = data.get("lineage") if data["schema_version"] > 1 else None
            if lineage is not None and not isinstance(lineage, dict):
                raise ValueError(f"lineage {lineage!r:.80}")
            levels = {int(c): {m: Summary(float(s["median"]), float(s["mad"]), int(s["n"]))
                               for m, s in ms.items() if m in LEVEL_METRICS}
                      for c, ms in data["levels"].items()}
            fit = None if data.get("fit") is None else ContextFit.from_dict(data["fit"])
            return cls(str(data["deployment"]), int(data["version"]), str(data["created"]),
                       str(data["suite_version"]), str(data["git_revision"]),
                       dict(data["fingerprint"]), bool(data["simulated"]), dict(data["case"]),
                       levels, fit, lineage)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise BaselineError(f"concurrency baseline {path} is not readable ({exc!r}): "
                                f"{REPAIR}.") from exc


class ConcurrencyStore:
    """The concurrency versions of every deployment, in a ``concurrency`` directory beside
    each deployment's main versions (the same root, the same :class:`BaselineStore`)."""

    def __init__(self, root: Path) -> None:
        self.main = BaselineStore(root)

    def files(self, deployment: str) -> Versions:
        return self.main.files(deployment, DIRECTORY, "concurrency baseline")

    def directory(self, deployment: str) -> Path:
        return self.files(deployment).directory

    def path(self, deployment: str, version: int) -> Path:
        """Where version ``version`` of ``deployment``'s concurrency baseline lives."""
        return self.files(deployment).path(version)

    def latest(self, deployment: str) -> int | None:
        return self.files(deployment).latest()

    def load(self, deployment: str) -> ConcurrencyBaseline | None:
        """The latest version, None when there is none yet."""
        files = self.files(deployment)
        version = files.latest()
        if version is None:
            return None
        return ConcurrencyBaseline.from_json(files.read(version), files.path(version))

    def write_next(self, baseline: ConcurrencyBaseline) -> Path:
        """Write ``baseline`` as the next version; return its path."""
        return self.files(baseline.deployment).write_next(
            lambda version: replace(baseline, version=version).to_json())
