"""ci/nightly.yml can run a fleet: the input or variable, one worker per endpoint, the
single-box variables standing aside; examples/fleet.toml is a valid endpoints file."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from specperf.settings.endpoints import load_endpoints

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / "ci" / "nightly.yml"
EXAMPLE = ROOT / "examples" / "fleet.toml"


def _step(workflow: dict[Any, Any], name: str) -> dict[str, Any]:
    steps = workflow["jobs"]["main-job"]["steps"]
    found: dict[str, Any] = next(s for s in steps if s.get("name") == name)
    return found


def test_a_manual_run_takes_an_endpoints_file(workflow):
    triggers = workflow.get("on", workflow.get(True))
    inputs = triggers["workflow_dispatch"]["inputs"]
    assert inputs["endpoints"]["required"] is False and inputs["endpoints"]["default"] == ""
    env = workflow["jobs"]["main-job"]["env"]
    assert env["SPECPERF_ENDPOINTS"] == "${{ inputs.endpoints || vars.SPECPERF_ENDPOINTS }}"


def test_the_main_job_runs_one_worker_per_endpoint(workflow):
    step = _step(workflow, "Main job")
    assert step["run"].endswith('${SPECPERF_WORKERS:+-n "$SPECPERF_WORKERS"}')
    # In a fleet, each endpoint's deployment comes from the file: the single-box values
    # are emptied for this step (an empty SPECPERF_* variable is unset to the suite).
    assert step["env"] == {
        "SPECPERF_ENDPOINT": "${{ env.SPECPERF_ENDPOINTS == '' && vars.SPECPERF_ENDPOINT || '' }}",
        "SPECPERF_DEPLOYMENT":
            "${{ env.SPECPERF_ENDPOINTS == '' && vars.SPECPERF_DEPLOYMENT || '' }}",
        # A fleet run refuses the Prometheus outputs (one box's outcome each): emptied too.
        "SPECPERF_PROMETHEUS_TEXTFILE":
            "${{ env.SPECPERF_ENDPOINTS == '' && vars.SPECPERF_PROMETHEUS_TEXTFILE || '' }}",
        "SPECPERF_PUSHGATEWAY":
            "${{ env.SPECPERF_ENDPOINTS == '' && vars.SPECPERF_PUSHGATEWAY || '' }}"}


@pytest.mark.parametrize("endpoints, expected", [
    ("", ("", 0)),
    ("examples/fleet.toml", ("SPECPERF_WORKERS=4\n", 0)),
    ("examples/nope.toml", ("", 1)),
])
def test_the_check_step_counts_workers_or_stops(workflow, tmp_path, endpoints, expected):
    script = _step(workflow, "Check the repository variables")["run"]
    github_env = tmp_path / "github_env"
    github_env.write_text("")
    env = {**os.environ, "SPECPERF_ENDPOINT": "http://h:1", "SPECPERF_ENDPOINTS": endpoints,
           "GITHUB_ENV": str(github_env)}
    done = subprocess.run(["bash", "-e", "-c", script], cwd=ROOT, env=env, capture_output=True,
                          text=True, check=False)
    assert (github_env.read_text(), done.returncode) == expected, done.stdout + done.stderr
    if done.returncode:
        assert re.search(r"::error::endpoints file examples/nope\.toml is not in the repository",
                         done.stdout)


def test_the_example_endpoints_file_is_valid():
    found = load_endpoints(EXAMPLE, {"PROD_API_KEY": "sk-x"})
    assert [e.name for e in found] == ["prod", "canary", "blackwell2", "staging"]
    assert found[0].deployment == found[1].deployment  # same box type, same baselines
