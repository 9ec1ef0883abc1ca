"""The concurrency dimension's pieces: the batch fit, the guard's accounting of a burst, the
level and slope verdicts, the concurrency baseline file and the setting."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from specperf.baselines.concurrency import ConcurrencyBaseline, ConcurrencyStore
from specperf.baselines.store import CaseBaseline
from specperf.core.errors import BaselineError, ContaminatedMeasurement
from specperf.core.model import ContextFit
from specperf.core.stats import Summary
from specperf.core.verdict import NotJudged
from specperf.judge.concurrency import judge_batch_fit, judge_level
from specperf.measure import guard
from specperf.measure.burst import batch_fit, check_burst
from specperf.record import runkind
from specperf.servers.acceptance import MetricsSnapshot
from specperf.settings.config import resolve
from specperf.views import summary


@dataclass(frozen=True)
class _Comp:
    prompt_tokens: int
    completion_tokens: int


def _snap(requests: float, progress: float) -> MetricsSnapshot:
    return MetricsSnapshot(verify_calls=0, generation_tokens=0, requests=requests, running=0,
                           queued=0, progress=progress, family="sglang")


# -- the fit ------------------------------------------------------------------------------------
def test_batch_fit_recovers_step_time_per_extra_request():
    points = [(c, [20.0 + 3.0 * c] * 3) for c in (1, 2, 4, 8)]
    fit = batch_fit(points)
    assert fit is not None
    assert fit.a_ms == pytest.approx(20.0, abs=1e-6)
    assert fit.b_ms_per_token == pytest.approx(3.0, abs=1e-6)
    assert fit.n_points == 4


def test_batch_fit_needs_two_levels():
    assert batch_fit([(1, [20.0, 20.1])]) is None


# -- the guard's accounting of a burst --------------------------------------------------------
BURST = [_Comp(13, 64)] * 4  # each accounts for 13 + 63 realtime tokens (SGLang)


def test_a_burst_whose_counters_move_by_exactly_its_requests_is_clean():
    check_burst(_snap(10, 1000), _snap(14, 1000 + 4 * 76), BURST, sent=4)


def test_a_foreign_request_during_a_burst_is_caught_by_the_request_counter():
    with pytest.raises(guard.Disturbed) as info:
        check_burst(_snap(10, 1000), _snap(15, 1000 + 4 * 76 + 300), BURST, sent=4)
    assert str(info.value) == ("1 foreign request ran during the burst of 4 (the "
                               "finished-request counter moved by 5)")


def test_a_foreign_request_still_running_is_caught_by_the_progress_counter():
    with pytest.raises(guard.Disturbed, match="more tokens than the burst's 4 requests"):
        check_burst(_snap(10, 1000), _snap(14, 1000 + 4 * 76 + 500), BURST, sent=4)


def test_a_burst_the_server_did_not_count_is_disturbed():
    with pytest.raises(guard.Disturbed, match="not by the burst's 4"):
        check_burst(_snap(10, 1000), _snap(13, 1000 + 3 * 76), BURST, sent=4)


def test_our_own_retried_attempts_are_not_foreign():
    check_burst(_snap(10, 1000), _snap(15, 1000 + 5 * 76), BURST, sent=5)


def test_disturbed_bursts_error_naming_the_burst():
    def attempt() -> None:
        raise guard.Disturbed("1 foreign request ran during the burst of 4")

    with pytest.raises(ContaminatedMeasurement,
                       match=r"^reasoning-ctx13-c4 \(burst of 4, repeat 1\): 1 "
                             r"foreign request ran during the burst of 4"):
        guard.retry_clean("reasoning-ctx13-c4 (burst of 4, repeat 1)", attempt, 1)


# -- verdicts ---------------------------------------------------------------------------------
CASE = CaseBaseline("reasoning", 13, 600, {}, {})


def _level(tok: float, agg: float, commit: float, step: float) -> dict[str, Summary]:
    return {"tok_s": Summary(tok, 0.1, 12), "agg_tok_s": Summary(agg, 0.5, 3),
            "avg_commit": Summary(commit, 0.01, 12), "step_ms": Summary(step, 0.05, 12)}


def test_a_level_whose_batched_step_slowed_fails_attributed_to_step_time():
    base = _level(80.0, 316.0, 4.75, 50.0)
    verdict = judge_level("reasoning-ctx13-c4", _level(60.0, 237.0, 4.75, 66.7), base, {},
                          CASE)
    assert verdict.status == "fail"
    assert verdict.message == (
        "tok/s 80.0 → 60.0 (−25.0%, limit −10%): step time 50 → 67 ms (+33.4%) explains it; "
        "avg commit 4.75 → 4.75 (+0.0%, within noise); aggregate tok/s 316.0 → 237.0 "
        "(−25.0%) — step-time regression: check the kernels, attention backend and KV cache.")
    assert verdict.attribution is not None and verdict.attribution.share("step") > 0.9


def test_an_unchanged_level_passes_and_names_its_aggregate():
    base = _level(80.0, 316.0, 4.75, 50.0)
    verdict = judge_level("reasoning-ctx13-c4", _level(79.0, 312.0, 4.74, 50.4), base, {},
                          CASE)
    assert verdict.status == "pass"
    assert "aggregate tok/s 316.0 → 312.0 (−1.3%)" in verdict.message
    assert verdict.message.endswith("— within tolerance.")


def test_an_aggregate_drop_alone_fails_the_level():
    base = _level(80.0, 316.0, 4.75, 50.0)
    verdict = judge_level("reasoning-ctx13-c4", _level(79.0, 260.0, 4.75, 50.2), base, {},
                          CASE)
    assert verdict.status == "fail"
    assert verdict.message.startswith("aggregate tok/s 316.0 → 260.0 (−17.7%, limit −10%) "
                                      "while every request stayed within its limits")


def test_a_steeper_batch_slope_fails_and_a_flat_baseline_is_not_judged():
    base = ContextFit(20.0, 3.0, 0.1, 4, 0.1, 0.02, 0.0, 30)
    steeper = ContextFit(20.0, 6.0, 0.1, 4, 0.1, 0.02, 0.0, 30)
    verdict = judge_batch_fit("reasoning-ctx13", steeper, base, 0.15)
    assert not isinstance(verdict, NotJudged)
    assert verdict.status == "fail" and "batching regression" in verdict.message
    same = judge_batch_fit("reasoning-ctx13", base, base, 0.15)
    assert not isinstance(same, NotJudged) and same.status == "pass"
    flat = ContextFit(20.0, 0.0, 0.1, 4)
    assert isinstance(judge_batch_fit("reasoning-ctx13", base, flat, 0.15), NotJudged)


def test_a_batch_slope_rise_that_keeps_step_time_inside_its_tolerance_passes():
    # 0.5 → 1.0 ms per extra request (+100 %, past a 15 % slope limit) adds 4 ms at C = 8
    # to a 24 ms step: inside a 25 % step-time tolerance, so inside tolerance here too.
    base = ContextFit(20.0, 0.5, 0.1, 4, 0.1, 0.02, 0.0, 30)
    steeper = ContextFit(20.0, 1.0, 0.1, 4, 0.1, 0.02, 0.0, 30)
    strict = judge_batch_fit("reasoning-ctx13", steeper, base, 0.15)
    assert not isinstance(strict, NotJudged) and strict.status == "fail"
    wide = judge_batch_fit("reasoning-ctx13", steeper, base, 0.15, 0.25, 8.0)
    assert not isinstance(wide, NotJudged) and wide.status == "noted", wide.message
    assert "limit +150%: the step-time tolerance 25% at C = 8" in wide.message


# -- the baseline file and the setting ----------------------------------------------------------
def test_concurrency_baseline_round_trips(tmp_path):
    base = ConcurrencyBaseline("dep", 3, "2026-12-02T00:00:00Z", "1.0", "abc", {"model": "m"},
                               True, {"text_class": "reasoning", "context": 13,
                                      "output_tokens": 600},
                               {1: _level(140.0, 140.0, 4.75, 28.0),
                                4: _level(80.0, 316.0, 4.75, 50.0)},
                               ContextFit(20.0, 3.0, 0.1, 2))
    again = ConcurrencyBaseline.from_json(base.to_json(), tmp_path / "v3.json")
    assert again == base


def test_the_concurrency_store_numbers_its_versions_as_the_main_store_does(tmp_path):
    store = ConcurrencyStore(tmp_path)
    directory = tmp_path / "dep" / "concurrency"
    directory.mkdir(parents=True)
    for name in ("v0.json", "v01.json"):  # not versions: one parser for every dimension
        (directory / name).write_text("{}", encoding="utf-8")
    assert store.latest("dep") is None and store.load("dep") is None
    base = ConcurrencyBaseline("dep", 0, "2026-12-02T00:00:00Z", "1.0", "abc", {}, True,
                               {"text_class": "reasoning", "context": 13, "output_tokens": 600},
                               {1: _level(140.0, 140.0, 4.75, 28.0)}, None)
    assert store.write_next(base) == directory / "v1.json"
    assert store.write_next(base) == directory / "v2.json"
    assert store.load("dep") == replace(base, version=2)
    assert sorted(p.name for p in directory.iterdir()) == [
        ".write.lock", "v0.json", "v01.json", "v1.json", "v2.json"]
    (directory / "v3.json").mkdir()
    with pytest.raises(BaselineError) as info:
        store.load("dep")
    assert str(info.value).startswith(f"concurrency baseline {directory / 'v3.json'} cannot be "
                                      "read ([Errno 21] Is a directory")


def test_concurrency_levels_come_from_cli_env_or_ini():
    assert resolve({}, {}, {}).concurrency_levels == (1, 2, 4, 8)
    assert resolve({"concurrency_levels": "1,3"}, {}, {}).concurrency_levels == (1, 3)
    assert resolve({}, {"SPECPERF_CONCURRENCY_LEVELS": "2,4"}, {}).concurrency_levels == (2, 4)
    assert resolve({}, {}, {"concurrency_levels": "8"}).concurrency_levels == (8,)


# -- what the record says of a concurrency run ----------------------------------------------
CONC = {"t.py::test_concurrency[c1]": "passed", "t.py::test_concurrency[c2]": "passed",
        "t.py::test_batch_fit": "passed"}


def _kind(outcomes: dict[str, str], concurrency=tuple(CONC)) -> runkind.RunKind:
    return runkind.classify(ab=False, interrupted=False, outcomes=outcomes, smoke=(),
                            scaling_cases=(), planned=["padding-ctx13"], measured=2,
                            concurrency=concurrency,
                            concurrency_scope=runkind.concurrency_scope([2, 1],
                                                                        "reasoning-ctx13"))


def test_a_run_of_the_concurrency_tests_alone_is_named_by_its_levels_and_case():
    kind = _kind(CONC)
    assert (kind.kind, kind.label()) == ("concurrency", "concurrency levels 1,2 of "
                                                        "reasoning-ctx13")
    assert runkind.concurrency_scope([4], "padding-ctx16") == "level 4 of padding-ctx16"


def test_a_run_with_main_job_cases_beside_the_levels_is_not_a_concurrency_run():
    assert _kind({**CONC, "t.py::test_context_scaling[padding-ctx13]": "passed"}).kind \
        == "subset"


BASE = {"deployment": "dep", "version": 2, "path": "/b/dep/concurrency/v2.json",
        "created": "2026-12-02T00:00:00Z", "not_judged": None}


def test_the_header_names_the_concurrency_baseline_compared_and_not_the_main_one():
    settings = resolve({}, {}, {})
    doc = {"run": {"kind": "concurrency"}, "baseline": None, "concurrency": {"levels": [1]},
           "concurrency_baseline": BASE}
    assert summary.compared_with(doc, settings) == (
        "concurrency baseline dep v2 (/b/dep/concurrency/v2.json, created "
        "2026-12-02T00:00:00Z)")
    mixed = {**doc, "run": {"kind": "subset"}, "concurrency_baseline": None}
    assert summary.compared_with(mixed, settings) == "no baseline; no concurrency baseline"
    writing = resolve({"update_baselines": True}, {}, {})
    assert summary.compared_with({**doc, "concurrency_baseline": None}, writing) == \
        "writing a concurrency baseline"


def test_levels_without_a_concurrency_baseline_say_not_judged_and_how_to_create_one():
    settings = resolve({}, {}, {})
    doc = {"concurrency": {"levels": {"1": {}}}, "concurrency_baseline": None,
           "measurements": {}, "baseline": None, "server": {}}
    [line] = summary.missing_baseline_lines(doc, settings)
    assert line.startswith("NOT JUDGED: no concurrency baseline in baselines: the concurrency "
                           "levels above are measured but compared with nothing; create one "
                           "with `pytest perf_tests -m concurrency_scaling")
    assert line.endswith("--specperf-update-baselines`, then run again.")
    assert summary.missing_baseline_lines(
        doc, resolve({"update_baselines": True}, {}, {})) == []
    judged = dict(doc, concurrency_baseline={"deployment": "d", "version": 1})
    assert summary.missing_baseline_lines(judged, settings) == []


def test_a_batch_slope_whose_interval_straddles_the_limit_is_an_undetermined_verdict():
    """Recorded like every verdict (results.json, the report, the closing block), then skipped
    by plugin/conclude.py -- not a bare skip that leaves no trace."""
    base = ContextFit(20.0, 2.2, 0.1, 3, 0.1, 0.5, 0.0, 3)
    noisy = ContextFit(20.0, 2.8, 0.1, 3, 0.1, 1.5, 0.0, 3)
    verdict = judge_batch_fit("reasoning-ctx16", noisy, base, 0.6, 0.75, 4.0)
    assert not isinstance(verdict, NotJudged)
    assert verdict.status == "undetermined" and verdict.case_id == "reasoning-ctx16-batch-fit"
    assert verdict.message.startswith("reasoning-ctx16: step time per extra request in the "
                                      "batch 2.20 → 2.80 ± ")
    assert "so it is neither a pass nor a fail — measure again with more repeats: pytest " \
        "perf_tests -m concurrency_scaling --specperf-repeats 10." in verdict.message
    slope = verdict.details["slope"]  # the interval the sentence prints reaches the limit
    assert slope["new"] - slope["margin"] < slope["base"] * (1 + slope["limit"]) \
        < slope["new"] + slope["margin"]
