"""The closing block's first screen (issue 47): the decision first, one line per root cause,
what the run could see in plain words, then the table — within 15 lines of 100 columns for a
passing run, 15 plus the table for a failing one; every sentence at most 40 words with no
statistics jargon; one interval per quantity."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from specperf.settings.config import resolve
from specperf.views import screen, summary
from test_report_decision import FAILING, NOTED, OPEN_SWEEP, RESOLUTION, _case, _doc

# Words a serving engineer would not use for "what the run could see" or "why it is unsure";
# the detail (-v) and report.html keep the precise terms.
JARGON = re.compile(r"\b(power|prior|resolution|resolving|df|SPRT|Welch|t-test|p-value)\b",
                    re.IGNORECASE)
MAX_WORDS = 40


def _measurement(case_id: str, context: int, cls: str) -> dict[str, Any]:
    summaries = {m: {"median": v, "n": 6} for m, v in
                 (("tok_s", 47.1), ("avg_commit", 2.9), ("step_ms", 62.0),
                  ("decode_tok_s", 48.0), ("ttft_ms", 250.0))}
    return {"case": {"id": case_id, "context": context, "text_class": cls},
            "summaries": summaries, "samples": []}


EIGHT = {f"{cls}-ctx{ctx}": _measurement(f"{cls}-ctx{ctx}", ctx, cls)
         for cls in ("padding", "reasoning") for ctx in (13, 1663, 3333, 5553)}
SWEEP_STEP = {"case_id": "sweep", "status": "fail", "reason": "", "attribution": None,
              "factor": "step", "message": "tok/s fell 15.8% … step-time regression.",
              "details": {"tok/s": {"change": -0.158, "low": -0.209, "high": -0.103,
                                    "level": 0.98, "status": "fail"},
                          "step": {"change": 0.172, "low": 0.099, "high": 0.248,
                                   "level": 0.98, "status": "fail"}}}
OPEN_STEP = {"base": 32.9, "new": 37.8, "change": 0.151, "limit": 0.1, "low": 0.059,
             "high": 0.251}
COARSE_PASS = {"case_id": "sweep", "status": "pass", "reason": "", "attribution": None,
               "message": "…", "details": {"tok/s": {"change": -0.004, "low": -0.06,
                                                     "high": 0.05, "passed_at": -0.118},
                                           "step": {"change": 0.002, "low": -0.05,
                                                    "high": 0.06, "passed_at": 0.133}}}


def _screen(doc: dict[str, Any], tmp_path: Path, detail: bool = False) -> list[str]:
    found = summary.Collector(record=doc)
    settings = resolve({"baseline_dir": str(tmp_path)}, {}, {})
    return "\n".join(summary.render(found, settings, detail=detail)).splitlines()


def _passing() -> dict[str, Any]:
    cases = [_case(c, "pass") for c in EIGHT]
    fits = [_case(f"{c}-fit", "pass") for c in ("padding", "reasoning")]
    return _doc(cases + fits + [COARSE_PASS], measurements=EIGHT, resolution=RESOLUTION)


def _failing() -> dict[str, Any]:
    cases = [_case(c, "undetermined", step_ms=OPEN_STEP) for c in EIGHT]
    return _doc(cases + [SWEEP_STEP], measurements=EIGHT, resolution=RESOLUTION)


def sentences(lines: list[str]) -> list[str]:
    """The screen's sentences: each line with its continuations (indented four columns
    further: screen._wrap), the table left out, cut at a full stop or a semicolon followed
    by a space."""
    logical: list[str] = []
    for line in lines:
        if "|" in line or set(line.strip()) <= {"-"}:
            continue
        indent = len(line) - len(line.lstrip())
        if indent >= 4 and logical:
            logical[-1] += " " + line.strip()
        else:
            logical.append(line.strip())
    return [s for line in logical for s in re.split(r"(?<=[.;])\s+(?=\S)", line) if s]


def test_a_passing_run_fits_in_fifteen_lines_and_says_pass_first(tmp_path):
    lines = _screen(_passing(), tmp_path)
    assert lines[0] == "specperf: PASS \u2014 nothing regressed (11 checks: 8 cases, 2 fits, " \
                       "the sweep)"
    assert len(lines) <= 15, "\n".join(lines)
    assert max(len(line) for line in lines) <= screen.WIDTH
    text = " ".join(line.strip() for line in lines)
    # what it could see, in plain words, and why smaller changes stay unseen
    assert ("Would have caught a tok/s drop of 6%, a step-time rise of 5% or an avg-commit drop "
            "of 4% or more") in text
    assert "2% sweep tolerance" in text
    assert not JARGON.search(text), JARGON.search(text)


def test_a_failing_run_names_its_cause_once_with_the_deciding_interval(tmp_path):
    lines = _screen(_failing(), tmp_path)
    table = [line for line in lines if "|" in line or set(line) == {"-"}]
    assert len(lines) - len(table) <= 15, "\n".join(lines)
    assert lines[0] == "specperf: FAIL \u2014 step time regressed"
    text = " ".join(line.strip() for line in lines)
    # one root-cause line for the factor, with the interval that decided it (98 %), and no
    # second interval for the same quantity anywhere on the screen
    assert "step +17.2% (98% CI +9.9% to +24.8%) over all 8 cases pooled" in text \
        or "step time +17.2% (98% CI +9.9% to +24.8%) over all 8 cases pooled" in text
    assert text.count("+17.2%") == 1 and text.count("CI") == 1, text
    # the eight cases that could not decide are one line, not eight
    assert sum("undetermined" in line for line in lines) == 1
    assert "padding-ctx13, padding-ctx1663, padding-ctx3333, padding-ctx5553 and 4 more" in text


def test_the_detail_keeps_every_verdicts_line_under_v(tmp_path):
    short = _screen(_failing(), tmp_path)
    full = _screen(_failing(), tmp_path, detail=True)
    assert full[:len(short)] == short  # the same first screen, then the detail
    assert "detail (-v):" in full
    detail = full[full.index("detail (-v):"):]
    assert sum(line.startswith("  undetermined ") for line in detail) == 8
    assert any(line.startswith("decision: FAIL") for line in full)


@pytest.mark.parametrize("doc", [
    _passing(), _failing(),
    _doc([FAILING, NOTED, OPEN_SWEEP], measurements=EIGHT, resolution=RESOLUTION),
    _doc([NOTED, OPEN_SWEEP], measurements=EIGHT, resolution=RESOLUTION,
         errors={"padding-ctx13": "EndpointError: …"}),
    _doc([], measurements=EIGHT),
    _doc([FAILING], measurements=EIGHT, persists={"since": "2026-12-02T01:00:00Z",
                                                   "nights": 4, "factor": "step",
                                                   "cases": ["padding-ctx13"]})],
    ids=["pass", "sweep-fail", "case-fail-noted-open", "errored", "nothing-judged", "persists"])
def test_every_sentence_of_the_screen_is_short_and_plain(doc, tmp_path):
    lines = _screen(doc, tmp_path)
    assert max(len(line) for line in lines) <= screen.WIDTH
    found = sentences(lines)
    longest = max(found, key=lambda s: len(s.split()))
    assert len(longest.split()) <= MAX_WORDS, longest
    for sentence in found:
        assert not JARGON.search(sentence), sentence


def test_a_persisting_regression_says_so_on_the_decision_line(tmp_path):
    doc = _doc([FAILING], measurements=EIGHT, persists={
        "since": "2026-12-02T01:00:00Z", "nights": 4, "factor": "step",
        "cases": ["padding-ctx13"]})
    first = " ".join(line.strip() for line in _screen(doc, tmp_path)[:2])
    assert first.startswith("specperf: FAIL \u2014 step time regressed; the same step-time "
                            "regression in padding-ctx13 as on every night since 2026-12-02 (4 "
                            "nights")


def _acceptance_sweep(cls: str) -> dict[str, Any]:
    return {"case_id": "sweep", "status": "fail", "reason": "", "attribution": None,
            "factor": "acceptance", "message": "…",
            "details": {f"acceptance:{cls}": {"change": -0.108, "low": -0.130, "high": -0.086,
                                              "level": 0.99, "status": "fail"}}}


@pytest.mark.parametrize(("measured", "where"), [
    # the gate's smoke subset: one reasoning case among three
    (["padding-ctx13", "padding-ctx3333", "reasoning-ctx3333"],
     "(99% CI −13.0% to −8.6%) in reasoning-ctx3333, its class's one case; past its limit there"),
    # the main job: four reasoning cases among eight
    (list(EIGHT), "(99% CI −13.0% to −8.6%) over its 4 reasoning cases pooled; past its limit "
                  "in 1 case: reasoning-ctx3333"),
])
def test_a_class_factor_counts_the_cases_of_its_class_not_every_case(measured, where):
    # A drop on one text class is pooled over that class's cases only: the gate once said
    # "avg commit on reasoning −10.8% … over all 3 cases pooled" with one reasoning case.
    verdicts = [_acceptance_sweep("reasoning"),
                _case("reasoning-ctx3333", "fail", avg_commit={
                    "base": 2.9, "new": 2.6, "change": -0.108, "limit": -0.1})]
    verdicts[1]["factor"] = "acceptance"
    lines = screen.cause_lines(verdicts, measured)
    assert len(lines) == 1 and where in lines[0], lines
    assert "all 3 cases" not in lines[0] and "all 8 cases" not in lines[0]
