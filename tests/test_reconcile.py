"""Predict and reconcile (judge/reconcile.py): the contract's words, decided with the case,
never against the case verdict; the record only copies the rows the verdicts carry."""

from __future__ import annotations

import math

from specperf.baselines.store import CaseBaseline
from specperf.core.contract import EXPLAINED, NOTED, PASS, REGRESSION, STATUSES, UNDETERMINED
from specperf.core.limits import DEFAULT_TOLERANCES
from specperf.core.model import ContextFit, fit_repeats, predict_tok_s
from specperf.core.stats import Summary, summarize
from specperf.core.verdict import Scope, Verdict
from specperf.judge import reconcile
from specperf.judge.reconcile import Observed, base_rest, observe
from specperf.judge.verdict import judge_case
from specperf.measure.sample import Measurement, Sample
from specperf.plan.workload import Case
from specperf.record import schema as record_schema

# Mean contexts (prompt + output/2 at 600 output tokens) of the default contexts.
BASE = fit_repeats([(313, [33.0, 33.05, 32.98]), (1963, [61.9, 62.0, 62.1]),
                    (3633, [91.4, 91.5, 91.6]), (5853, [130.6, 130.7, 130.8])])
N, PREFILL = 600, 250.0
BASE_TOK = predict_tok_s(4.0, 62.0, N, PREFILL) * 0.98  # 2 % client overhead
BASE_CASE = CaseBaseline("reasoning", 1663, N, {
    "tok_s": Summary(BASE_TOK, 0.1, 5), "avg_commit": Summary(4.0, 0.01, 5),
    "step_ms": Summary(62.0, 0.1, 5)}, {})


def _run(step: float, overhead: float, spread: float = 0.004) -> dict[str, list[float]]:
    tok = predict_tok_s(4.0, step, N, PREFILL) * overhead
    return {"tok_s": [tok * (1 - spread), tok, tok * (1 + spread)],
            "avg_commit": [3.99, 4.0, 4.01], "step_ms": [step * 1.004, step, step * 0.997]}


def _both(values: dict[str, list[float]],
          base: CaseBaseline = BASE_CASE) -> tuple[str, reconcile.Reconciled]:
    assert BASE is not None
    case = judge_case("reasoning-ctx1663", {k: summarize(v) for k, v in values.items()},
                      base, DEFAULT_TOLERANCES)
    observed = observe(values)
    assert observed is not None
    found = reconcile.reconcile("reasoning-ctx1663", observed, BASE, 1963, N, 0.10, PREFILL,
                                base_rest(base, N, PREFILL))
    assert found is not None and found.status in STATUSES
    return case.message, found


def test_a_step_time_regression_is_noted_as_explained_by_step_time_in_both_lines() -> None:
    case, found = _both(_run(62.0 * 1.3, 0.98))  # step_time_mult 1.3
    assert case == (
        "tok/s 61.7 → 47.7 (−22.6%, limit −10%): step time 62 → 81 ms (+30.0%) explains it; "
        "avg commit 4.00 → 4.00 (+0.0%, within noise) — step-time regression: check the "
        "kernels, attention backend and KV cache.")
    # Not "unexplained by the model": the case's step-time verdict speaks for it.
    assert (found.status, found.reason) == (NOTED, EXPLAINED)
    assert found.message == (
        "observed tok/s 47.7 vs 61.6 predicted from this run's acceptance (4.00) and the "
        "baseline's context curve (−22.5%): this run's step time 81 ms vs 62 ms on the curve "
        "explains it.")


def test_only_a_slowdown_the_model_cannot_explain_is_a_regression() -> None:
    case, found = _both(_run(62.0, 0.98 * 0.7))  # 30 % more client overhead
    assert case.endswith("— neither acceptance nor step time explains it (prefill, transport "
                         "or client overhead?).")
    assert (found.status, found.reason) == (REGRESSION, "")
    assert found.message == (
        "observed tok/s 43.2 vs 61.7 predicted from this run's acceptance (4.00) and step time "
        "(62 ms) (−30.0%): a slowdown neither acceptance nor step time explains — look at "
        "prefill, transport and the client (a proxy, TLS, the network).")


def test_the_baselines_own_overhead_is_a_pass() -> None:
    assert (_both(_run(62.0, 0.98))[1].status, _both(_run(62.0, 0.98))[1].message) == (PASS, "")
    # A steady 20 % overhead on both sides (a remote server) is the model's rest, not news.
    heavy = CaseBaseline("reasoning", 1663, N, {
        "tok_s": Summary(BASE_TOK / 0.98 * 0.8, 0.1, 5), "avg_commit": Summary(4.0, 0.01, 5),
        "step_ms": Summary(62.0, 0.1, 5)}, {})
    assert _both(_run(62.0, 0.8), heavy)[1].status == PASS
    assert math.isclose(base_rest(heavy, N, PREFILL), 0.8)


def test_an_interval_that_straddles_the_tolerance_is_undetermined_with_its_sentence() -> None:
    # 10 % more overhead than the baseline's against a 10 % tolerance, with a 6 % spread.
    found = _both(_run(62.0, 0.98 * 0.9, spread=0.06))[1]
    assert found.status == UNDETERMINED
    assert found.message == (
        "observed tok/s 55.5 vs 61.7 predicted from this run's acceptance (4.00) and step time "
        "(62 ms) (−10.0%): the interval straddles the 10% tok/s tolerance, so the model "
        "neither holds nor fails here — measure the case with more repeats.")


def test_without_a_step_time_a_slowdown_off_the_curve_is_a_regression() -> None:
    fit = ContextFit(a_ms=30.0, b_ms_per_token=0.02, residual_ms=1.0, n_points=4)
    # step at 5853 context = 147.06 ms; 599/7.85 steps → 53.5 tok/s predicted
    found = reconcile.reconcile("padding-ctx5553", Observed(38.0, 7.85), fit, 5853, 600, 0.10)
    assert found is not None and found.status == REGRESSION
    assert found.message == (
        "observed tok/s 38.0 vs 53.5 predicted from this run's acceptance (7.85) and the "
        "baseline's context curve (−28.9%): a slowdown neither acceptance nor the context curve "
        "explains — look at the server (KV cache fragmentation, other load, clocks).")
    # No error stated (one value, a fit without errors): the difference is known exactly, so
    # a difference inside the tolerance is noted, not passed.
    held = reconcile.reconcile("padding-ctx5553", Observed(52.0, 7.85), fit, 5853, 600, 0.10)
    assert held is not None and held.status == NOTED
    assert held.message == (
        "observed tok/s 52.0 vs 53.5 predicted from this run's acceptance (7.85) and the "
        "baseline's context curve (−2.7%): a difference inside the 10% tok/s tolerance, beyond "
        "its noise: noted.")


# -- judged with the case, from its samples; the record copies it ---------------------------
CASE = Case("padding", 5553, N)
COMMIT, STEP = 7.85, 144.0


def _measurement(ttft_s: float) -> Measurement:
    steps = round((N - 1) / COMMIT)
    decode = steps * STEP / 1000.0
    samples = tuple(Sample(CASE.id, i, False, 5553, N, ttft_s * (1 + 0.002 * i) + decode,
                           steps, decode, ttft_s * (1 + 0.002 * i), None, 0, "response",
                           "length") for i in range(5))
    return Measurement(CASE, samples, "server", "response")


def _entry(prefill_ms: float, measured: Measurement) -> CaseBaseline:
    tok = (N / ((prefill_ms + (N - 1) / measured.summary("avg_commit").median  # type: ignore[union-attr]
                 * STEP) / 1000.0))
    return CaseBaseline("padding", 5553, N, {
        "tok_s": Summary(tok, 0.01, 5), "avg_commit": measured.summary("avg_commit"),
        "step_ms": Summary(STEP, 0.0, 5), "ttft_ms": Summary(prefill_ms, 1.0, 5)}, {})


def test_a_slower_prefill_is_predicted_not_called_unexplained() -> None:
    fit = ContextFit(STEP - 0.02 * 5853, 0.02, 0.1, 2)
    assert math.isclose(fit.predict_step_ms(5853), STEP)
    measured = _measurement(1.5)  # prefill 1.5 s against the baseline's 0.5 s
    found = reconcile.judge(measured, _entry(500.0, measured), fit, 0.10)
    assert found is not None and found.status == PASS, found


def test_the_record_copies_the_rows_the_verdicts_carry_by_case_id() -> None:
    fit = ContextFit(STEP - 0.02 * 5853, 0.02, 0.1, 2)
    measured = _measurement(0.5)
    verdict = reconcile.attach(Verdict(CASE.id, PASS, "ok", scope=Scope.CASE), measured,
                               _entry(500.0, measured), fit, 0.10)
    assert verdict.reconcile is not None and verdict.reconcile["status"] == PASS
    other = {"case_id": "a-first", "status": PASS, "reconcile": {**verdict.reconcile,
                                                                 "case_id": "a-first"}}
    rows = reconcile.rows([{"case_id": CASE.id, "reconcile": verdict.reconcile}, other,
                           {"case_id": "no-row", "reconcile": None}])
    assert [r["case_id"] for r in rows] == ["a-first", CASE.id]
    assert set(rows[1]) == {"case_id", "avg_commit", "predicted_step_ms", "predicted_tok_s",
                            "observed_tok_s", "change", "status", "reason", "message"}
    assert record_schema.validate({"reconcile": rows}, {
        **record_schema.schema(), "required": ["reconcile"]}) == []
    assert reconcile.attach(verdict, measured, _entry(500.0, measured), None, 0.10) is verdict

