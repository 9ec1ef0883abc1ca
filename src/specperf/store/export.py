"""The store's runs as PyTorch benchmark database "v3" rows, the JSON the vLLM and SGLang
dashboards ingest (the ``oss_ci_benchmark_v3`` table): one row per run, case and metric, its
measured repeats in ``metric.benchmark_values``.

Each row carries its run id (``benchmark.extra_info.run_id``) and a run is written to one file
named by it, so exporting again replaces the same rows instead of adding them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, select

from . import engine
from .schema import cells, runs, verdicts

FORMAT = "pytorch-v3"
BENCHMARK_NAME = "specperf"
# What each metric measures, for a dashboard's axis.
UNITS = {"tok_s": "tokens/s", "decode_tok_s": "tokens/s", "step_ms": "ms", "ttft_ms": "ms",
         "avg_commit": "tokens/step"}


def run_ids(url: str, label: str | None = None) -> list[str]:
    """The store's run ids in the order they were written (of one box with ``label``)."""
    def query(connection: Connection) -> list[str]:
        statement = select(runs.c.run_id).order_by(runs.c.id)
        if label is not None:
            statement = statement.where(runs.c.label == label)
        return [str(r) for r in connection.execute(statement).scalars()]
    return engine.read(url, query)


def pytorch_v3(url: str, run_id: str) -> list[dict[str, Any]]:
    """One run's v3 rows (none for a run id the store does not hold)."""
    def query(connection: Connection) -> list[dict[str, Any]]:
        run = connection.execute(select(runs).where(runs.c.run_id == run_id)).mappings().first()
        if run is None:
            return []
        rows = connection.execute(select(cells).where(cells.c.run == run["id"])
                                  .order_by(cells.c.case_id, cells.c.metric)).mappings().all()
        judged = connection.execute(select(verdicts).where(verdicts.c.run == run["id"])
                                    ).mappings().all()
        found = {(v["case_id"], v["factor"]): dict(v) for v in judged}
        return [_row(dict(run), dict(c), _plain(found.get((c["case_id"], c["metric"]))))
                for c in rows if c["median"] is not None]
    return engine.read(url, query)


def _row(run: Mapping[str, Any], cell: Mapping[str, Any], verdict: Mapping[str, Any] | None
         ) -> dict[str, Any]:
    fingerprint = dict(run["fingerprint"] or {})
    case = str(cell["case_id"])
    text_class, _, context = case.rpartition("-ctx")
    values: Sequence[float] = cell["repeats"] or [cell["median"]]
    return {
        "benchmark": {"name": BENCHMARK_NAME, "mode": "inference", "dtype": "",
                      "extra_info": {"run_id": run["run_id"], "created": run["created"],
                                     "kind": run["kind"], "case": case,
                                     "text_class": text_class or case,
                                     "context": int(context) if context.isdigit() else None,
                                     "baseline": {"deployment": run["deployment"],
                                                  "version": run["baseline_version"]},
                                     "simulated": run["simulated"]}},
        "model": {"name": str(fingerprint.get("model") or ""), "type": "speculative-decoding",
                  "backend": str(fingerprint.get("speculative_algorithm") or ""),
                  "origins": [], "extra_info": {"draft_model": fingerprint.get("draft_model"),
                                                "fingerprint": fingerprint}},
        "metric": {"name": str(cell["metric"]), "benchmark_values": [float(v) for v in values],
                   "target_value": None,
                   "extra_info": {"unit": UNITS.get(str(cell["metric"]), ""),
                                  "median": cell["median"], "relative_se": cell["se"],
                                  **_verdict(verdict)}},
        "runners": [{"name": run["label"], "type": "endpoint", "cpu_info": "", "gpu_info": "",
                     "extra_info": {}}],
        "dependencies": {"specperf": {"version": run["suite_version"],
                                      "sha": run["git_revision"], "repo": "", "branch": "",
                                      "extra_info": {}}},
    }


def _plain(row: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if row is None else dict(row)


def _verdict(verdict: Mapping[str, Any] | None) -> dict[str, Any]:
    if verdict is None:
        return {}
    return {"verdict": verdict["status"], "change": verdict["change"], "low": verdict["low"],
            "high": verdict["high"], "tolerance": verdict["tolerance"]}
