"""The results document of a run: ``results.json``, built once from values.

A results document is plain JSON, versioned by ``schema_version`` and described by
``results.schema.json`` beside this module (documented in docs/results.md). It is built
from values only (collected measurements, verdicts, the baseline), so the pytest plugin,
the CLI and the benchmark share it. The record judges nothing: every status in it — the
case verdicts and their predict-and-reconcile rows (:mod:`specperf.judge.reconcile`) — was
decided when the case was judged, and is copied here.

The room's other jobs live beside this module, one each: :mod:`.schema` (the schema,
validating and loading a file), :mod:`.scrub` (no secret reaches a record), :mod:`.files`
(writing results.json and the history line) and :mod:`.readers` (a recorded case's medians
and context). Each name is imported from the module that defines it, never through this one
(tests/test_architecture.py).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ..baselines.store import Baseline
from ..core.contract import REGRESSION
from ..core.fingerprint import fingerprint_differences
from ..core.model import ContextFit, fit_repeats
from ..judge import reconcile
from ..servers.positions import ALONG_TOKENS, case_shape
from . import lineage
from .readers import mean_context
from .schema import SCHEMA_NAME, SCHEMA_VERSION

__all__ = ["RunInfo", "acceptance_shapes", "baseline_dict", "build", "concurrency_section",
           "new_run_id", "resolution_of", "run_fits", "unexplained", "utc_now"]


@dataclass(frozen=True)
class RunInfo:
    """What a run knows about itself, besides what its tests collected."""

    run_id: str
    created: str
    duration_s: float
    lock_wait_s: float | None
    settings: dict[str, Any]
    suite_version: str
    git_revision: str


def new_run_id(now: datetime | None = None) -> str:
    """Sortable and unique: UTC time plus a short random suffix, e.g. 20250101-120000-3fa2."""
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{secrets.token_hex(2)}"


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def build(run: RunInfo, *, server: Mapping[str, Any], measurements: Mapping[str, Any],
          verdicts: list[dict[str, Any]], outcomes: Mapping[str, str],
          errors: Mapping[str, str], baseline: Baseline | None,
          paths: Sequence[Mapping[str, Any]] = (),
          partial: Mapping[str, Any] | None = None,
          concurrency: Mapping[str, Any] | None = None,
          concurrency_baseline: Mapping[str, Any] | None = None,
          not_judged: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The results document of one run (see results.schema.json).

    ``not_judged``: why each judged test that reached no verdict has none, by case id
    (plugin/conclude.py not_judged: no baseline entry, nothing to fit, a baseline-writing run).

    ``partial``: the samples of cases that errored or were interrupted before they were
    measured, by case id; kept apart from ``measurements`` so no fit or verdict reads them.
    ``concurrency_baseline``: the concurrency baseline the levels were compared with (its
    identity and path, as the measuring process loaded it), None when there was none.

    Built from what the tests reported (with xdist: what the workers sent the controller),
    so it is the same either way. This run's context fits are computed here, once; the
    predict-and-reconcile rows are the ones the case verdicts carry (judged with each case);
    every view renders them from it.
    """
    fingerprint = dict(server.get("fingerprint") or {})
    doc: dict[str, Any] = {
        "schema": SCHEMA_NAME, "schema_version": SCHEMA_VERSION, "run_id": run.run_id,
        "created": run.created, "duration_s": run.duration_s, "lock_wait_s": run.lock_wait_s,
        "suite_version": run.suite_version, "git_revision": run.git_revision,
        "settings": run.settings, "server": dict(server), "fingerprint": fingerprint,
        "baseline": None if baseline is None else baseline_dict(baseline),
        "fingerprint_differences": [] if baseline is None else
        fingerprint_differences(baseline.fingerprint, fingerprint),
        "measurements": dict(measurements),
        "fits": {k: f.to_dict() for k, f in run_fits(measurements).items()},
        "verdicts": verdicts, "reconcile": reconcile.rows(verdicts),
        "outcomes": dict(outcomes), "errors": dict(errors),
        "paths": [dict(p) for p in paths],
        "partial": {cid: dict(data) for cid, data in sorted((partial or {}).items())
                    if cid not in measurements},
        "concurrency": concurrency_section(concurrency or {}),
        "concurrency_baseline": None if concurrency_baseline is None
        else dict(concurrency_baseline),
        "acceptance_shapes": acceptance_shapes(measurements, baseline),
        "resolution": resolution_of(verdicts),
        "not_judged": dict(sorted((not_judged or {}).items())),
    }
    return doc


def resolution_of(verdicts: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The run's resolution: the widest-scoped sweep's (the one over the most cases)."""
    found = [v["resolution"] for v in verdicts if v.get("resolution")]
    return max(found, key=lambda r: len(r.get("factors") or {}), default=None)


def acceptance_shapes(measurements: Mapping[str, Any],
                      baseline: Baseline | None) -> dict[str, Any]:
    """Per case: acceptance per draft position (mean conditional rate) and avg commit per
    100 output tokens, this run's and the baseline's (judge/positions.py judges them), and
    where they came from ("" when the server reports none)."""
    out: dict[str, Any] = {}
    for cid, data in sorted(measurements.items()):
        raws = [s.get("raw") or {} for s in data.get("samples", []) if not s.get("warmup")]
        positions, along = case_shape(raws)
        entry = baseline.cases.get(cid) if baseline is not None else None
        out[cid] = {"positions": positions, "along": along,
                    "base_positions": list(entry.positions) if entry else [],
                    "base_along": list(entry.along) if entry else [],
                    "positions_from": _first(raws, "positions_from"),
                    "along_from": _first(raws, "along_from"),
                    "along_tokens": ALONG_TOKENS}
    return out


def _first(raws: Sequence[Mapping[str, Any]], key: str) -> str:
    return next((str(r[key]) for r in raws if r.get(key)), "")


def concurrency_section(levels: Mapping[str, Any]) -> dict[str, Any] | None:
    """The concurrency levels (measure/burst.py Level.to_dict) as rows, with how acceptance
    and step time change against the lowest level, the fit of step time against batch size
    and the GPU-seconds (Σ burst walls); None when no level was measured."""
    if not levels:
        return None
    ordered = sorted(levels.values(), key=lambda d: d["concurrency"])
    rows = [_level_row(d) for d in ordered]
    first = rows[0]
    for row in rows:
        for key, metric in (("commit_vs_c1", "avg_commit"), ("step_vs_c1", "step_ms")):
            row[key] = row[metric] / first[metric] - 1.0 \
                if row[metric] is not None and first[metric] else None
    points = [(float(d["concurrency"]), [float(s["step_ms"]) for b in d["bursts"]
                                         if not b["warmup"] for s in b["samples"]
                                         if s.get("step_ms") is not None]) for d in ordered]
    fit = fit_repeats(points)
    return {"case": ordered[0]["case"], "levels": rows,
            "fit": None if fit is None else fit.to_dict(),
            "gpu_s": sum(r["gpu_s"] for r in rows),
            "bursts": {d["id"]: d["bursts"] for d in ordered}}


def _level_row(data: Mapping[str, Any]) -> dict[str, Any]:
    def med(metric: str) -> float | None:
        entry = data["summaries"].get(metric)
        return None if entry is None else float(entry["median"])

    server = data.get("server_step_ms")
    return {"id": data["id"], "concurrency": data["concurrency"], "tok_s": med("tok_s"),
            "agg_tok_s": med("agg_tok_s"), "avg_commit": med("avg_commit"),
            "step_ms": med("step_ms"), "decode_tok_s": med("decode_tok_s"),
            "server_step_ms": None if server is None else float(server["median"]),
            "summaries": data["summaries"], "gpu_s": float(data["gpu_s"])}


def unexplained(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The record's reconcile rows whose slowdown neither acceptance nor step time explains."""
    return [r for r in doc.get("reconcile", []) if r["status"] == REGRESSION]


def baseline_dict(base: Baseline) -> dict[str, Any]:
    """The parts of a baseline a report shows: identity, why it was written (its lineage's
    reason, record/lineage.py), fingerprint, medians, fits."""
    return {"deployment": base.deployment, "version": base.version, "created": base.created,
            "reason": lineage.reason(base.lineage),
            "suite_version": base.suite_version, "git_revision": base.git_revision,
            "fingerprint": base.fingerprint, "simulated": base.simulated,
            "cases": {cid: {"output_tokens": c.output_tokens,
                            "metrics": {m: s.to_dict() for m, s in c.metrics.items()},
                            "acceptance_positions": list(c.positions),
                            "commit_along": list(c.along)}
                      for cid, c in base.cases.items()},
            "fits": {tc: f.to_dict() for tc, f in base.fits.items()}}


def run_fits(measurements: Mapping[str, Any]) -> dict[str, ContextFit]:
    """This run's step_ms = a + b·context per text class, from the recorded repeats (the
    points :func:`specperf.measure.sample.context_fit` fits, read back from the record)."""
    points: dict[str, list[tuple[float, list[float]]]] = {}
    for data in measurements.values():
        steps = _repeat_values(data)["step_ms"]
        if steps:
            points.setdefault(data["case"]["text_class"], []).append(
                (mean_context(data["case"]), steps))
    fits = {name: fit_repeats(pts) for name, pts in sorted(points.items())}
    return {name: fit for name, fit in fits.items() if fit is not None}


def _repeat_values(data: Mapping[str, Any]) -> dict[str, list[float]]:
    """The measured (not warm-up) repeats' tok_s, avg_commit and step_ms values."""
    samples = [s for s in data.get("samples", []) if not s.get("warmup")]
    return {m: [float(s[m]) for s in samples if s.get(m) is not None]
            for m in ("tok_s", "avg_commit", "step_ms")}
