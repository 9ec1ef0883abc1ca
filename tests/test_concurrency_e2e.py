"""The concurrency dimension end to end: bursts against a simulator process, a concurrency
baseline, a fault that hurts only batched steps, and a foreign request during a burst."""

from __future__ import annotations

import html
import json
import re
import shutil
from fnmatch import fnmatch
from pathlib import Path

import httpx
import pytest

from slowa_runs import PERF_FILES, Project, once

# Whole perf sessions against simulators: `pytest -m slow` (README: test commands).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
LEVELS = ("--concurrency-levels", "1,2,4", "--concurrency-class", "reasoning",
          "--concurrency-context", "13")
KIND = "concurrency levels 1,2,4 of reasoning-ctx13"
FILES = (*PERF_FILES, "test_concurrency.py")


def _args(url: str, baselines: Path) -> tuple[str, ...]:
    return ("-m", "concurrency_scaling", "--endpoint", url, "--baseline-dir", str(baselines),
            "--deployment", "test-dep", *LEVELS)


@pytest.fixture(scope="module")
def concurrency_baseline(start_sim, tmp_path_factory) -> Path:
    """Once per session: a v1 concurrency baseline measured on a clean simulator."""
    def produce(root: Path) -> None:
        sim = start_sim(time_scale=0.5)
        project = Project(root / "project", root / "locks", FILES)
        first = project.run(*_args(sim.url, root / "baselines"), "--update-baselines")
        first.stdout.fnmatch_lines(["specperf — SIMULATED (*); *; writing a concurrency baseline",
                                    "specperf: wrote concurrency baseline "
                                    "*/test-dep/concurrency/v1.json",
                                    f"specperf: report */report.html (this run: {KIND})"])
    return once(tmp_path_factory, "concurrency-baseline", produce) / "baselines"


@pytest.fixture
def baselined(concurrency_baseline, start_sim, tmp_path):
    """A fresh simulator (the same physics as the baseline's), a project with the concurrency
    test and its own copy of the shared v1 concurrency baseline."""
    sim = start_sim(time_scale=0.5)
    shutil.copytree(concurrency_baseline, tmp_path / "baselines")
    project = Project(tmp_path / "project", tmp_path / "locks", FILES)
    return sim, project, _args(sim.url, tmp_path / "baselines")


def _inject(sim, **faults):
    httpx.post(f"{sim.url}/_sim/faults", json=faults).raise_for_status()


def test_clean_rerun_passes_every_level(baselined):
    sim, project, args = baselined
    # a main-matrix context beyond the server's length is no concern of a concurrency run:
    # only the case it measures must fit
    result = project.run(*args, "-rs", "--contexts=13,300000")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) >= 3 and "failed" not in outcomes \
        and "errors" not in outcomes, outcomes
    result.stdout.fnmatch_lines(["concurrency: reasoning-ctx13 (bursts of C concurrent "
                                 "requests)", "*C | tok/s/user | aggregate*", "batch fit: *",
                                 "GPU-seconds: * over 3 levels*"])


def _facts(page: str) -> dict[str, str]:
    """The report header's rows (th → text of td, as a browser shows it)."""
    table = page[page.index('<table class="facts">'):]
    table = table[:table.index("</table>")]
    return {html.unescape(re.sub("<[^>]+>", "", th)): html.unescape(re.sub("<[^>]+>", "", td))
            for th, td in re.findall(r"<tr><th>(.*?)</th><td>(.*?)</td></tr>", table)}


def test_a_concurrency_only_run_states_the_concurrency_baseline_it_compared(baselined,
                                                                             tmp_path):
    sim, project, args = baselined
    path = tmp_path / "baselines" / "test-dep" / "concurrency" / "v1.json"
    created = json.loads(path.read_text())["created"]
    result = project.run(*args, "--report-dir", str(tmp_path / "reports"))
    assert result.ret == 0, result.stdout.str()
    compared = f"concurrency baseline test-dep v1 ({path}, created {created})"
    lines = result.stdout.lines
    assert (f"specperf — SIMULATED ({sim.url}); SGLang 0.5.23-ddtree-sim; acceptance from "
            f"response; 64 output tokens, ignore_eos, non-streaming; {compared}") in lines, \
        result.stdout.str()
    assert any(line.endswith(f"(this run: {KIND})") for line in lines)
    doc = json.loads(next((tmp_path / "reports").glob("*/results.json")).read_text())
    assert (doc["run"]["kind"], doc["run"]["label"], doc["baseline"]) == \
        ("concurrency", KIND, None)
    base = doc["concurrency_baseline"]
    assert (base["deployment"], base["version"], base["path"], base["levels"],
            base["not_judged"]) == ("test-dep", 1, str(path), [1, 2, 4], None)
    facts = _facts(next((tmp_path / "reports").glob("*/report.html")).read_text())
    assert facts["kind"] == KIND
    assert "baseline" not in facts  # the main baseline was not compared with
    assert facts["concurrency baseline"] == (
        f"test-dep v1 ({path}, created {created}; levels 1, 2, 4); fingerprint same as the "
        "baseline's")


def test_a_batched_step_regression_fails_from_two_up_attributed_to_step_time(baselined):
    sim, project, args = baselined
    _inject(sim, batch_step_mult=0.5)
    result = project.run(*args, "-rfp")
    outcomes = result.parseoutcomes()
    assert "errors" not in outcomes, outcomes
    assert any(line.startswith("PASSED") and "test_concurrency[c1]" in line
               for line in result.stdout.lines), result.stdout.str()
    failed = [line for line in result.stdout.lines if line.startswith("FAILED")]
    assert not any("test_concurrency[c1]" in line for line in failed), failed
    lines = result.stdout.lines
    for level in ("c2", "c4"):
        assert any(f"test_concurrency[{level}]" in line for line in failed), failed
        # The sentence under FAILURES: attributed to step time, acceptance unchanged.
        header = next(i for i, line in enumerate(lines)
                      if line.startswith("_") and f" test_concurrency[{level}] " in line)
        assert fnmatch(lines[header + 1], "tok/s * → * (−*%, limit −10%): step time * → * ms "
                       "(+*%) explains it; avg commit * → * (*, within noise); aggregate tok/s "
                       "* → * (−*%) — step-time regression: check the kernels, attention "
                       "backend and KV cache*"), lines[header + 1]
        # The closing block's one line names the factor.
        result.stdout.fnmatch_lines([f"  reasoning-ctx13-{level}: tok/s * → * (−*%, limit "
                                     "−10%); also past their limits: step time +*% — "
                                     "step-time regression"])


def test_a_foreign_request_during_a_burst_is_an_error_naming_the_burst(baselined):
    sim, project, args = baselined
    _inject(sim, foreign_output=200)
    result = project.run(*args, "-k", "c2")
    outcomes = result.parseoutcomes()
    assert outcomes.get("errors", 0) >= 1 and "failed" not in outcomes, outcomes
    result.stdout.fnmatch_lines(["*ContaminatedMeasurement: reasoning-ctx13-c2 (burst of 2, "
                                 "repeat *foreign request*"])


def test_a_concurrency_update_judges_first_and_an_accepted_one_says_why(baselined, tmp_path,
                                                                        capsys):
    from specperf.cli import main
    sim, project, args = baselined
    _inject(sim, batch_step_mult=0.5)
    refused = project.run(*args, "--update-baselines")
    assert refused.ret == 1, refused.stdout.str()
    directory = tmp_path / "baselines" / "test-dep" / "concurrency"
    assert sorted(p.name for p in directory.glob("v*.json")) == ["v1.json"]
    line = next(x for x in refused.stdout.lines if "concurrency baseline NOT updated" in x)
    assert line.startswith("specperf: concurrency baseline NOT updated: this run is worse than "
                           "the current concurrency baseline in reasoning-ctx13-c"), line
    assert line.endswith("--specperf-update-baselines --specperf-accept REASON`."), line
    assert "-m concurrency_scaling" in line, line
    accepted = project.run(*args, "--update-baselines", "--specperf-accept", "batched kernels")
    assert accepted.ret == 0, accepted.stdout.str()
    accepted.stdout.fnmatch_lines(["specperf: wrote concurrency baseline */v2.json",
                                   "  accepted although it regressed in reasoning-ctx13-c*: "
                                   "batched kernels"])
    lineage = json.loads((directory / "v2.json").read_text())["lineage"]
    assert lineage["previous"] == 1 and lineage["accepted"]["reason"] == "batched kernels"
    assert lineage["moved"]["reasoning-ctx13-c4"]["step_ms"]["change"] > 0.1
    capsys.readouterr()
    assert main(["baselines", "test-dep", "--baseline-dir", str(tmp_path / "baselines")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (f"test-dep ({tmp_path / 'baselines' / 'test-dep'}): no version of the "
                      "main cases")
    assert out[-3] == "concurrency: 2 versions"
    assert out[-2].endswith("levels 1, 2, 4; the deployment's first version"), out
    assert "slope +" in out[-1] and "(reasoning-ctx13-batch-fit)" in out[-1], out
    assert "step time +" in out[-1], out
    assert "accepted: batched kernels (" in out[-1], out
