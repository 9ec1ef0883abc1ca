"""One line per verdict, read from its fields (never from its sentence): a regression's
headline (what moved past its limit, by how much, which factor), a noted or undetermined
verdict's reason; the whole sentence is printed once, under pytest's FAILURES."""

from __future__ import annotations

from specperf.views.headline import factor, headline, reason

# A case of the fault demo (step_time_mult 1.3, acceptance_mult 0.8), as results.json has it.
CASE = {
    "case_id": "padding-ctx13", "status": "fail",
    "details": {
        "tok_s": {"base": 138.9, "new": 86.7, "change": -0.376, "limit": -0.1},
        "avg_commit": {"base": 4.72, "new": 3.79, "change": -0.196, "limit": -0.1},
        "step_ms": {"base": 32.9, "new": 42.7, "change": 0.300, "limit": 0.1},
        "decode_tok_s": {"base": 143.4, "new": 88.7, "change": -0.382, "limit": -0.1},
        "ttft_ms": {"base": 2.0, "new": 2.0, "change": 0.0, "limit": 0.25}},
    "exact": {"status": "changed", "changed": 6, "compared": 6, "cause": "drafter"},
    # The sentence says "step-time regression": the line must not read it, so it lies here.
    "message": "tok/s 138.9 → 86.7 — a step-time regression, says the prose."}


def test_a_case_names_tok_s_every_other_metric_past_its_limit_and_the_factor():
    assert headline(CASE) == (
        "tok/s 138.9 → 86.7 (−37.6%, limit −10%); also past their limits: avg commit "
        "−19.6%, step time +30.0%, decode tok/s −38.2%; acceptance changed on 6 of 6 prompts: "
        "the drafter — acceptance and step-time regression")


def test_a_factor_field_in_the_record_wins_over_the_figures():
    assert factor({**CASE, "factor": "step"}) == "step"
    assert headline({**CASE, "factor": "step"}).endswith(" — step-time regression")


def test_a_tok_s_drop_without_a_factor_past_its_limit_is_named_by_its_shares():
    verdict = {"case_id": "reasoning-ctx3333", "status": "fail", "details": {
        "tok_s": {"base": 30.0, "new": 26.4, "change": -0.12, "limit": -0.1},
        "avg_commit": {"base": 2.9, "new": 2.77, "change": -0.045, "limit": -0.1},
        "step_ms": {"base": 92.0, "new": 98.9, "change": 0.075, "limit": 0.1}},
        "attribution": {"acceptance": 0.36, "step": 0.57, "rest": 0.07}}
    assert factor(verdict) == "acceptance+step"
    assert factor({**verdict, "attribution": {"acceptance": 0.1, "step": 0.2, "rest": 0.7}}) \
        == "unexplained"
    assert factor({**verdict, "status": "pass", "details": {}}) == ""


def test_prefill_past_its_limit_is_named_even_when_tok_s_held():
    verdict = {"case_id": "padding-ctx3333", "status": "fail", "details": {
        "tok_s": {"base": 50.7, "new": 48.9, "change": -0.036, "limit": -0.1},
        "ttft_ms": {"base": 249.0, "new": 748.0, "change": 2.0, "limit": 0.25}}}
    assert headline(verdict) == ("prefill (TTFT) 249 → 748 ms (+200.0%, limit +25%) — "
                                 "prefill regression")


def test_a_fit_and_a_sweep_are_read_from_their_own_fields():
    fit = {"case_id": "padding-fit", "status": "fail", "details": {"slope": {
        "base": 17.7, "new": 23.0, "change": 0.301, "limit": 0.15}}}
    assert headline(fit) == ("step time per 1k context 17.7 → 23.0 ms (+30.1%, limit +15%) — "
                             "attention scaling regression")
    sweep = {"case_id": "sweep", "status": "fail", "details": {
        "acceptance:padding": {"change": -0.198, "low": -0.21, "high": -0.18, "regressed": 1.0},
        "step": {"change": 0.30, "low": 0.29, "high": 0.31, "regressed": 1.0},
        "tok/s": {"change": -0.353, "low": -0.396, "high": -0.308, "regressed": 1.0}}}
    assert headline(sweep) == (
        "tok/s −35.3% (95% CI −39.6% to −30.8%); step time +30.0% (95% CI +29.0% to +31.0%); "
        "avg commit on padding −19.8% (95% CI −21.0% to −18.0%) — acceptance and step-time "
        "regression")


def test_a_verdict_without_figures_falls_back_to_its_sentence():
    # An older record, or a path verdict (its record holds the sentence alone).
    old = {"case_id": "sweep", "status": "fail",
           "message": "tok/s fell 35.3% across\nthe sweep (95% CI −39.6% to −30.8%): step time "
                      "+30.0% — step-time regression: check the kernels. Would have caught a "
                      "5% tok/s fall with probability 0.95."}
    assert headline(old) == ("tok/s fell 35.3% across the sweep (95% CI −39.6% to −30.8%) — "
                             "step-time regression")
    assert len(headline({**old, "message": "word " * 100})) <= 202


def test_a_figure_past_its_limit_only_as_a_point_is_marked_undetermined():
    verdict = {"case_id": "padding-ctx13", "status": "fail", "details": {
        "tok_s": {"base": 138.9, "new": 85.8, "change": -0.383, "limit": -0.1,
                  "low": -0.638, "high": 0.054},
        "step_ms": {"base": 32.9, "new": 42.8, "change": 0.300, "limit": 0.1,
                    "low": -0.045, "high": 0.771},
        "avg_commit": {"base": 4.72, "new": 3.79, "change": -0.196, "limit": -0.1,
                       "low": -0.25, "high": -0.12}}}
    assert headline(verdict) == (
        "tok/s 138.9 → 85.8 (−38.3%, limit −10%, undetermined); also past their limits: avg "
        "commit −19.6%, step time +30.0% (undetermined) — acceptance regression")


def test_noted_and_undetermined_verdicts_say_why_in_one_line():
    noted = {"case_id": "reasoning-ctx1663", "status": "noted", "details": {
        "tok_s": {"base": 47.3, "new": 46.5, "change": -0.017, "limit": -0.1,
                  "low": -0.03, "high": 0.0},
        "avg_commit": {"base": 3.01, "new": 2.95, "change": -0.02, "limit": -0.1,
                       "low": -0.03, "high": -0.01}}}
    assert reason(noted) == ("avg commit 3.01 → 2.95 (−2.0%, limit −10%), a change we are sure "
                             "of, inside the limit")
    open_ = {"case_id": "padding-ctx13", "status": "undetermined", "details": {
        "tok_s": {"base": 141.0, "new": 128.3, "change": -0.09, "limit": -0.1,
                  "low": -0.14, "high": -0.04}}}
    assert reason(open_) == ("tok/s 141.0 → 128.3 (−9.0%, limit −10%, undetermined) has a 95% "
                             "interval of −14.0% to −4.0%, across the limit")
    sweep = {"case_id": "sweep", "status": "undetermined", "details": {
        "tok/s": {"change": -0.018, "low": -0.035, "high": -0.001, "regressed": 0.0,
                  "noted": 0.0},
        "step": {"change": 0.001, "low": -0.004, "high": 0.006, "regressed": 0.0}}}
    assert reason(sweep, 0.02) == ("tok/s −1.8% (95% CI −3.5% to −0.1%): its interval reaches "
                                   "past the 2% sweep tolerance")
    assert reason({"case_id": "x", "status": "undetermined", "reason": "no-baseline"}) == \
        "nothing in the baseline to compare with"


def test_an_undetermined_fit_says_its_interval_from_the_fits_margin():
    fit = {"case_id": "padding-fit", "status": "undetermined", "details": {"slope": {
        "base": 17.7, "new": 20.3, "change": 0.147, "limit": 0.15, "margin": 0.35}}}
    assert reason(fit) == ("step time per 1k context 17.7 → 20.3 ms (+14.7%, limit +15%, "
                           "undetermined) has a 95% interval of +12.7% to +16.7%, across the "
                           "limit")


def test_a_figure_is_printed_at_the_precision_of_every_other_sentence():
    """Under 10 ms a step time keeps its decimal, as in the verdict's own sentence (a C=1
    level once read "step time 5 → 11 ms (+100.1%)", which is +120 % as printed)."""
    from specperf.core.limits import format_move

    step = {"base": 5.3, "new": 10.6, "change": 10.6 / 5.3 - 1, "limit": 0.75, "low": 0.629,
            "high": 1.458}
    open_ = {"case_id": "reasoning-ctx16-c1", "status": "undetermined",
             "details": {"step_ms": step}}
    assert reason(open_) == ("step time 5.3 → 11 ms (+100.0%, limit +75%, undetermined) has a "
                             "95% interval of +62.9% to +145.8%, across the limit")
    assert reason(open_).startswith(format_move("step_ms", 5.3, 10.6))
