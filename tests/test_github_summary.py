"""The run on a GitHub Actions page: the job summary and the annotations, from the record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from specperf.plugin import publish
from specperf.settings.config import Settings
from specperf.views import github, screen
from specperf.views.decision import decide
from test_report import make_doc


def regressed() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(json.dumps(make_doc(commit=5.0)))
    return doc


def test_the_summary_says_the_decision_first_then_each_regression_and_the_table():
    doc = regressed()
    report = Path("/reports/20250101-000000-aaaa/report.html")
    lines = github.summary(doc, report).splitlines()
    # The terminal's first screen, in its order: the decision, one line per root cause.
    assert lines[2] == "**FAIL \u2014 acceptance regressed**"
    assert decide(doc).word == "FAIL"
    causes = [line for line in lines if line.startswith("- :x: ")]
    assert causes == [f"- :x: {line}" for line in screen.cause_lines(doc["verdicts"], 4)]
    assert len(causes) == 1 and "check the drafter and the text" in causes[0]
    assert "| case | verdict | tok/s | avg commit | step ms | TTFT ms | Δ tok/s |" in lines
    assert "| `padding-ctx13` | regression | 38.5 | 4.99 | 100.1 | 50 | -35.9% |" in lines
    assert lines[-1] == f"Report: `{report}` (results.json beside it)."


def test_one_error_annotation_per_regression_escaped_as_the_runner_reads_it():
    doc = regressed()
    doc["verdicts"][1]["status"] = "undetermined"
    doc["verdicts"][1]["message"] = "line one\nline two, 5% off"
    found = github.annotation_lines(doc)
    assert len(found) == 4
    assert found[0] == ("::error title=specperf regression%3A padding-ctx13::"
                        + doc["verdicts"][0]["message"].replace("%", "%25"))
    assert found[1] == ("::warning title=specperf undetermined%3A padding-ctx3333::"
                        "line one%0Aline two, 5%25 off")
    assert all("\n" not in line for line in found)


def test_publish_appends_to_the_step_summary_only_when_github_names_one(tmp_path):
    doc = regressed()
    step = tmp_path / "summary.md"
    step.write_text("before\n")
    out = publish.publish(doc, Settings(), None, environ={"GITHUB_STEP_SUMMARY": str(step)})
    assert out.lines == [f"GitHub job summary appended to {step}"] and not out.problems
    assert step.read_text() == "before\n" + github.summary(doc, None)
    assert out.annotations == github.annotation_lines(doc)
    quiet = publish.publish(doc, Settings(), None, environ={})
    assert (quiet.lines, quiet.problems, quiet.annotations) == ([], [], [])
