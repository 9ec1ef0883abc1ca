"""``specperf import`` of what runs wrote before the store, and ``specperf export --format
pytorch-v3`` checked against the PyTorch benchmark database v3 field list, both once per run
id (in both engines)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from specperf.cli import main
from specperf.record.files import history_entry
from specperf.store.history import store_runs
from store_fixtures import doc, store_url_fixture  # noqa: F401

# The v3 row (pytorch/pytorch wiki "How to integrate with PyTorch OSS benchmark database"):
# every field optional unless required; runners a list, dependencies a map of name -> entry.
METADATA = {"timestamp", "schema_version", "name", "repo", "head_branch", "head_sha",
            "workflow_id", "run_attempt", "job_id"}
V3 = {"benchmark": {"name", "mode", "dtype", "extra_info"},
      "model": {"name", "type", "backend", "origins", "extra_info"},
      "inputs": None,
      "metric": {"name", "benchmark_values", "target_value", "extra_info"},
      "runners": {"name", "type", "cpu_info", "cpu_count", "mem_info", "avail_mem_in_gb",
                  "gpu_info", "gpu_count", "gpu_mem_info", "avail_gpu_mem_in_gb",
                  "extra_info"},
      "dependencies": {"repo", "branch", "sha", "version", "extra_info"}}
REQUIRED = (("benchmark", "name"), ("model", "name"), ("metric", "name"),
            ("metric", "benchmark_values"))


def v3_problems(row: dict[str, Any]) -> list[str]:
    """What in a row is not of the v3 field list (empty: a valid row)."""
    out = [f"unknown section {k}" for k in row if k not in V3 and k not in METADATA]
    out += [f"{k} missing" for k in METADATA if k not in row]
    for section in ("benchmark", "model", "metric"):
        out += [f"{section}.{k}" for k in row.get(section, {}) if k not in V3[section]]  # type: ignore[operator]
    out += [f"runners.{k}" for r in row.get("runners", []) for k in r if k not in V3["runners"]]  # type: ignore[operator]
    out += [f"dependencies.{n}.{k}" for n, d in row.get("dependencies", {}).items()
            for k in d if k not in V3["dependencies"]]  # type: ignore[operator]
    out += [f"{a}.{b} missing" for a, b in REQUIRED if not row.get(a, {}).get(b)]
    values = row["metric"]["benchmark_values"]
    if not (isinstance(values, list) and all(isinstance(v, float) for v in values)):
        out.append("metric.benchmark_values is not a list of numbers")
    return out


def _reports(root: Path) -> Path:
    """A report directory as runs left it: two runs in history.jsonl with their results.json,
    a line cut short, and a results.json the history does not name."""
    reports = root / "reports"
    lines = []
    for i, run_id in enumerate(("n1", "n2", "loose")):
        d = doc(run_id, created=f"2026-12-0{i + 1}T00:00:00Z", tok_s=50.0 + i)
        (reports / run_id).mkdir(parents=True)
        (reports / run_id / "results.json").write_text(json.dumps(d))
        lines.append(json.dumps(history_entry(d, f"{run_id}/results.json")))
    (reports / "history.jsonl").write_text(lines[0] + "\n" + lines[1] + "\n" + lines[1][:30])
    return reports


def test_import_loads_a_report_directory_once(store_url: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    reports = _reports(tmp_path)
    assert main(["import", str(reports), "--db", store_url]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("specperf import: 3 new runs of 3 found into ")
    # The line cut short: one sentence, not a Python warning with its source line.
    assert out.err == (f"specperf import: {reports / 'history.jsonl'} line 3 is not a whole "
                       "run (cut short?): skipped; the other 2 runs are read.\n")
    assert [e["run_id"] for e in store_runs(store_url)] == ["n1", "n2", "loose"]
    assert main(["import", str(reports), str(reports / "n1" / "results.json"),
                 "--db", store_url]) == 0
    assert "0 new runs of 4 found" in capsys.readouterr().out
    assert len(store_runs(store_url)) == 3


def test_export_writes_valid_v3_rows_once_per_run(store_url: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    reports = _reports(tmp_path)
    main(["import", str(reports), "--db", store_url])
    out = tmp_path / "export"
    args = ["export", "--format", "pytorch-v3", "--out", str(out), "--db", store_url,
            "--repo", "team/serving"]
    assert main(args) == 0
    first = {p.name: p.read_text() for p in out.iterdir()}
    assert sorted(first) == ["loose.jsonl", "n1.jsonl", "n2.jsonl"]
    rows = [json.loads(line) for line in first["n2.jsonl"].splitlines()]
    # 3 cases × the 3 metrics measured (decode tok/s and TTFT were not)
    assert len(rows) == 9 and [p for r in rows for p in v3_problems(r)] == []
    tok_s = next(r for r in rows if r["metric"]["name"] == "tok_s"
                 and r["benchmark"]["extra_info"]["case"] == "reasoning-ctx13")
    assert tok_s["metric"]["benchmark_values"] == [51.0, 51.1, 51.2]
    assert tok_s["benchmark"]["extra_info"]["run_id"] == "n2"
    assert tok_s["metric"]["extra_info"]["case_verdict"] == "pass"
    # 2026-12-02T00:00:00Z in seconds: the record keeps no duration, so the run's end
    assert tok_s["repo"] == "team/serving" and tok_s["timestamp"] == 1796169600
    assert main(args) == 0  # again: the same files, no row added
    assert {p.name: p.read_text() for p in out.iterdir()} == first
    assert capsys.readouterr().out.splitlines()[-1] == \
        f"specperf export: 27 pytorch-v3 rows of 3 runs in {out} (repo team/serving)."


def test_export_of_a_run_the_store_lacks_is_a_usage_error(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    assert main(["export", "--format", "pytorch-v3", "--out", str(tmp_path / "x"),
                 "--run", "nope", "--db", url]) == 2
    assert capsys.readouterr().err == (f"specperf export: run nope is not in {url}: "
                                       "`specperf import` it first, or check the id.\n")
