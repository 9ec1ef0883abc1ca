"""The machine-readable record of a run: ``results.json`` and one line of ``history.jsonl``.

A results document is plain JSON, versioned by ``schema_version`` and described by
``results.schema.json`` beside this module (documented in docs/results.md). It is built
from values only (collected measurements, verdicts, the baseline), so the pytest plugin,
the CLI and the benchmark share it. Secrets never reach it: every string is scrubbed of
the API key's value and of ``Authorization``/``Bearer`` credentials before it is written.
"""

from __future__ import annotations

import json
import re
import secrets
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any

from ..baselines.store import Baseline
from ..core.errors import ConfigError
from ..core.limits import DEFAULT_TOLERANCES
from ..core.model import ContextFit, fit_repeats, predict_tok_s
from ..judge.verdict import base_rest, observe, reconcile
from ..measure import sample
from ..servers import acceptance
from ..servers.fingerprint import fingerprint_differences

SCHEMA_VERSION = 1
SCHEMA_NAME = "specperf-results"
HISTORY_METRICS = ("tok_s", "step_ms", "avg_commit")
REDACTED = "[redacted]"
_CREDENTIAL = re.compile(r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]+(\s+[^\s\"',}]+)?"
                         r"|(bearer\s+)[^\s\"',}]+")


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
          concurrency_baseline: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The results document of one run (see results.schema.json).

    ``partial``: the samples of cases that errored or were interrupted before they were
    measured, by case id; kept apart from ``measurements`` so no fit or verdict reads them.
    ``concurrency_baseline``: the concurrency baseline the levels were compared with (its
    identity and path, as the measuring process loaded it), None when there was none.

    Built from what the tests reported (with xdist: what the workers sent the controller),
    so it is the same either way. Its derived figures — this run's context fits and the
    predict-and-reconcile rows — are computed here, once; every view renders them from it.
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
        "verdicts": verdicts, "reconcile": reconcile_rows(measurements, verdicts, baseline),
        "outcomes": dict(outcomes), "errors": dict(errors),
        "paths": [dict(p) for p in paths],
        "partial": {cid: dict(data) for cid, data in sorted((partial or {}).items())
                    if cid not in measurements},
        "concurrency": concurrency_section(concurrency or {}),
        "concurrency_baseline": None if concurrency_baseline is None
        else dict(concurrency_baseline),
        "acceptance_shapes": acceptance_shapes(measurements, baseline),
    }
    return doc


def acceptance_shapes(measurements: Mapping[str, Any],
                      baseline: Baseline | None) -> dict[str, Any]:
    """Per case: acceptance per draft position (mean conditional rate) and avg commit per
    100 output tokens, this run's and the baseline's (judge/positions.py judges them), and
    where they came from ("" when the server reports none)."""
    out: dict[str, Any] = {}
    for cid, data in sorted(measurements.items()):
        raws = [s.get("raw") or {} for s in data.get("samples", []) if not s.get("warmup")]
        positions, along = acceptance.case_shape(raws)
        entry = baseline.cases.get(cid) if baseline is not None else None
        out[cid] = {"positions": positions, "along": along,
                    "base_positions": list(entry.positions) if entry else [],
                    "base_along": list(entry.along) if entry else [],
                    "positions_from": _first(raws, "positions_from"),
                    "along_from": _first(raws, "along_from"),
                    "along_tokens": acceptance.ALONG_TOKENS}
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
    return [r for r in doc.get("reconcile", []) if r["status"] == "fail"]


def baseline_dict(base: Baseline) -> dict[str, Any]:
    """The parts of a baseline a report shows: identity, fingerprint, medians, fits."""
    return {"deployment": base.deployment, "version": base.version, "created": base.created,
            "suite_version": base.suite_version, "git_revision": base.git_revision,
            "fingerprint": base.fingerprint, "simulated": base.simulated,
            "cases": {cid: {"output_tokens": c.output_tokens,
                            "metrics": {m: s.to_dict() for m, s in c.metrics.items()},
                            "acceptance_positions": list(c.positions),
                            "commit_along": list(c.along)}
                      for cid, c in base.cases.items()},
            "fits": {tc: f.to_dict() for tc, f in base.fits.items()}}


def baseline_metrics(doc: Mapping[str, Any], case: Mapping[str, Any]) -> dict[str, Any]:
    """The baseline's summaries of a case, if it measured the same case (output length too)."""
    entry = ((doc.get("baseline") or {}).get("cases") or {}).get(case["id"])
    if not entry or entry["output_tokens"] != case["output_tokens"]:
        return {}
    metrics: dict[str, Any] = entry["metrics"]
    return metrics


def mean_context(case: Mapping[str, Any]) -> float:
    """A recorded case's context averaged over its decode (``measure.sample.mean_context``)."""
    return sample.mean_context(case["context"], case["output_tokens"])


def median(measurement: Mapping[str, Any], metric: str) -> float | None:
    entry = measurement["summaries"].get(metric)
    return None if entry is None else float(entry["median"])


def run_fits(measurements: Mapping[str, Any]) -> dict[str, ContextFit]:
    """This run's step_ms = a + b·context per text class, from the recorded repeats (the
    points :func:`specperf.measure.loop.context_fit` fits, read back from the record)."""
    points: dict[str, list[tuple[float, list[float]]]] = {}
    for data in measurements.values():
        steps = _repeat_values(data)["step_ms"]
        if steps:
            points.setdefault(data["case"]["text_class"], []).append(
                (mean_context(data["case"]), steps))
    fits = {name: fit_repeats(pts) for name, pts in sorted(points.items())}
    return {name: fit for name, fit in fits.items() if fit is not None}


def reconcile_rows(measurements: Mapping[str, Any], verdicts: list[dict[str, Any]],
                   baseline: Baseline | None) -> list[dict[str, Any]]:
    """Per case: tok/s predicted from this run's acceptance and the baseline's context fit."""
    if baseline is None:
        return []
    limits = {v["case_id"]: abs(v["details"]["tok_s"]["limit"]) for v in verdicts
              if "tok_s" in (v.get("details") or {})}
    rows = []
    for cid, data in sorted(measurements.items()):
        case, fit = data["case"], baseline.fits.get(data["case"]["text_class"])
        tok, commit = median(data, "tok_s"), median(data, "avg_commit")
        entry = baseline.cases.get(cid)
        if fit is None or tok is None or not commit or entry is None \
                or entry.output_tokens != case["output_tokens"]:
            continue  # as in the run: only cases judged against the baseline are reconciled
        ctx = mean_context(case)
        step = fit.predict_step_ms(ctx)
        if step <= 0:
            continue
        prefill = _prefill_ms(data)
        observed = observe(_repeat_values(data))
        if observed is None:
            continue
        # The baseline's rest is its own: with its own prefill (older files have none: this
        # run's), so a slower prefill is predicted, not called unexplained.
        base_prefill = entry.metrics["ttft_ms"].median if "ttft_ms" in entry.metrics \
            else prefill
        found = reconcile(cid, observed, fit, ctx, int(case["output_tokens"]),
                          limits.get(cid, DEFAULT_TOLERANCES["tok_s"]), prefill,
                          base_rest(entry, int(case["output_tokens"]), base_prefill))
        predicted = predict_tok_s(commit, step, int(case["output_tokens"]), prefill)
        rows.append({"case_id": cid, "avg_commit": commit, "predicted_step_ms": step,
                     "predicted_tok_s": predicted, "observed_tok_s": tok,
                     "change": tok / predicted - 1.0,
                     "status": "agrees" if found is None else found.status,
                     "message": "" if found is None else found.message})
    return rows


def _repeat_values(data: Mapping[str, Any]) -> dict[str, list[float]]:
    """The measured (not warm-up) repeats' tok_s, avg_commit and step_ms values."""
    samples = [s for s in data.get("samples", []) if not s.get("warmup")]
    return {m: [float(s[m]) for s in samples if s.get(m) is not None]
            for m in ("tok_s", "avg_commit", "step_ms")}


# -- secrets -------------------------------------------------------------------------------------
def scrub(value: Any, secret_values: Iterable[str]) -> Any:
    """A copy of ``value`` with every secret and credential header replaced by [redacted]."""
    hidden = [s for s in secret_values if s]
    if isinstance(value, str):
        for s in hidden:
            value = value.replace(s, REDACTED)
        return _CREDENTIAL.sub(_redact_match, value)
    if isinstance(value, dict):
        return {scrub(k, hidden): scrub(v, hidden) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub(v, hidden) for v in value]
    return value


def _redact_match(match: re.Match[str]) -> str:
    return (match.group(1) or match.group(3)) + REDACTED


# -- files -------------------------------------------------------------------------------------
def write(doc: dict[str, Any], report_dir: Path) -> Path:
    """Write ``<dir>/<run-id>/results.json`` and append the run to ``<dir>/history.jsonl``."""
    run_dir = report_dir / str(doc["run_id"])
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "results.json"
    path.write_text(json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n",
                    encoding="utf-8")
    line = json.dumps(history_entry(doc, f"{doc['run_id']}/results.json"), sort_keys=True,
                      ensure_ascii=False)
    with (report_dir / "history.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(line + "\n")  # one write of one line: concurrent runs never interleave
    return path


def history_entry(doc: Mapping[str, Any], results_path: str) -> dict[str, Any]:
    """One run in a line: per-cell medians, fits, baseline identity and fingerprint."""
    base = doc.get("baseline")
    cells = {cid: {m: median(data, m) for m in HISTORY_METRICS}
             for cid, data in sorted(doc["measurements"].items())}
    return {"schema_version": SCHEMA_VERSION, "run_id": doc["run_id"],
            "created": doc["created"], "results": results_path,
            "label": doc["server"].get("label") or doc["settings"].get("endpoint") or "",
            "simulated": bool(doc["server"].get("simulated", False)),
            "suite_version": doc["suite_version"], "git_revision": doc["git_revision"],
            "fingerprint": doc["fingerprint"],
            "baseline": None if base is None else
            {"deployment": base["deployment"], "version": base["version"]},
            "concurrency_baseline": _identity(doc.get("concurrency_baseline")),
            "cells": cells, "fits": doc["fits"],
            "failed": sorted({v["case_id"] for v in doc["verdicts"] if v["status"] == "fail"}),
            **run_fields(doc)}


def _identity(base: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if base is None else {"deployment": base["deployment"],
                                      "version": base["version"], "path": base["path"]}


def run_fields(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The run's kind and its errors for the history line (older records: a full run)."""
    run = doc.get("run") or {}
    errors = [str(e).strip().splitlines()[-1][:300] for e in doc.get("errors", {}).values()
              if str(e).strip()]
    return {"kind": run.get("kind", "full"), "kind_label": run.get("label", ""),
            "interrupted": bool(run.get("interrupted", doc.get("interrupted", False))),
            "outage": bool(run.get("outage", False)), "stopped_by": run.get("stopped_by"),
            "partial": sorted(doc.get("partial") or {}),
            "errors": list(dict.fromkeys(errors))[:10],
            "error_count": len(doc.get("errors", {}))}


def load(path: Path) -> dict[str, Any]:
    """Read and validate a results file; a ConfigError names the file and the problem."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read results file {path}: {exc}.") from exc
    problems = validate(doc, schema())
    if problems:
        raise ConfigError(f"{path} is not a specperf results file (schema v{SCHEMA_VERSION}): "
                          + "; ".join(problems[:5]) + ".")
    assert isinstance(doc, dict)
    return doc


def schema() -> dict[str, Any]:
    """The JSON Schema of results.json (shipped as package data)."""
    text = resources.files("specperf.record").joinpath("results.schema.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


# -- a JSON Schema subset: type, const, enum, properties, required, items, $ref, anyOf ---------
_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,), "array": (list,), "string": (str,), "boolean": (bool,),
    "integer": (int,), "number": (int, float), "null": (type(None),)}


def validate(value: Any, node: Mapping[str, Any], root: Mapping[str, Any] | None = None,
             where: str = "$") -> list[str]:
    """Every violation of ``node`` by ``value``, as 'where: problem' (empty when valid)."""
    root = root or node
    if "$ref" in node:
        node = root["$defs"][node["$ref"].rsplit("/", 1)[-1]]
    if "anyOf" in node:
        found = [validate(value, option, root, where) for option in node["anyOf"]]
        if any(not f for f in found):
            return []
        # Report the branch that got furthest: one whose type matched, if any did.
        deeper = [f for f in found if not f[0].startswith(f"{where}: expected")]
        return min(deeper or found, key=len)
    problems = _check_scalar(value, node, where)
    if problems:
        return problems
    if isinstance(value, dict):
        return _check_object(value, node, root, where)
    if isinstance(value, list) and "items" in node:
        return [p for i, v in enumerate(value)
                for p in validate(v, node["items"], root, f"{where}[{i}]")]
    return []


def _check_scalar(value: Any, node: Mapping[str, Any], where: str) -> list[str]:
    kinds = node.get("type")
    if kinds is not None:
        names = [kinds] if isinstance(kinds, str) else kinds
        ok = any(isinstance(value, _TYPES[n]) and not (isinstance(value, bool) and n in
                                                       ("integer", "number")) for n in names)
        if not ok:
            return [f"{where}: expected {' or '.join(names)}, got {type(value).__name__}"]
    if "const" in node and value != node["const"]:
        return [f"{where}: expected {node['const']!r}, got {value!r}"]
    if "enum" in node and value not in node["enum"]:
        return [f"{where}: {value!r} is not one of {node['enum']}"]
    return []


def _check_object(value: dict[str, Any], node: Mapping[str, Any], root: Mapping[str, Any],
                  where: str) -> list[str]:
    problems = [f"{where}: missing {key!r}" for key in node.get("required", ())
                if key not in value]
    props = node.get("properties", {})
    extra = node.get("additionalProperties", True)
    for key, item in value.items():
        if key in props:
            problems += validate(item, props[key], root, f"{where}.{key}")
        elif extra is False:
            problems.append(f"{where}: unexpected key {key!r}")
        elif isinstance(extra, dict):
            problems += validate(item, extra, root, f"{where}.{key}")
    return problems


def _prefill_ms(measurement: Mapping[str, Any]) -> float:
    """The median time to first token of a case's measured samples, in ms (0 if unknown)."""
    ttfts = [s["ttft_s"] for s in measurement.get("samples", [])
             if not s.get("warmup") and isinstance(s.get("ttft_s"), (int, float))]
    return 1000.0 * statistics.median(ttfts) if ttfts else 0.0
