"""The deploy gate over a fleet, end to end: `specperf gate --endpoints FILE` against real
simulators exits with the worst endpoint's code and names that endpoint."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from slowa_gate import DEPLOYMENT, SIM_SCALE, gate_baseline

ROOT = Path(__file__).resolve().parents[1]
# Default settings: with no history the sweep answers at the resolution the 3 % prior allows
# (docs/noise.md), so the good endpoint passes and the bad one fails.
PYTEST_ARGS = ("--", "--output-tokens=200", "-p", "no:randomly")

pytestmark = pytest.mark.slow  # whole gate runs (README: test commands)


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECPERF_")}
    env["SPECPERF_LOCK_DIR"] = str(tmp / "locks")
    env["SPECPERF_REPORT_DIR"] = str(tmp / "reports")
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def baselines(start_sim, tmp_path_factory) -> Path:
    """The smoke contexts measured once on a clean simulator (the session's gate baseline,
    shared with tests/test_gate.py), filed under each deployment."""
    shared = gate_baseline(start_sim, tmp_path_factory)
    base = tmp_path_factory.mktemp("fleet-baselines")
    data = json.loads((shared / DEPLOYMENT / "v1.json").read_text())
    for name in ("good", "slow", "down"):
        (base / name).mkdir()
        (base / name / "v1.json").write_text(json.dumps({**data, "deployment": name}))
    return base


def _gate(tmp: Path, urls: dict[str, str], base: Path) -> subprocess.CompletedProcess[str]:
    fleet = tmp / "fleet.toml"
    fleet.write_text("".join(f'[[endpoint]]\nname = "{n}"\nurl = "{u}"\n\n'
                             for n, u in urls.items()))
    cmd = [sys.executable, "-m", "specperf.cli", "gate", "--endpoints", str(fleet),
           "--baseline-dir", str(base), *PYTEST_ARGS, "-n", str(len(urls))]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=_env(tmp),
                          timeout=900, check=False)


def test_the_worst_endpoint_decides_and_is_named(start_sim, baselines, tmp_path):
    good, slow = start_sim(time_scale=SIM_SCALE), start_sim(time_scale=SIM_SCALE)
    httpx.post(f"{slow.url}/_sim/faults", json={"step_time_mult": 1.3}).raise_for_status()
    urls = {"good": good.url, "slow": slow.url, "down": f"http://127.0.0.1:{_free_port()}"}
    result = _gate(tmp_path, urls, baselines)
    out = result.stdout
    assert result.returncode == 3, out + result.stderr
    lines = pytest.LineMatcher(out.splitlines())
    lines.fnmatch_lines([  # endpoints in name order, each decided as a one-endpoint gate
        "specperf gate: INFRASTRUCTURE PROBLEM (exit 3): 5 of 5 smoke checks could not be "
        "measured: an infrastructure problem, not the deploy's fault; page the owner of the box.",
        "  5 smoke checks (3 cases, 1 path, the sweep) against endpoint down",
        f"  ERROR reasoning-ctx3333: EndpointUnreachable: specperf cannot reach the endpoint "
        f"{urls['down']} *",
        "specperf gate: PASS (exit 0): all 5 smoke checks within their limits.",
        "  5 smoke checks (3 cases, 1 path, the sweep) against endpoint good",
        "specperf gate: REGRESSION (exit 1): step time regressed in 3 of 3 smoke cases and the "
        "smoke subset's sweep: block the deploy.",
        "  5 smoke checks (3 cases, 1 path, the sweep) against endpoint slow",
        # A check's figures wrap at 100 columns (views/screen.py WIDTH).
        "  FAIL  reasoning-ctx3333: tok/s * → * (−*%, limit −10%)*",
        "      +*% — step-time regression",
    ])
    assert out.splitlines()[-1] == (
        f"specperf gate: fleet (the fleet in {tmp_path / 'fleet.toml'}): exit 3: endpoint down "
        "decides: 5 of 5 smoke checks could not be measured: an infrastructure problem, not the "
        "deploy's fault; page the owner of the box.")
