"""The store's runs as PyTorch benchmark database "v3" rows, the rows the PyTorch benchmark HUD
(and the vLLM and SGLang dashboards on it) reads from its ``oss_ci_benchmark_v3`` table: one row
per run, case and metric, its measured repeats in ``metric.benchmark_values``.

The rows follow the table's schema (pytorch/test-infra
``clickhouse_db_schema/oss_ci_benchmark_v3/schema.sql``) and what the LLM dashboard's query
(``torchci/clickhouse_queries/oss_ci_benchmark_llms/query.sql``) filters and shows:

- the nine metadata columns at the top level (``timestamp`` the run's start in seconds,
  ``schema_version``, ``name`` the CI workflow's, ``repo``, ``head_branch``, ``head_sha``,
  ``workflow_id``, ``run_attempt``, ``job_id``): the query keeps a repo and a time window, and
  test-infra's uploader builds its object key from them. They come from :class:`Origin` (the
  CI run's environment, the export's options, else the run's own record);
- every ``extra_info`` a map of strings (the columns are ``Map(String, String)``), with
  ``benchmark.extra_info["args"]`` a JSON string of the case's shape (input and output length,
  concurrency, tensor parallel size, text class), where the HUD's LLM views read them;
- ``metric.target_value`` the baseline median the cell was judged against (0 when the run had
  no baseline: the column is a non-nullable Float32); the HUD shows it as the target;
- ``runners[0]`` as the HUD labels a row, "device (arch)": ``name`` the accelerator family,
  ``type`` the GPU model; a simulated run says so in both;
- ``dependencies``: the serving engine (its kind, its repository) and its version, the
  target and draft models, the parsers and specperf — what a dashboard reader looks for when
  a line moved.

The file is JSON Lines (the ingest reads one object per line), sorted and byte-for-byte the
same on every export of a run: ClickHouse has no update, so a re-upload must be the same rows.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import Connection, select

from . import engine
from .schema import cells, runs, verdicts

FORMAT = "pytorch-v3"
BENCHMARK_NAME = "specperf"
SCHEMA_VERSION = "v3"
# What each metric measures, for a dashboard's axis, and which way is better.
UNITS = {"tok_s": "tokens/s", "decode_tok_s": "tokens/s", "step_ms": "ms", "ttft_ms": "ms",
         "avg_commit": "tokens/step"}
HIGHER_IS_BETTER = ("tok_s", "decode_tok_s", "avg_commit")
# The name vLLM's benchmark rows give the same quantity, where there is one.
VLLM_NAMES = {"tok_s": "tokens_per_second", "ttft_ms": "median_ttft_ms"}
# runners[0] of a simulated run: never a GPU a dashboard could mistake for a real one.
SIMULATED_DEVICE, SIMULATED_ARCH = "simulated", "specperf simulator"
# The serving engine of a server kind (servers/serverkind.py's kinds; llama.cpp's fingerprint
# spells its own) and the repository it is released from.
ENGINES = {"sglang": ("sglang", "sgl-project/sglang"), "vllm": ("vllm", "vllm-project/vllm"),
           "llamacpp": ("llama.cpp", "ggml-org/llama.cpp"),
           "llama.cpp": ("llama.cpp", "ggml-org/llama.cpp"),
           "openai": ("openai-compatible", "")}
SIMULATOR_ENGINE = "simulator"
UNKNOWN_ARCH = "unknown GPU (set --arch)"


@dataclass(frozen=True)
class Origin:
    """Where a run's rows come from, as the HUD keys them (the table's metadata columns) and
    labels the box: ``device`` the accelerator family (cuda, rocm), ``arch`` the GPU model."""

    repo: str = ""
    name: str = BENCHMARK_NAME
    head_branch: str = ""
    head_sha: str = ""
    workflow_id: int = 0
    run_attempt: int = 1
    job_id: int = 0
    device: str = "cuda"
    arch: str = ""

    @classmethod
    def from_env(cls, env: Mapping[str, str], **given: Any) -> Origin:
        """The origin from GitHub Actions' environment (``GITHUB_REPOSITORY``, ``GITHUB_SHA``,
        ``GITHUB_REF_NAME``, ``GITHUB_RUN_ID``, ``GITHUB_RUN_ATTEMPT``, ``GITHUB_WORKFLOW``
        the row's name, else specperf's), each overridden by a ``given`` value that is not
        None. GitHub's environment names a job by its key, not a number, so ``job_id`` stays
        0 unless given."""
        found: dict[str, Any] = {
            "repo": env.get("GITHUB_REPOSITORY", ""), "head_sha": env.get("GITHUB_SHA", ""),
            "name": env.get("GITHUB_WORKFLOW") or BENCHMARK_NAME,
            "head_branch": env.get("GITHUB_REF_NAME", ""),
            "workflow_id": _int(env.get("GITHUB_RUN_ID")),
            "run_attempt": _int(env.get("GITHUB_RUN_ATTEMPT")) or 1,
            "arch": env.get("SPECPERF_GPU_NAME", "")}
        found.update({k: v for k, v in given.items() if v is not None})
        return cls(**found)


def _int(value: str | None) -> int:
    return int(value) if value and value.isdigit() else 0


def run_ids(url: str, label: str | None = None) -> list[str]:
    """The store's run ids in the order they were written (of one box with ``label``)."""
    def query(connection: Connection) -> list[str]:
        statement = select(runs.c.run_id).order_by(runs.c.id)
        if label is not None:
            statement = statement.where(runs.c.label == label)
        return [str(r) for r in connection.execute(statement).scalars()]
    return engine.read(url, query)


def pytorch_v3(url: str, run_id: str, origin: Origin | None = None) -> list[dict[str, Any]]:
    """One run's v3 rows (none for a run id the store does not hold), in a fixed order."""
    def query(connection: Connection) -> list[dict[str, Any]]:
        run = connection.execute(select(runs).where(runs.c.run_id == run_id)).mappings().first()
        if run is None:
            return []
        rows = connection.execute(select(cells).where(cells.c.run == run["id"])
                                  .order_by(cells.c.case_id, cells.c.metric)).mappings().all()
        judged = connection.execute(select(verdicts).where(verdicts.c.run == run["id"])
                                    .order_by(verdicts.c.seq)).mappings().all()
        found = {(v["case_id"], v["factor"]): dict(v) for v in judged}
        return [_row(dict(run), dict(c), found.get((c["case_id"], c["metric"])),
                     origin or Origin())
                for c in rows if c["median"] is not None]
    return engine.read(url, query)


def jsonl(rows: Sequence[Mapping[str, Any]]) -> bytes:
    """The rows as JSON Lines: one object per line, keys sorted, the same bytes every time."""
    return b"".join(json.dumps(r, sort_keys=True, ensure_ascii=False,
                               separators=(",", ":")).encode() + b"\n" for r in rows)


def _row(run: Mapping[str, Any], cell: Mapping[str, Any], verdict: Mapping[str, Any] | None,
         origin: Origin) -> dict[str, Any]:
    fingerprint = dict(run["fingerprint"] or {})
    entry = dict(run["entry"] or {})
    case = str(cell["case_id"])
    metric = str(cell["metric"])
    text_class, _, context = case.rpartition("-ctx")
    values: Sequence[float] = cell["repeats"] or [cell["median"]]
    args = {"input_len": int(context) if context.isdigit() else None,
            "output_len": entry.get("output_tokens"),
            "max_concurrency": entry.get("concurrency", 1),
            "tensor_parallel_size": fingerprint.get("tp_size"),
            "text_class": text_class or case}
    return {
        "timestamp": _started(str(run["created"]), entry.get("duration_s")),
        "schema_version": SCHEMA_VERSION,
        "name": origin.name,
        "repo": origin.repo,
        "head_branch": origin.head_branch,
        "head_sha": origin.head_sha or str(run["git_revision"] or ""),
        "workflow_id": origin.workflow_id,
        "run_attempt": origin.run_attempt,
        "job_id": origin.job_id,
        "benchmark": {"name": BENCHMARK_NAME, "mode": "inference", "dtype": "",
                      "extra_info": _strings({
                          "run_id": run["run_id"], "created": run["created"],
                          "kind": run["kind"], "case": case, "text_class": text_class or case,
                          "context": args["input_len"], "deployment": run["deployment"],
                          "baseline_version": run["baseline_version"],
                          "simulated": run["simulated"], "args": args})},
        "model": {"name": str(fingerprint.get("model") or ""), "type": "speculative-decoding",
                  "backend": str(fingerprint.get("speculative_algorithm") or ""),
                  "origins": [], "extra_info": _strings({
                      "draft_model": fingerprint.get("draft_model"),
                      "fingerprint": fingerprint})},
        "metric": {"name": metric, "benchmark_values": [float(v) for v in values],
                   "target_value": _target(cell, verdict),
                   "extra_info": _strings({
                       "unit": UNITS.get(metric, ""),
                       "better": "higher" if metric in HIGHER_IS_BETTER else "lower",
                       "vllm_name": VLLM_NAMES.get(metric), "median": cell["median"],
                       "relative_se": cell["se"], **_verdict(verdict)})},
        "runners": [_runner(run, fingerprint, origin)],
        "dependencies": _dependencies(run, fingerprint, entry.get("server_kind")),
    }


def _started(created: str, duration_s: Any) -> int:
    """When the run started, in Unix seconds (the table's ``timestamp``): its record is
    ``created`` ('2026-12-03T02:00:00Z') at its end, its history line keeps how long it took.
    A line written before it kept that (no ``duration_s``) gives the run's end."""
    when = datetime.fromisoformat(created.replace("Z", "+00:00"))
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    took = float(duration_s) if isinstance(duration_s, (int, float)) else 0.0
    return int(when.timestamp() - took)


def _target(cell: Mapping[str, Any], verdict: Mapping[str, Any] | None) -> float:
    """The baseline median the cell was judged against: its median over (1 + the verdict's
    change), the change being this median against the baseline's; 0 with no baseline."""
    change = None if verdict is None else verdict.get("change")
    if change is None or cell["median"] is None or not math.isfinite(change) or change <= -1:
        return 0.0
    return float(cell["median"]) / (1.0 + float(change))


def _runner(run: Mapping[str, Any], fingerprint: Mapping[str, Any],
            origin: Origin) -> dict[str, Any]:
    simulated = bool(run["simulated"])
    gpus = fingerprint.get("tp_size")
    return {"name": SIMULATED_DEVICE if simulated else origin.device,
            "type": SIMULATED_ARCH if simulated else (origin.arch or UNKNOWN_ARCH),
            "cpu_info": "", "cpu_count": 0, "mem_info": "", "avail_mem_in_gb": 0,
            "gpu_info": "" if simulated else origin.arch,
            "gpu_count": 0 if simulated or not isinstance(gpus, int) else gpus,
            "gpu_mem_info": "", "avail_gpu_mem_in_gb": 0,
            "extra_info": _strings({"label": run["label"], "simulated": simulated})}


def _engine(simulated: bool, kind: Any) -> tuple[str, str, str]:
    """The serving engine's name, its repository and the API it spoke: the simulator by its
    own name, a kind the record does not keep (a run recorded before it did) empty."""
    name, repo = ENGINES.get(str(kind or ""), (str(kind or ""), ""))
    return (SIMULATOR_ENGINE, "", name) if simulated else (name, repo, name)


def _dependencies(run: Mapping[str, Any], fingerprint: Mapping[str, Any],
                  kind: Any) -> dict[str, Any]:
    def dep(version: Any, sha: str = "", repo: str = "", **extra: Any) -> dict[str, Any]:
        return {"repo": repo, "branch": "", "sha": sha, "version": str(version or ""),
                "extra_info": _strings({k: v for k, v in extra.items() if v is not None})}
    engine_name, engine_repo, api = _engine(bool(run["simulated"]),
                                            kind or fingerprint.get("server_kind"))
    out = {"specperf": dep(run["suite_version"], str(run["git_revision"] or "")),
           "server": dep(fingerprint.get("version"), repo=engine_repo, engine=engine_name,
                         api=api or None,
                         speculative_algorithm=fingerprint.get("speculative_algorithm"),
                         attention_backend=fingerprint.get("attention_backend"),
                         page_size=fingerprint.get("page_size")),
           "target_model": dep(fingerprint.get("model")),
           "draft_model": dep(fingerprint.get("draft_model"))}
    for parser in ("reasoning_parser", "tool_call_parser"):
        if fingerprint.get(parser):
            out[parser] = dep(fingerprint[parser])
    return out


def _strings(values: Mapping[str, Any]) -> dict[str, str]:
    """A ``Map(String, String)``: strings as they are, None empty, anything else as JSON."""
    return {k: v if isinstance(v, str) else "" if v is None else
            json.dumps(v, sort_keys=True, separators=(",", ":"))
            for k, v in values.items()}


def _verdict(verdict: Mapping[str, Any] | None) -> dict[str, Any]:
    if verdict is None:
        return {}
    # The case's verdict (a case fails as a whole), its figures this metric's.
    return {"case_verdict": verdict["status"], "change": verdict["change"], "low": verdict["low"],
            "high": verdict["high"], "tolerance": verdict["tolerance"]}
