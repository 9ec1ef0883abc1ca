"""What a run decided, said first on report.html and last in the terminal (issue 41, items 3
and 4): every verdict's word, the noted and undetermined ones with a one-line reason, the
sweep's decision, the factor that moved, and what the run could have seen."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

from specperf.settings.config import resolve
from specperf.views import decision, page, screen, summary

TOK = {"base": 47.3, "new": 47.1, "change": -0.004, "limit": -0.1, "low": -0.01, "high": 0.0}

# The words issue 47 keeps off the first screen (tests/test_first_screen.py holds the list).
JARGON = re.compile(r"\b(power|prior|resolution|resolving|df|SPRT)\b", re.IGNORECASE)


def _case(case_id: str, status: str, **details: Any) -> dict[str, Any]:
    return {"case_id": case_id, "status": status, "message": f"{case_id}: the sentence.",
            "details": {"tok_s": TOK, **details}, "reason": "", "attribution": None}


NOTED = _case("reasoning-ctx1663", "noted", avg_commit={
    "base": 3.01, "new": 2.95, "change": -0.02, "limit": -0.1, "low": -0.03, "high": -0.01})
OPEN_SWEEP = {"case_id": "sweep", "status": "undetermined", "reason": "", "attribution": None,
              "message": "tok/s fell 1.8% across the sweep … neither a pass nor a fail.",
              "details": {"tok/s": {"change": -0.018, "low": -0.035, "high": -0.001,
                                    "regressed": 0.0, "noted": 0.0},
                          "step": {"change": 0.0, "low": -0.005, "high": 0.005,
                                   "regressed": 0.0, "noted": 0.0}}}
RESOLUTION = {"power": 0.95, "noise": "run-to-run ±3.0% assumed: no history yet",
              "factors": {"tok_s": -0.06, "step_ms": 0.05, "avg_commit": -0.04}}
STEP = {"base": 62.0, "new": 71.4, "change": 0.15, "limit": 0.1, "low": 0.13, "high": 0.17}
FAILING = _case("padding-ctx13", "fail", step_ms=STEP) | {
    "details": {"tok_s": {"base": 141.6, "new": 123.6, "change": -0.127, "limit": -0.1},
                "step_ms": STEP}, "attribution": {"acceptance": 0.0, "step": 1.03, "rest": -0.03}}


def _doc(verdicts: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    doc = {"run_id": "20261203-000000-abcd", "created": "2026-12-03T00:00:00Z",
           "duration_s": 30.0, "lock_wait_s": 0.0, "suite_version": "0.1.0",
           "git_revision": "abc", "interrupted": False,
           "server": {"simulated": True, "url": "http://127.0.0.1:1", "time_scale": 0.05,
                      "fingerprint": {"sim_profile": "p"}, "notes": []},
           "settings": {"sim_profile": "p", "output_tokens": 600, "repeats": 3,
                        "sweep_tolerance": 0.02, "contexts": [13], "text_classes": ["padding"]},
           "fingerprint": {}, "fingerprint_differences": [], "errors": {}, "outcomes": {},
           "measurements": {}, "fits": {}, "reconcile": [], "paths": [],
           "baseline": {"deployment": "dep", "version": 3, "created": "x", "fits": {}},
           "run": {"kind": "full", "label": "full sweep"}, "verdicts": verdicts}
    return {**doc, **extra}


def _closing(doc: dict[str, Any], tmp_path: Path, skipped: dict[str, str] | None = None
             ) -> list[str]:
    found = summary.Collector(record=doc, skipped=dict(skipped or {}))
    settings = resolve({"baseline_dir": str(tmp_path)}, {}, {})
    lines = summary.render(found, settings, detail=True)
    return lines[lines.index(next(x for x in lines if x.startswith("verdicts:"))):]


def test_a_run_without_regressions_ends_with_every_verdicts_word(tmp_path):
    doc = _doc([_case("padding-ctx13", "pass"), NOTED, _case("padding-fit", "pass"),
                OPEN_SWEEP], resolution=RESOLUTION)
    skipped = {"test_context_fit[reasoning]": "baseline dep v3 has no reasoning fit: write one."}
    assert _closing(doc, tmp_path, skipped) == [
        "verdicts: undetermined 1, noted 1, pass 2, not judged 1",
        "  pass: padding-ctx13, padding-fit",
        "  noted reasoning-ctx1663: avg commit 3.01 → 2.95 (−2.0%, limit −10%), a change we are "
        "sure of, inside the limit",
        "  undetermined sweep: tok/s −1.8% (95% CI −3.5% to −0.1%): its interval reaches past "
        "the 2% sweep tolerance",
        "  not judged (test_context_fit[reasoning]): baseline dep v3 has no reasoning fit: "
        "write one.",
        "This run sees: tok/s −6.0%, step time +5.0%, avg commit −4.0% (95% power; run-to-run "
        "±3.0% assumed: no history yet).",
        "decision: UNDETERMINED — 1 verdict could not decide. Sweep: undetermined — tok/s −1.8% "
        "(95% CI −3.5% to −0.1%): its interval reaches past the 2% sweep tolerance. Verdicts: "
        "undetermined 1, noted 1, pass 2."]


def test_a_clean_run_passes_and_a_regression_fails_naming_the_factor(tmp_path):
    sweep = {**OPEN_SWEEP, "status": "pass"}
    assert decision.decide(_doc([_case("padding-ctx13", "pass"), NOTED, sweep])).line() == (
        "PASS — nothing moved past its tolerance in the bad direction (1 noted: see the "
        "verdicts). Sweep: pass — no factor moved past the 2% sweep tolerance. Verdicts: "
        "noted 1, pass 2.")
    failed = decision.decide(_doc([FAILING, NOTED], errors={"t::x": "boom"})).line()
    assert failed == ("FAIL — step time moved (1 regression). Sweep: none — no sweep test "
                      "ran; the cases were judged alone. Verdicts: regression 1, noted 1, "
                      "errored 1 (infrastructure: see Errors).")


def test_nothing_judged_is_undetermined_and_says_why():
    doc = _doc([], baseline=None)
    assert decision.decide(doc).line() == (
        "UNDETERMINED — nothing was compared with a baseline. Sweep: none — no baseline to "
        "compare with. Verdicts: none.")
    doc["settings"]["compare_endpoint"] = "http://prod:30000"
    assert decision.decide(doc).sweep == ("none — no sweep verdict in this A/B run; its cases "
                                          "were judged against production")
    doc["settings"]["update_baselines"] = True
    assert "a baseline-updating run judges its cases, not the sweep" in decision.decide(doc).sweep


def test_a_concurrency_run_is_not_said_to_lack_a_baseline():
    """Its levels are judged against the concurrency baseline; only the sweep is absent."""
    doc = _doc([_case("reasoning-ctx16-c1", "pass")], baseline=None,
               concurrency_baseline={"deployment": "dep", "version": 1, "created": "x"})
    assert decision.decide(doc).line() == (
        "PASS — nothing moved past its tolerance in the bad direction. Sweep: none — a "
        "concurrency run has no sweep; its levels were judged against the concurrency "
        "baseline. Verdicts: pass 1.")


def test_the_page_opens_with_the_decision_then_regressions_verdicts_and_charts():
    doc = _doc([FAILING, NOTED, OPEN_SWEEP], resolution=RESOLUTION)
    text = page.render(doc)
    order = [text.index(mark) for mark in ('id="decision"', 'id="resolution"',
                                           'id="regressions"', 'id="verdicts"', 'id="run"',
                                           'id="cases"', 'id="plots"')]
    assert order == sorted(order)
    shown = html.unescape(re.sub(r"<[^>]+>", "", text.split('id="decision"')[1]
                                 .split("</p>")[0]))
    assert shown == ' class="decision fail" data-decision="FAIL">FAIL — step time regressed'
    # The terminal's first screen, in its order: the decision, the root cause, the other
    # words, what the run could have seen (views/screen.py renders both).
    plain = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", text)).split())
    terminal = screen.cause_lines(doc["verdicts"], 0) + \
        screen.other_lines(doc, {}, "the verdicts below say why") + [screen.could_see(doc)]
    at = [plain.index(line) for line in terminal]
    assert at == sorted(at) and at[0] > plain.index("FAIL — step time regressed")
    assert "Would have caught a tok/s drop of 6%, a step-time rise of 5% or an avg-commit drop " \
           "of 4% or more" in plain
    assert 'data-factor="step"' in text  # grouped by the field, not by the sentence
    for status in ("noted", "undetermined"):  # rendered like the others, and coloured
        assert f'<li class="verdict {status}" data-case=' in text
        assert re.search(rf"\.{status}\{{background:#[0-9a-f]{{6}}\}}", text)


def test_a_record_without_a_resolution_shows_no_line():
    assert 'id="resolution"' not in page.render(_doc([NOTED]))
    assert decision.resolution_line({"resolution": {"factors": {"tok_s": -0.05}}}) == \
        "This run sees: tok/s −5.0% (95% power)."
    assert decision.resolution_line({"resolution": {"factors": {"avg_commit:x": -0.05}}}) == ""


def test_a_sweep_passed_at_its_resolution_never_claims_the_tolerance() -> None:
    """A first night's sweep passes at the resolution the run-to-run prior allows: the line
    says what it rules out, never "no factor moved past the 2% sweep tolerance"."""
    coarse = {**OPEN_SWEEP, "status": "pass", "details": {
        "tok/s": {"change": -0.004, "low": -0.05, "high": 0.04, "passed_at": -0.118},
        "step": {"change": 0.003, "low": -0.04, "high": 0.05, "passed_at": 0.133}}}
    line = decision.decide(_doc([_case("padding-ctx13", "pass"), coarse])).line()
    assert "Sweep: pass as far as this run can see — it rules out tok/s beyond −11.8%, step " \
        "time beyond +13.3%; the run-to-run noise hides a change as small as the 2% sweep " \
        "tolerance." in line, line
    assert not JARGON.search(line), line
    assert "no factor moved past" not in line


def test_the_verdict_count_counts_what_its_line_names() -> None:
    # Three cases, the sweep and the parser path pass: the pass line names four, so it counts
    # four, and says where the fifth is (the paths' own block above it).
    from specperf.views.decision import verdict_words
    names = ["reasoning-ctx3333", "padding-ctx3333", "padding-ctx13", "smoke subset",
             "reasoning-ctx3333 chat vs native"]
    doc = {"verdicts": [{"case_id": n, "status": "pass", "message": "m", "details": {}}
                        for n in names], "baseline": {"deployment": "d", "version": 1}}
    lines = verdict_words(doc)
    assert lines[0] == "verdicts: pass 4 (and 1 path comparison, above)"
    assert lines[1] == "  pass: " + ", ".join(names[:4])
    counted = int(lines[0].split("pass ")[1].split()[0])
    assert counted == len(lines[1].split(": ", 1)[1].split(", "))


def test_a_sweep_regression_shows_one_interval_for_its_figure() -> None:
    # A 15 % step rise, noisy requests: the failing sentence prints the interval that decided
    # (the test's own level) and the closing block's line prints that same interval, never a
    # second one at another level.
    import random
    import re

    from specperf.core.noise import NoiseModel
    from specperf.core.stats import summarize
    from specperf.judge.sweep.factor import CaseData
    from specperf.judge.sweep.pooled import judge_sweep
    from specperf.plan.workload import Case
    from specperf.views.headline import headline
    rng = random.Random(99)
    cases = []
    for text_class, context in (("reasoning", 3333), ("padding", 3333), ("padding", 13)):
        step, commit = 28.0 + 0.018 * context, 3.0 if text_class == "reasoning" else 7.0
        def draw(scale: float, n: int, v: float) -> list[float]:
            return [v * scale * (1 + rng.gauss(0, 0.03)) for _ in range(n)]
        base = {"step_ms": summarize(draw(1.0, 12, step)),
                "avg_commit": summarize(draw(1.0, 12, commit)),
                "tok_s": summarize(draw(1.0, 12, 1000 * commit / step))}
        run = {"step_ms": draw(1.15, 6, step), "avg_commit": draw(1.0, 6, commit),
               "tok_s": draw(1 / 1.15, 6, 1000 * commit / step)}
        cases.append(CaseData(Case(text_class, context, 200), run, base, None, 1.0))
    verdict = judge_sweep(cases, "smoke subset", noise=NoiseModel.same_night()).verdict()
    assert verdict.status == "fail", verdict.message
    said = set(re.findall(r"\d+% CI [^,)]+", verdict.message))
    shown = set(re.findall(r"\d+% CI [^,)]+", headline(verdict.to_dict())))
    assert shown and shown <= said, (shown, said)


def test_a_path_regression_names_its_path_on_the_decision_line_and_the_first_screen():
    # CI printed "FAIL — a factor its record does not name moved (1 regression)" for a stream
    # path's regression: a path verdict now names its factor, from the judge itself.
    from specperf.judge.pathverdict import judge_stream
    from specperf.views import screen
    from test_pathverdict import TOLERANCES, figs
    plain = figs("native", tok_s=52.0, decode_tok_s=90.6, step_ms=86.8, avg_commit=7.9)
    stream = figs("native stream", tok_s=44.0, decode_tok_s=76.0, step_ms=104.0,
                  avg_commit=7.9, delivery_tok_s=75.8)
    path = judge_stream("padding-ctx3333 stream vs non-stream", plain, stream,
                        TOLERANCES).to_dict()
    doc = _doc([_case("padding-ctx13", "pass"), path])
    assert decision.decide(doc).why == "the streaming path moved (1 regression)"
    assert screen.decision_line(doc) == "specperf: FAIL — the streaming path regressed"
    [cause] = screen.cause_lines(doc["verdicts"], ["padding-ctx13", "padding-ctx3333"])
    assert cause.startswith("server step time while streaming 87 → 104 ms (+19.8%, 95% CI "
                            "+1"), cause
    assert cause.endswith(" in padding-ctx3333 stream vs non-stream — the server decodes "
                          "slower while streaming: a server regression on the streaming path, "
                          "not transport; check the server's stream output (stream interval, "
                          "detokenizer) and the scheduler"), cause


def test_a_regression_whose_record_names_no_factor_names_its_checks():
    old = {**FAILING, "factor": "", "details": {}, "case_id": "padding-ctx13 chat vs native",
           "message": "chat tok/s fell"}
    assert decision.decide(_doc([old])).why == \
        "what padding-ctx13 chat vs native measures moved (1 regression)"
