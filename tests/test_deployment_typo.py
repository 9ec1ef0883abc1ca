"""A ``--deployment`` with no baseline, in a directory that holds others', is refused before
any request (most likely a typo) and recorded as NO BASELINE, not run as a sweep judged
against nothing."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from specperf.baselines.preflight import check_named, existing_deployments
from specperf.core.errors import BaselineError
from specperf.settings.config import resolve
from specperf.settings.hints import update_command


def _store(root: Path, *deployments: str) -> Path:
    for name in deployments:
        (root / name).mkdir(parents=True)
        (root / name / "v1.json").write_text("{}")  # only the name is read here
    return root


def _settings(root: Path, **cli: object):
    return resolve({"baseline_dir": str(root), **cli}, {}, {})


def test_a_typo_names_the_deployments_there_and_the_closest(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no perf_tests/ here: the command names the installed copy
    root = _store(tmp_path / "b", "demo", "sim-kimi-k26-ddtree")
    (root / "empty").mkdir()  # a directory without versions is no deployment
    settings = _settings(root, deployment="demoo")
    with pytest.raises(BaselineError) as err:
        check_named(settings, root)
    assert str(err.value) == (
        "no baseline for 'demoo'; baselines exist for: demo, sim-kimi-k26-ddtree (did you "
        f"mean 'demo'?). Correct --specperf-deployment, or write the first baseline of 'demoo' in "
        f"{root} "
        f"with `{update_command(settings, 'demoo')}`.")
    assert "--pyargs specperf.perf_tests -m context_scaling" in update_command(settings)
    assert existing_deployments(root) == ["demo", "sim-kimi-k26-ddtree"]


def test_no_close_name_no_guess_and_the_variable_is_named(tmp_path):
    root = _store(tmp_path / "b", "demo")
    settings = resolve({"baseline_dir": str(root)}, {"SPECPERF_DEPLOYMENT": "production-7"}, {})
    with pytest.raises(BaselineError) as err:
        check_named(settings, root)
    assert str(err.value).startswith("no baseline for 'production-7'; baselines exist for: "
                                     "demo. Correct SPECPERF_DEPLOYMENT, or write ")


@pytest.mark.parametrize("cli", [{"deployment": "demo"}, {},
                                 {"deployment": "new", "update_baselines": True}])
def test_a_known_fingerprint_named_or_new_deployment_passes(tmp_path, cli):
    root = _store(tmp_path / "b", "demo")
    check_named(_settings(root, **cli), root)  # raises nothing


def test_an_empty_or_missing_directory_is_a_first_baseline_not_a_typo(tmp_path):
    check_named(_settings(tmp_path / "none", deployment="demoo"), tmp_path / "none")
    (tmp_path / "empty").mkdir()
    check_named(_settings(tmp_path / "empty", deployment="demoo"), tmp_path / "empty")


def _finished_requests(url: str) -> float:
    text = httpx.get(f"{url}/metrics").text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("sglang:num_requests_total"))


def test_the_run_stops_before_any_request_and_records_no_baseline(perf_project, clean_sim,
                                                                  tmp_path):
    root = _store(tmp_path / "b", "demo", "sim-kimi-k26-ddtree")
    before = _finished_requests(clean_sim.url)
    project = perf_project()
    result = project.run_inprocess("-m", "context_scaling", "--specperf-text-classes", "padding",
                                   "--specperf-contexts", "13", "--endpoint", clean_sim.url,
                                   "--deployment", "demoo", "--baseline-dir", str(root))
    result.assert_outcomes(errors=2)  # the case and the fit
    result.stdout.fnmatch_lines([
        "BaselineError: no baseline for 'demoo'; baselines exist for: demo, "
        "sim-kimi-k26-ddtree (did you mean 'demo'?). Correct --deployment, or write the "
        "first baseline of 'demoo' in * with `*deployment demoo *update-baselines`."])
    assert "warm-up" not in result.stdout.str()
    assert _finished_requests(clean_sim.url) == before
    [record] = project.pytester.path.glob("reports/*/results.json")
    run = json.loads(record.read_text())["run"]
    assert (run["stopped_by"], run["outage"]) == ("no-baseline", False)
    assert run["label"] == (
        "custom sweep (contexts 13; text classes padding), NO BASELINE (nothing was measured: "
        "the deployment's baseline is missing or unreadable; 2 of 2 perf tests errored)")
    [line] = (project.pytester.path / "reports" / "history.jsonl").read_text().splitlines()
    assert json.loads(line)["stopped_by"] == "no-baseline"
