"""The closing block's one line per failure: what moved past its limit, by how much, which
factor; the whole sentence is printed once, under pytest's FAILURES."""

from __future__ import annotations

from specperf.views.headline import headline

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
    "message": ("acceptance changed on 6 of 6 prompts (verify steps 126 → 158 on prompt 1 …; "
                "759 → 950 in all): the output text is the same, so the drafter proposes "
                "differently — check the draft model and its settings. Avg commit −20.1% on "
                "these prompts, beyond the 10% acceptance tolerance — acceptance regression "
                "(drafter or numerics: here the drafter). Statistics: tok/s 138.9 → 86.7 "
                "(−37.6%, limit −10%): avg commit 4.72 → 3.79 (−19.6%) and step time 33 → 43 "
                "ms (+30.0%) both moved — acceptance and step-time regression: check the "
                "drafter and the text, then the kernels, attention backend and KV cache.")}


def test_a_case_names_tok_s_every_other_metric_past_its_limit_and_the_factor():
    assert headline(CASE) == (
        "tok/s 138.9 → 86.7 (−37.6%, limit −10%); also past their limits: avg commit "
        "−19.6%, step time +30.0%, decode tok/s −38.2%; acceptance changed on 6 of 6 prompts: "
        "the drafter — acceptance and step-time regression")


def test_prefill_past_its_limit_is_named_even_when_tok_s_held():
    verdict = {"case_id": "padding-ctx3333", "status": "fail", "details": {
        "tok_s": {"base": 50.7, "new": 48.9, "change": -0.036, "limit": -0.1},
        "ttft_ms": {"base": 249.0, "new": 748.0, "change": 2.0, "limit": 0.25}},
        "message": ("prefill (TTFT) 249 → 748 ms (+200.0%, limit +25%) while tok/s 50.7 → "
                    "48.9 (−3.6%) stayed within its limit — prefill regression: check prompt "
                    "processing.")}
    assert headline(verdict) == ("prefill (TTFT) 249 → 748 ms (+200.0%, limit +25%) — "
                                 "prefill regression")


def test_a_verdict_without_per_metric_figures_keeps_its_opening_figure():
    fit = {"case_id": "padding-fit", "status": "fail", "details": {},
           "message": ("padding: step time per 1k context 17.7 ± 0.1 → 23.0 ± 0.1 ms (+30.1%, "
                       "limit +15%) — attention scaling regression: step time grows faster "
                       "with context than in the baseline.")}
    assert headline(fit) == ("step time per 1k context 17.7 ± 0.1 → 23.0 ± 0.1 ms (+30.1%, "
                             "limit +15%) — attention scaling regression")
    sweep = {"case_id": "sweep", "status": "fail",
             "message": ("tok/s fell 35.3% across the sweep (95% CI −39.6% to −30.8%, every "
                         "case): step time +30.0% and avg commit −19.8% — acceptance and "
                         "step-time regression: check the drafter. step time rose 30.0% — "
                         "step-time regression: check the kernels.")}
    assert headline(sweep) == ("tok/s fell 35.3% across the sweep (95% CI −39.6% to −30.8%, "
                               "every case) — acceptance and step-time regression")


def test_a_figure_past_its_limit_only_as_a_point_is_marked_undetermined():
    verdict = {"case_id": "padding-ctx13", "status": "fail", "details": {
        "tok_s": {"base": 138.9, "new": 85.8, "change": -0.383, "limit": -0.1,
                  "low": -0.638, "high": 0.054},
        "step_ms": {"base": 32.9, "new": 42.8, "change": 0.300, "limit": 0.1,
                    "low": -0.045, "high": 0.771},
        "avg_commit": {"base": 4.72, "new": 3.79, "change": -0.196, "limit": -0.1,
                       "low": -0.25, "high": -0.12}},
        "message": "acceptance changed on 6 of 6 prompts (…) — acceptance regression (the "
                   "drafter). Statistics: tok/s 138.9 → 85.8 — neither a pass nor a fail."}
    assert headline(verdict) == (
        "tok/s 138.9 → 85.8 (−38.3%, limit −10%, undetermined); also past their limits: avg "
        "commit −19.6%, step time +30.0% (undetermined) — acceptance regression")
