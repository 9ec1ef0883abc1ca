"""What a user reads at the end of a run: the closing block, the report's regressions, hints."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import pytest

from specperf.cli.decision import CaseOutcome, GateExit, GateResult
from specperf.cli.sentences import summary_lines
from specperf.settings.config import resolve
from specperf.settings.hints import (
    perf_command,
    perf_tests_args,
    rerun_command,
    update_command,
)
from specperf.views import page, summary

STEP = ("tok/s 54.5 → 38.1 (−30.1%, limit −10%): step time 144 → 190 ms (+31.9%) explains it "
        "— step-time regression: check the kernels, attention backend and KV cache.")
POWER = "Would have caught a 5% step-time rise with probability 0.06 (0 extra requests, 0 s)."


def _settings(tmp_path: Path, **cli: Any) -> Any:
    return resolve({"baseline_dir": str(tmp_path / "baselines"), **cli}, {}, {})


def _doc(**extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"server": {"simulated": True, "fingerprint": {"sim_profile": "p"}},
                           "measurements": {"padding-ctx13": {}}, "verdicts": [],
                           "reconcile": [], "baseline": None, "fingerprint_differences": [],
                           "outcomes": {"t::a": "skipped", "t::b": "skipped"}}
    return {**doc, **extra}


def test_a_run_with_no_baseline_says_so_with_a_command_that_works(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no perf_tests/ here: the installed copy
    settings = _settings(tmp_path, deployment="nosuchdep")
    lines = summary.missing_baseline_lines(_doc(), settings)
    assert lines == [
        f"NOT JUDGED: no baseline for deployment 'nosuchdep' in {tmp_path / 'baselines'} "
        "(2 skipped): the figures above are measured but compared with nothing; create one "
        "with `pytest --pyargs specperf.perf_tests -m context_scaling --specperf-deployment "
        f"nosuchdep --specperf-baseline-dir {tmp_path / 'baselines'} "
        "--specperf-update-baselines`, then run again."]
    assert summary.compared_with(_doc(), settings) == "no baseline"


def test_no_missing_baseline_line_when_judged_updating_or_ab(tmp_path):
    base = {"deployment": "d", "version": 3, "created": "2026-12-01T00:00:00Z"}
    assert summary.missing_baseline_lines(_doc(baseline=base), _settings(tmp_path)) == []
    assert summary.missing_baseline_lines(_doc(), _settings(tmp_path, update_baselines=True)) == []
    ab = _settings(tmp_path, endpoint="http://127.0.0.1:1", compare_endpoint="http://127.0.0.1:2")
    assert summary.missing_baseline_lines(_doc(), ab) == []
    assert summary.compared_with(_doc(baseline=base), _settings(tmp_path)) == \
        "baseline d v3 (created 2026-12-01T00:00:00Z)"
    assert summary.compared_with(_doc(), ab) == \
        "compared with production http://127.0.0.1:2 (A/B, same run)"


def test_hints_name_the_perf_tests_as_found_from_the_current_directory(tmp_path):
    assert perf_tests_args(tmp_path) == ["--pyargs", "specperf.perf_tests"]
    (tmp_path / "perf_tests").mkdir()
    assert perf_tests_args(tmp_path) == ["perf_tests"]
    assert perf_command("-m", "smoke", cwd=tmp_path) == "pytest perf_tests -m smoke"


def test_update_command_in_a_checkout(monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    settings = resolve({"endpoint": "http://10.0.0.5:30000", "deployment": "prod"}, {}, {})
    assert update_command(settings) == ("pytest perf_tests -m context_scaling --specperf-endpoint "
                                        "http://10.0.0.5:30000 --specperf-deployment prod "
                                        "--specperf-update-baselines")


def test_a_rerun_acts_on_the_runs_server_its_other_arm_and_its_levels(monkeypatch):
    """The command an undetermined fit advises: the run's endpoint and deployment, an A/B
    run's production arm, a concurrency run's levels when not the defaults."""
    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    ab = resolve({"endpoint": "http://10.0.0.5:30000", "deployment": "prod",
                  "compare_endpoint": "http://10.0.0.6:30000"}, {}, {})
    assert rerun_command(ab, "--specperf-repeats", "10") == (
        "pytest perf_tests -m context_scaling --specperf-endpoint http://10.0.0.5:30000 "
        "--specperf-deployment prod --specperf-compare-endpoint http://10.0.0.6:30000 "
        "--specperf-repeats 10")
    burst = resolve({"endpoint": "http://10.0.0.5:30000", "concurrency_levels": "1,4"}, {}, {})
    assert rerun_command(burst, "--specperf-repeats", "10", marker="concurrency_scaling") == (
        "pytest perf_tests -m concurrency_scaling --specperf-endpoint http://10.0.0.5:30000 "
        "--specperf-concurrency-levels=1,4 --specperf-repeats 10")


def test_changed_cases_on_a_changed_server_name_the_fingerprint_fields():
    base = {"deployment": "d", "version": 2, "created": "x"}
    failing = {"case_id": "padding-ctx13", "status": "fail", "message": STEP}
    doc = _doc(baseline=base, verdicts=[failing],
               fingerprint_differences=["draft model: a → b", "threads: 2 → 1"])
    lines = summary.verdict_lines(doc)
    assert lines[-1] == (
        "  the server's fingerprint differs from baseline v2's (draft model, threads: draft "
        "model: a → b; threads: 2 → 1): these changes may be that server change, not the code "
        "under test; if the new server is intended, write a new baseline version with "
        "--specperf-update-baselines.")
    assert summary.fingerprint_lines(_doc(baseline=base, verdicts=[failing])) == []


def test_a_failure_drops_the_power_sentence_a_pass_keeps_it():
    failing = {"case_id": "sweep", "status": "fail", "message": f"{STEP} {POWER}"}
    lines = summary.verdict_lines(_doc(verdicts=[failing]))
    assert lines == ["regressions (1), one line each (the sentences are under FAILURES above "
                     "and in report.html):",
                     "  sweep: tok/s 54.5 → 38.1 (−30.1%, limit −10%) — step-time regression"]


def test_report_groups_regressions_by_cause_summary_first():
    exact = ("acceptance changed on 5 of 5 prompts (…): the output text is the same, so the "
             "drafter proposes differently — check the draft model and its settings.")
    details = {"tok_s": {"base": 54.5, "new": 38.1, "change": -0.301, "limit": -0.1},
               "step_ms": {"base": 144.0, "new": 190.0, "change": 0.319, "limit": 0.1}}
    failing = [{"case_id": f"padding-ctx{c}", "status": "fail", "details": details,
                "message": f"{exact} Statistics: {STEP}"} for c in (13, 1663)]
    block = html.unescape(page.section("regressions", {"verdicts": failing, "reconcile": []}))
    assert block.count("<h3") == 1  # grouped by the factor the fields name, not the prose
    assert ("step-time regression: check the kernels, attention backend and KV cache "
            "(2: padding-ctx13, padding-ctx1663)</h3>") in block
    items = re.findall(r'<li class="regression" data-case="[^"]+"><b>[^<]+</b>: ([^<]*)</li>',
                       block)
    assert items == ["tok/s 54.5 → 38.1 (−30.1%, limit −10%); also past their limits: step "
                     "time +31.9%"] * 2


def test_the_ab_gate_names_both_sides():
    case = CaseOutcome("padding-ctx13", "failed", "production → candidate: " + STEP)
    out = summary_lines(GateResult(GateExit.REGRESSION, "r", (case,)),
                             "candidate C, judged against production P")
    assert out[1] == "specperf gate: REGRESSION (exit 1): r"
    assert out[2] == ("  1 smoke check (1 case) against candidate C, judged against "
                      "production P")


@pytest.mark.parametrize("args", [["--specperf-contexts", "-5,abc"], ["--specperf-contexts"]])
def test_a_contexts_value_that_starts_with_a_dash_gets_a_hint(pytester, args):
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "*argument --specperf-contexts: expected one value. A value that starts with '-' reads "
        "as an option: attach it with '=', e.g. --specperf-contexts=-5,13 (not "
        "--specperf-contexts -5,13)"])


def test_the_missing_baseline_command_keeps_the_runs_case_shape_and_noise_limits(tmp_path):
    settings = _settings(tmp_path, deployment="tiny", contexts="16,2000", max_spread="0.3",
                         max_repeats="20", tolerances="tok_s=0.4,step_ms=0.4")
    [line] = summary.missing_baseline_lines(_doc(), settings)
    assert ("--specperf-deployment tiny --specperf-baseline-dir " in line
            and "--specperf-contexts=16,2000 --specperf-max-spread=0.3 "
            "--specperf-max-repeats=20 --specperf-tolerances=step_ms=0.4,tok_s=0.4 "
            "--specperf-update-baselines`" in line)


def test_a_regressed_gate_says_its_open_cases_once_beside_the_root_cause():
    # A stored-baseline gate on a 15 % step rise printed a ~400-column line per case, each
    # repeating the step-time figure its root cause already gives.
    from specperf.views.screen import WIDTH
    from test_first_screen import OPEN_STEP
    from test_report_decision import _case, _doc
    cases = ("reasoning-ctx3333", "padding-ctx3333", "padding-ctx13")
    sweep = {"case_id": "sweep", "status": "fail", "factor": "step", "reason": "",
             "message": "sweep", "details": {"step": {"change": 0.149, "low": 0.072,
                                                      "high": 0.232, "level": 0.98,
                                                      "regressed": True}}}
    record = _doc([*(_case(c, "undetermined", step_ms=OPEN_STEP) for c in cases), sweep],
                  measurements=list(cases))
    outcomes = tuple(CaseOutcome(c, "skipped", "long sentence " * 30, undetermined=True,
                                 line="tok/s 30.6 → 26.8 (−12.2%, limit −10%, undetermined) "
                                      "has a 95% interval of −19.3% to −4.6% " * 3)
                     for c in cases) + (CaseOutcome("sweep", "failed", "sweep", check="sweep"),)
    out = summary_lines(GateResult(GateExit.REGRESSION, "step time regressed", outcomes),
                        "http://gpu-box:30000", record=record)
    opened = [line for line in out if line.lstrip().startswith("OPEN")]
    assert len(opened) == 1
    assert "3 checks (reasoning-ctx3333, padding-ctx3333, padding-ctx13)" in " ".join(out)
    shown = "\n".join(out[2:]).splitlines()
    assert all(len(line) <= WIDTH for line in shown if "smoke check" not in line), out
