"""``specperf export --format pytorch-v3`` against a real ClickHouse engine (chdb, in process):
the rows load into the PyTorch benchmark HUD's table as JSON Lines with nothing refused, and
the LLM dashboard's query shape returns every row of the run, once, however often it is
uploaded.

The table is the HUD's ``oss_ci_benchmark_v3`` as pytorch/test-infra declares it
(``clickhouse_db_schema/oss_ci_benchmark_v3/schema.sql``: its columns and types, written out
here for this test; the replication settings left out), and the query keeps what
``torchci/clickhouse_queries/oss_ci_benchmark_llms/query.sql`` filters on: a repo, a time
window on ``timestamp``, a non-empty metric, ``device``/``arch`` from ``runners[1]``, the
target from ``metric.target_value``, the mean of ``benchmark_values``, ``SELECT DISTINCT``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chdb import session

from specperf.cli import main
from specperf.record.files import history_entry
from store_fixtures import doc

TABLE = """
CREATE TABLE benchmark.oss_ci_benchmark_v3 (
    timestamp UInt64,
    schema_version String DEFAULT 'v3',
    name String,
    repo String DEFAULT 'pytorch/pytorch',
    head_branch String,
    head_sha String,
    workflow_id UInt64,
    run_attempt UInt32,
    job_id UInt64,
    servicelab_experiment_id UInt64 DEFAULT 0,
    servicelab_trial_id UInt64 DEFAULT 0,
    runners Array(Tuple(name String, type String, cpu_info String, cpu_count UInt32,
                        mem_info String, avail_mem_in_gb UInt32, gpu_info String,
                        gpu_count UInt32, gpu_mem_info String, avail_gpu_mem_in_gb UInt32,
                        extra_info Map(String, String))),
    benchmark Tuple(name String, mode String, dtype String, extra_info Map(String, String)),
    model Tuple(name String, type String, backend String, origins Array(String),
                extra_info Map(String, String)),
    inputs Map(String, Tuple(dtype String, extra_info Map(String, String))),
    dependencies Map(String, Tuple(repo String, branch String, sha String, version String,
                                   extra_info Map(String, String))),
    metric Tuple(name String, benchmark_values Array(Float32), target_value Float32,
                 extra_info Map(String, String))
) ENGINE = MergeTree ORDER BY (timestamp, head_branch, head_sha, workflow_id, job_id)
"""
# Strict loading: a field the table lacks, or a null where a column is not nullable, refuses the
# row instead of dropping it or defaulting it in silence.
STRICT = ("SETTINGS input_format_skip_unknown_fields = 0, input_format_null_as_default = 0, "
          "input_format_allow_errors_num = 0")
DASHBOARD = """
SELECT DISTINCT
    o.workflow_id AS workflow_id, o.job_id AS job_id, o.model.name AS model,
    o.model.backend AS backend, o.metric.name AS metric,
    floor(arrayAvg(o.metric.benchmark_values), 2) AS actual,
    floor(toFloat64(o.metric.target_value), 2) AS target,
    tupleElement(o.runners[1], 'name') AS device, tupleElement(o.runners[1], 'type') AS arch,
    JSONExtractInt(o.benchmark.extra_info['args'], 'input_len') AS input_len,
    JSONExtractInt(o.benchmark.extra_info['args'], 'output_len') AS output_len,
    o.benchmark.extra_info['case'] AS case_id
FROM benchmark.oss_ci_benchmark_v3 o
WHERE o.timestamp >= toUnixTimestamp(toDateTime('2026-12-01 00:00:00', 'UTC'))
  AND o.timestamp < toUnixTimestamp(toDateTime('2026-12-08 00:00:00', 'UTC'))
  AND o.repo = 'team/serving'
  AND notEmpty(o.metric.name)
  AND notEmpty(device)
ORDER BY case_id, metric
"""


@pytest.fixture
def hud() -> Iterator[session.Session]:
    """An empty HUD table in an in-process ClickHouse."""
    found = session.Session()
    try:
        found.query("CREATE DATABASE benchmark")
        found.query(TABLE)
        yield found
    finally:
        found.cleanup()


def _upload(hud: session.Session, lines: str) -> None:
    hud.query(f"INSERT INTO benchmark.oss_ci_benchmark_v3 {STRICT} FORMAT JSONEachRow\n{lines}")


def _rows(hud: session.Session, sql: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in str(hud.query(sql, "JSONEachRow")).splitlines()]


def _exported(tmp_path: Path, *extra: str) -> Path:
    """One run (3 cases × 3 metrics) through the store and ``specperf export``."""
    run = doc("20261203-020000-3fa2", created="2026-12-03T02:00:00Z")
    (tmp_path / "reports" / "r").mkdir(parents=True, exist_ok=True)
    (tmp_path / "reports" / "r" / "results.json").write_text(json.dumps(run))
    (tmp_path / "reports" / "history.jsonl").write_text(
        json.dumps(history_entry(run, "r/results.json")) + "\n")
    url = f"sqlite:///{tmp_path / 'results.db'}"
    assert main(["import", str(tmp_path / "reports"), "--db", url]) == 0
    out = tmp_path / "export"
    assert main(["export", "--format", "pytorch-v3", "--out", str(out), "--db", url,
                 "--repo", "team/serving", "--arch", "NVIDIA RTX PRO 6000 Blackwell",
                 *extra]) == 0
    return out / "20261203-020000-3fa2.jsonl"


def test_every_exported_row_loads_and_the_dashboard_shows_each_once(hud, tmp_path, capsys):
    path = _exported(tmp_path)
    lines = path.read_text(encoding="utf-8")
    exported = lines.splitlines()
    _upload(hud, lines)
    stored = _rows(hud, "SELECT count() AS n FROM benchmark.oss_ci_benchmark_v3")[0]["n"]
    shown = _rows(hud, DASHBOARD)
    print(f"rows exported {len(exported)}, stored {stored}, the dashboard query shows "
          f"{len(shown)}; one of them: {json.dumps(shown[0])}")
    assert int(stored) == len(exported) == len(shown) == 9
    tok_s = next(r for r in shown if r["case_id"] == "reasoning-ctx1663"
                 and r["metric"] == "tok_s")
    assert (tok_s["device"], tok_s["arch"]) == ("cuda", "NVIDIA RTX PRO 6000 Blackwell")
    assert (tok_s["input_len"], tok_s["output_len"]) == (1663, 600)
    # The target is the baseline median: this run's 51.1 was 1 % below it.
    assert tok_s["actual"] == pytest.approx(51.1, abs=0.01)
    assert tok_s["target"] == pytest.approx(51.1 / 0.99, abs=0.01)
    # A second upload of the same export: the same rows, shown once.
    _upload(hud, lines)
    assert _rows(hud, DASHBOARD) == shown


def test_a_re_export_is_the_same_bytes_and_gzip_holds_them(tmp_path):
    first = _exported(tmp_path).read_bytes()
    assert _exported(tmp_path).read_bytes() == first
    import gzip
    packed = _exported(tmp_path, "--gzip").with_suffix(".jsonl.gz")
    assert gzip.decompress(packed.read_bytes()) == first
    assert packed.read_bytes() == _exported(tmp_path, "--gzip").with_suffix(".jsonl.gz") \
        .read_bytes()


def test_a_simulated_run_is_labelled_so_on_the_dashboard(hud, tmp_path):
    run = doc("sim-1", created="2026-12-03T02:00:00Z")
    run["server"].update(simulated=True, kind="sglang")
    (tmp_path / "reports" / "r").mkdir(parents=True)
    (tmp_path / "reports" / "r" / "results.json").write_text(json.dumps(run))
    url = f"sqlite:///{tmp_path / 'results.db'}"
    assert main(["import", str(tmp_path / "reports" / "r" / "results.json"), "--db", url]) == 0
    assert main(["export", "--format", "pytorch-v3", "--out", str(tmp_path / "x"), "--db", url,
                 "--repo", "team/serving"]) == 0
    _upload(hud, (tmp_path / "x" / "sim-1.jsonl").read_text(encoding="utf-8"))
    shown = _rows(hud, DASHBOARD)
    assert {(r["device"], r["arch"]) for r in shown} == {("simulated", "specperf simulator")}
    rows = _lines(tmp_path / "x" / "sim-1.jsonl")
    # The simulator is the engine (it speaks SGLang's API), never SGLang itself; a record with
    # no duration (as this one) dates its rows at the run's end.
    assert {(r["dependencies"]["server"]["extra_info"]["engine"],
             r["dependencies"]["server"]["extra_info"]["api"],
             r["dependencies"]["server"]["repo"], r["timestamp"]) for r in rows} == {
        ("simulator", "sglang", "", CREATED_S)}


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


CREATED_S = 1796263200  # 2026-12-03T02:00:00Z


def test_rows_name_the_workflow_the_runs_start_and_the_serving_engine(tmp_path, monkeypatch):
    run = doc("gh-1", created="2026-12-03T02:00:00Z")
    run["duration_s"] = 754.6  # the record is created at the run's end
    run["server"]["kind"] = "vllm"
    run["fingerprint"]["version"] = "0.32.0"
    (tmp_path / "reports" / "r").mkdir(parents=True)
    (tmp_path / "reports" / "r" / "results.json").write_text(json.dumps(run))
    url = f"sqlite:///{tmp_path / 'results.db'}"
    assert main(["import", str(tmp_path / "reports" / "r" / "results.json"), "--db", url]) == 0
    export = ["export", "--format", "pytorch-v3", "--db", url, "--repo", "team/serving"]
    monkeypatch.setenv("GITHUB_WORKFLOW", "specperf nightly")
    assert main([*export, "--out", str(tmp_path / "gh")]) == 0
    monkeypatch.delenv("GITHUB_WORKFLOW")
    assert main([*export, "--out", str(tmp_path / "local")]) == 0
    on_github, local = _lines(tmp_path / "gh" / "gh-1.jsonl"), _lines(tmp_path / "local" /
                                                                     "gh-1.jsonl")
    assert {r["name"] for r in on_github} == {"specperf nightly"}
    assert {r["name"] for r in local} == {"specperf"}
    assert {r["timestamp"] for r in on_github} == {CREATED_S - 755}  # 02:00 less 754.6 s
    server = {json.dumps(r["dependencies"]["server"], sort_keys=True) for r in on_github}
    assert [json.loads(s) for s in server] == [{
        "repo": "vllm-project/vllm", "branch": "", "sha": "", "version": "0.32.0",
        "extra_info": {"engine": "vllm", "api": "vllm", "speculative_algorithm": "EAGLE"}}]
