"""The two-phase same-night gate against a real llama-server (issue 52): a deploy that changed
nothing passes, every case warms up at 128 tokens, and exact acceptance settles the long
case from its one request without a full-length determinism check (judge/exact.py: the same
verify steps on the reference's prompt are what was measured)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .llama import LlamaPool
from .tinymodels import ModelSet

pytestmark = pytest.mark.real_server
# The tier's noise limits (helpers.tier_ini) as gate arguments: 2 shared CPU cores move timing
# ~20 % between runs; acceptance keeps 15 %. The same-night sweep assumes the box holds still
# between the phases (no run term); this one does not: 2 of 8 clean gates here failed, one read
# step time +6.1 % across the subset, sure at 98 %; the sweep's tolerance and effect are the tier's.
TIER = ("--specperf-max-spread=0.3", "--specperf-tolerances=tok_s=0.4,decode_tok_s=0.4,"
        "step_ms=0.4,ttft_ms=0.4,avg_commit=0.15,slope=0.6", "--specperf-sweep-tolerance=0.2",
        "--specperf-sweep-effect=0.4")


def gate(*args: str, reports: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SPECPERF_REPORT_DIR": str(reports)}
    return subprocess.run([sys.executable, "-m", "specperf.cli", "gate", *args, "--", *TIER],
                          capture_output=True, text=True, env=env, timeout=600, check=False)


def only_run(reports: Path) -> dict[str, Any]:
    [path] = sorted(reports.glob("*/results.json"))
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def test_a_deploy_that_changed_nothing_passes_with_short_warm_ups(
        llama_pool: LlamaPool, tiny: ModelSet, tmp_path: Path) -> None:
    server = llama_pool.get(tiny.target, draft=tiny.draft)
    ref = tmp_path / "ref"
    first = gate("--save-reference", str(ref), "--endpoint", server.url,
                 reports=tmp_path / "r1")
    assert first.returncode == 0, first.stdout + first.stderr
    second = gate("--reference", str(ref), "--endpoint", server.url, reports=tmp_path / "r2")
    print(first.stdout.splitlines()[-1], *second.stdout.splitlines()[-8:], sep="\n")
    assert second.returncode == 0, second.stdout + second.stderr
    assert "both phases" in second.stdout
    doc = only_run(tmp_path / "r2")
    long = doc["measurements"]["reasoning-ctx3333"]
    warm = [s["completion_tokens"] for s in long["samples"] if s["warmup"]]
    measured = [s["completion_tokens"] for s in long["samples"] if not s["warmup"]]
    assert warm == [128] and set(measured) == {600}, (warm, measured)
    [verdict] = [v for v in doc["verdicts"] if v["case_id"] == "reasoning-ctx3333"]
    # llama-server at temperature 0 with its prompt cache off repeats itself: the one
    # request's steps equal the reference's, which settles acceptance.
    assert (verdict.get("exact") or {}).get("status") == "unchanged", verdict
