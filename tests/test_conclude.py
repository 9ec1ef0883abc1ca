"""One place turns a verdict into a pytest outcome, after recording it (plugin/conclude.py):
an undetermined verdict — a fit, a sweep — is a skip with a one-line reason, and it is in
results.json with its whole sentence and the run's resolution."""

from __future__ import annotations

import json

import pytest

pytest_plugins = ["pytester"]

TESTS = '''
import pytest

from specperf.core.verdict import Scope, Verdict
from specperf.plugin.conclude import conclude, not_judged


@pytest.fixture(autouse=True)
def _as_perf_test(request):
    # what the perf fixtures mark a perf test with: the run then leaves a record
    request.node.user_properties.append(("specperf_case", request.node.name))

SEEN = {"scope": "sweep", "power": 0.95, "noise": "run-to-run ±3.0% assumed: no history yet",
        "factors": {"tok_s": -0.126, "step_ms": 0.133, "avg_commit": -0.13},
        "extra_requests": 0, "extra_s": 0.0}


def test_fit(request):
    conclude(request, [Verdict("reasoning-fit", "undetermined",
                               "reasoning: the slope sits within its uncertainty, so it is "
                               "neither a pass nor a fail", scope=Scope.FIT)])


def test_sweep(request):
    conclude(request, [Verdict("sweep", "undetermined", "step time rose 9.0% across the "
                               "sweep: the interval straddles the 2% sweep tolerance",
                               resolution=SEEN, scope=Scope.SWEEP)])


def test_regressed(request):
    conclude(request, [Verdict("padding-ctx13", "fail", "step time 33 → 40 ms (+21.2%)",
                               scope=Scope.CASE)])


def test_passed(request):
    conclude(request, [Verdict("padding-ctx1663", "pass", "within tolerance", scope=Scope.CASE)])


def test_no_entry(request):
    not_judged(request, "baseline box v1 has no entry for this case. Write a new version.")
'''


def test_undetermined_fit_and_sweep_are_skips_recorded_in_results_json(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_verdicts=TESTS)
    reports = pytester.path / "reports"
    result = pytester.runpytest("-p", "no:cacheprovider", "-rs",
                                f"--specperf-report-dir={reports}")
    result.assert_outcomes(passed=1, failed=1, skipped=3)
    result.stdout.fnmatch_lines([
        "SKIPPED*reasoning-fit undetermined: reasoning: the slope sits within its "
        "uncertainty, so it is neither a pass nor a fail",
        "SKIPPED*sweep undetermined: step time rose 9.0% across the sweep*"])
    [doc_path] = reports.glob("*/results.json")
    doc = json.loads(doc_path.read_text(encoding="utf-8"))
    statuses = {v["case_id"]: v["status"] for v in doc["verdicts"]}
    assert statuses == {"reasoning-fit": "undetermined", "sweep": "undetermined",
                        "padding-ctx13": "fail", "padding-ctx1663": "pass"}
    assert doc["resolution"]["factors"]["step_ms"] == pytest.approx(0.133)
    assert doc["resolution"]["noise"] == "run-to-run ±3.0% assumed: no history yet"
    # A test that reached no verdict is in the record too, by case, with its reason; the
    # report's first screen says it as the terminal's does, from the record.
    assert doc["not_judged"] == {
        "test_no_entry": "baseline box v1 has no entry for this case. Write a new version."}
    page = (doc_path.parent / "report.html").read_text(encoding="utf-8")
    assert "not judged 1 (test_no_entry): baseline box v1 has no entry for this case." in page
    result.stdout.fnmatch_lines(["*not judged 1 (test_no_entry): baseline box v1 has no entry*"])
