"""The two-phase same-night gate on a simulator with 3 % per-request noise and no change at all
passes (issue 49): the reference is saved (exit 0), the "deploy" restarts the same server on the
same URL with the same noise, and the gate judged against the reference exits 0 — the parser
path included, which on this noise once ended undetermined and blocked the deploy as an
infrastructure problem (exit 3)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from sim_fixtures import SimProcess
from slowa_gate import SIM_SCALE
from test_gate_reference import DEPLOYMENT, _gate, _restart

NOISE = {"request_noise": 0.03}


@pytest.mark.slow  # a reference and a gate run on the simulator (README: test commands)
def test_no_change_at_3_percent_request_noise_passes_the_two_phase_gate(
        start_sim: Callable[..., SimProcess], tmp_path: Path) -> None:
    sim = start_sim(time_scale=SIM_SCALE)
    httpx.post(f"{sim.url}/_sim/faults", json=NOISE).raise_for_status()
    refs = tmp_path / "reference"
    saved = _gate(tmp_path, "--save-reference", str(refs), "--endpoint", sim.url,
                  "--deployment", DEPLOYMENT)
    assert saved.returncode == 0, saved.stdout + saved.stderr

    sim = _restart(start_sim, sim, seed=11, **NOISE)
    result = _gate(tmp_path, "--reference", str(refs), "--endpoint", sim.url)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert not [line for line in lines if line.lstrip().startswith(("SKIP", "ERROR", "FAIL"))]
    pytest.LineMatcher(lines).fnmatch_lines([
        "specperf gate: PASS (exit 0): all 5 smoke checks within their limits."])
