"""The deploy gate's baseline, measured once per test session for every gate test module
(tests/test_gate.py, tests/test_fleet_gate_e2e.py): the main job at the smoke contexts on a
clean simulator, filed under deployment ``gate-test``."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from perf_project import ROOT
from sim_fixtures import SimProcess
from slowa_runs import once

DEPLOYMENT = "gate-test"
# Slower than the other suites' 0.05: a 28 ms step is then 5.6 ms of real time, so a loaded
# CI box's scheduling jitter does not make the cells unstable or move tok/s past 10%.
SIM_SCALE = 0.2


def gate_baseline(start_sim: Callable[..., SimProcess],
                  tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The baseline directory (read it, never write into it: copy it first)."""
    def produce(root: Path) -> None:
        sim = start_sim(time_scale=SIM_SCALE)
        base = root / "baselines"
        cmd = [sys.executable, "-m", "pytest", str(ROOT / "perf_tests"), "-m", "context_scaling",
               "-p", "no:cacheprovider", "--endpoint", sim.url,
               "--specperf-contexts=13,3333", "--output-tokens=200", "--baseline-dir", str(base),
               "--deployment", DEPLOYMENT, "--specperf-update-baselines"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("SPECPERF_")}
        env["SPECPERF_LOCK_DIR"] = str(root / "locks")
        env["SPECPERF_REPORT_DIR"] = str(root / "reports")
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600,
                              env=env, check=False)
        assert (base / DEPLOYMENT / "v1.json").is_file(), done.stdout + done.stderr
    return once(tmp_path_factory, "gate-baseline", produce) / "baselines"
