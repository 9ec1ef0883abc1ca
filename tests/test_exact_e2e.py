"""Exact acceptance through real pytest sessions against a real simulator process: the same
prompts every run, never served by the prefix cache, per-prompt steps compared exactly."""

from __future__ import annotations

import fnmatch
import json
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest

from slowa_runs import Project, load, once, save

# Whole perf sessions against simulators: the slow set (pytest -m slow).
pytestmark = pytest.mark.slow

# These tests judge acceptance, exactly; timing limits wide enough that the load of a shared
# box between two runs (one repeat each, here) never decides a verdict, and a wide spread
# bound so a loaded box leaves no cell unstable.
TIMING = "tok_s=0.5,step_ms=0.5,decode_tok_s=0.5,ttft_ms=1.0,slope=0.5"
# 200 tokens: enough verify steps that a 3% lower acceptance moves every case's count.
ARGS = ("-m", "context_scaling", "--output-tokens=200", "--deployment", "exact-dep",
        "--specperf-tolerances", TIMING, "--specperf-max-spread", "0.3")
CASES = ("padding-ctx13", "padding-ctx1663", "reasoning-ctx13", "reasoning-ctx1663")
# 0.2: a simulated step sleeps several ms, so a loaded 2-core box stays stable.
SCALE = 0.2


def _args(url: str, baselines: Path) -> tuple[str, ...]:
    return (*ARGS, "--endpoint", url, "--baseline-dir", str(baselines))


@pytest.fixture(scope="module")
def two_runs(start_sim, tmp_path_factory) -> Path:
    """Once per session: a v1 baseline, then a second clean run on the same simulator that
    writes v2; a copy of v1 alone, the second run's output and the simulator's ground truth."""
    def produce(root: Path) -> None:
        sim = start_sim(time_scale=SCALE)
        project = Project(root / "project", root / "locks")
        args = _args(sim.url, root / "baselines")
        project.run(*args, "--specperf-update-baselines").stdout.fnmatch_lines(
            ["specperf: wrote baseline */exact-dep/v1.json"])
        shutil.copytree(root / "baselines", root / "v1-only")
        save(project.run(*args, "--specperf-update-baselines"), root / "second.json")
        (root / "truth.json").write_text(httpx.get(f"{sim.url}/_sim/truth").text)
    return once(tmp_path_factory, "exact-two-runs", produce)


@pytest.fixture
def baselined(two_runs, start_sim, tmp_path):
    """A fresh simulator (same seed, so the same steps per prompt) and a project with its own
    copy of the shared v1 baseline, which a test may change."""
    sim = start_sim(time_scale=SCALE)
    shutil.copytree(two_runs / "v1-only", tmp_path / "baselines")
    project = Project(tmp_path / "project", tmp_path / "locks")
    return sim, project, _args(sim.url, tmp_path / "baselines"), \
        tmp_path / "baselines" / "exact-dep"


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _results(project: Path) -> list[dict[str, Any]]:
    return [_load(p) for p in sorted(project.glob("reports/*/results.json"))]


def test_two_clean_runs_send_the_same_prompts_take_the_same_steps_and_never_hit_the_cache(
        two_runs):
    # Every case passes; a slope passes or, on a loaded box, skips as undetermined.
    outcomes = load(two_runs / "second.json").parseoutcomes()
    assert outcomes.get("passed", 0) >= 4 and "failed" not in outcomes \
        and "errors" not in outcomes, outcomes
    assert outcomes.get("passed", 0) + outcomes.get("skipped", 0) == 6, outcomes
    directory = two_runs / "baselines" / "exact-dep"
    v1, v2 = _load(directory / "v1.json"), _load(directory / "v2.json")
    assert v1["prompt_seed"] == v2["prompt_seed"] == "exact-dep/v1"
    for case in CASES:
        assert v1["cases"][case]["deterministic"] is True
        assert len(v1["cases"][case]["prompts"]) >= 5
        old, new = v1["cases"][case]["prompts"], v2["cases"][case]["prompts"]
        # Steps, prompt and output identities of every prompt both runs sent (a noisy cell
        # may take more repeats, hence more prompts, in one of them).
        assert {k: new[k] for k in old if k in new} == old if len(new) >= len(old) else \
            {k: old[k] for k in new} == new
    first, second = _results(two_runs / "project")
    assert {n.split("::")[1]: o for n, o in second["outcomes"].items()
            if "test_context_scaling[" in n} == {f"test_context_scaling[{c}]": "passed"
                                                  for c in CASES}
    exacts = [v["exact"] for v in second["verdicts"] if v.get("exact")]
    assert [e["status"] for e in exacts] == ["unchanged"] * 4
    # The guard's view: 0 cached tokens beyond the allowed lead on every measured request
    # while the prompts repeat across runs; and the simulator's own ground truth agrees.
    samples = [s for m in second["measurements"].values() for s in m["samples"]]
    assert samples and all(s["cached_tokens"] == 0 for s in samples)
    assert not any("prefix_cache_hit" in s["raw"] for s in samples)
    truth = json.loads((two_runs / "truth.json").read_text())["requests"]
    measured = [t for t in truth if t["completion_tokens"] == 200]
    # Both runs' requests (a noisy cell may take more repeats in either run).
    assert len(measured) >= len(samples) + sum(
        len(m["samples"]) for m in first["measurements"].values())
    assert all(t["cached_tokens"] == 0 for t in measured)


def test_a_three_percent_lower_acceptance_is_noted_inside_the_tolerance_and_fails_beyond_it(
        baselined, tmp_path):
    sim, project, args, directory = baselined
    httpx.post(f"{sim.url}/_sim/faults", json={"acceptance_mult": 0.97}).raise_for_status()
    result = project.run(*args, "--specperf-repeats=1")
    # Exact acceptance sees the change with certainty; inside the 10 % avg_commit tolerance it
    # is noted and the run passes (one repeat cannot determine a context slope: the two fit
    # tests pass or skip as undetermined, never fail).
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("error", 0) == 0, outcomes
    base = _load(directory / "v1.json")
    doc = _results(project.path)[-1]
    verdicts = {v["case_id"]: v for v in doc["verdicts"]}
    for case in CASES:
        samples = [s for s in doc["measurements"][case]["samples"] if not s["warmup"]]
        assert len(samples) == 1  # one repeat per case: no statistics needed
        old, new = base["cases"][case]["prompts"]["0"]["steps"], samples[0]["verify_steps"]
        assert new > old
        assert verdicts[case]["status"] == "noted"
        assert fnmatch.fnmatch(verdicts[case]["message"], (
            f"acceptance changed on 1 of 1 prompts (verify steps {old} → {new} on prompt 1; "
            f"{old} → {new} in all): the output text is the same, so the drafter proposes "
            f"differently — check the draft model and its settings. Avg commit −*% on these "
            f"prompts, inside the 10% acceptance tolerance: noted, not a regression. "
            f"Statistics: *"))
    assert {verdicts[c]["exact"]["cause"] for c in CASES} == {"drafter"}
    # The same change against a 1 % acceptance tolerance is a regression naming the cause.
    result = project.run(*args, "--specperf-repeats=1", "--specperf-tolerances",
                         f"avg_commit=0.01,{TIMING}")
    assert result.parseoutcomes().get("failed") == 4
    doc = _results(project.path)[-1]
    for case in CASES:
        verdict = next(v for v in doc["verdicts"] if v["case_id"] == case)
        assert verdict["status"] == "fail"
        assert fnmatch.fnmatch(verdict["message"], "acceptance changed on 1 of 1 prompts * Avg "
                               "commit −*% on these prompts, beyond the 1% acceptance tolerance "
                               "— acceptance regression (drafter or numerics: here the "
                               "drafter). Statistics: *")


def test_identical_mode_fails_a_change_that_the_tolerance_would_only_note(baselined):
    sim, project, args, directory = baselined
    httpx.post(f"{sim.url}/_sim/faults", json={"acceptance_mult": 0.97}).raise_for_status()
    result = project.run(*args, "--specperf-repeats=1", "--specperf-acceptance-mode", "identical")
    assert result.parseoutcomes().get("failed") == 4, result.stdout.str()[-2000:]
    doc = _results(project.path)[-1]
    for case in CASES:
        verdict = next(v for v in doc["verdicts"] if v["case_id"] == case)
        assert verdict["status"] == "fail"
        assert "In acceptance_mode = identical any changed prompt fails" in verdict["message"]


def test_a_changed_request_digest_refuses_to_compare_in_one_sentence(baselined):
    sim, project, args, directory = baselined
    path = directory / "v1.json"
    data = _load(path)
    data["request_digest"]["sampling"]["temperature"] = 0.7
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    result = project.run(*args)
    result.assert_outcomes(errors=6)
    result.stdout.fnmatch_lines([
        "BaselineError: this run's requests differ from those of baseline exact-dep v1 "
        "(temperature 0.7 → 0): a client-side change is no server regression, so the run "
        "refuses to compare — measure with the baseline's settings, or write a new version "
        "with --specperf-update-baselines."])
