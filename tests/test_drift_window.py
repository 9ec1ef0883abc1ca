"""The drift decision looks once a night: the last four nights against every night before.

docs/benchmarks.md §6: one look a night (instead of the best of six candidate starts)
lowers the threshold a ≤ 1 % false-alarm rate needs, which is what a 3 % shift's four
nights can clear; the night the shift began is still found among the candidate starts.
The night noise has a part common to every cell of a night: a factor is judged against the
night means' spread (a t-test), a case against the other cases of its night.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from specperf.core import drift
from specperf.core.stats import MAD_TO_SIGMA
from specperf.record import trend as record_trend
from specperf.store.history import read_history
from specperf.views import trend

CELLS = [f"padding-ctx{x}" for x in (13, 1663, 3333, 5553)]


def _cells(shift: float, start: int, nights: int = 14, seed: int = 5
           ) -> dict[str, list[float | None]]:
    rng = np.random.default_rng(seed)
    out: dict[str, list[float | None]] = {}
    for cell in CELLS:
        jump = np.where(np.arange(nights) >= start, shift, 0.0)
        out[f"step_ms|{cell}"] = list(90 * np.exp(0.01 * rng.standard_normal(nights) + jump))
        out[f"avg_commit|{cell}"] = list(3 * np.exp(0.01 * rng.standard_normal(nights)))
    return out


def test_the_decision_z_is_the_last_window_against_every_night_before() -> None:
    step = next(s for s in drift.series(_cells(0.0, 99)) if s.key == "step")
    t = 11
    z, k, d = drift.scan_night(step, 0, t, drift.WINDOW)
    assert k == t - drift.WINDOW + 1 == 8
    after, before = step.logs[:, k:t + 1], step.logs[:, :k]
    expect = float(np.mean(after.mean(axis=1) - before.mean(axis=1)))
    # The night means' pooled variance before and from k (the two-sample t-test's).
    means = step.spread_logs[:, :t + 1].mean(axis=0)
    df = (t + 1) - 2
    pooled = (np.sum((means[:k] - means[:k].mean()) ** 2)
              + np.sum((means[k:] - means[k:].mean()) ** 2)) / df
    assert drift.mean_variance(step, 0, k, t) == pytest.approx((pooled, df))
    t_stat = expect / math.sqrt(pooled * (1 / drift.WINDOW + 1 / k))
    assert d == pytest.approx(expect)
    assert z == pytest.approx(float(stats.norm.isf(stats.t.sf(t_stat, df))))


def test_too_few_reference_nights_means_no_look() -> None:
    step = next(s for s in drift.series(_cells(0.0, 99)) if s.key == "step")
    last_blind = drift.MIN_REFERENCE + drift.WINDOW - 2
    assert drift.scan_night(step, 0, last_blind, drift.WINDOW)[1] == -1
    assert drift.scan_night(step, 0, last_blind + 1, drift.WINDOW)[1] == drift.MIN_REFERENCE


def test_a_flag_names_the_start_from_the_candidate_scan_not_the_window() -> None:
    flag = drift.detect(next(s for s in drift.series(_cells(math.log(1.05), 9))
                             if s.key == "step"), drift.FACTOR_THRESHOLD)
    assert flag is not None and flag.began == 9 and 10 <= flag.seen <= 12
    assert flag.change == pytest.approx(0.05, abs=0.01)


def test_own_noise_is_the_residuals_rms_difference_and_no_common_move_is_in_it() -> None:
    cells = _cells(0.0, 99, nights=12)
    step = next(s for s in drift.series(cells) if s.key == "step")
    m = len(CELLS)
    resid = step.spread_logs - step.spread_logs.mean(axis=0)
    diffs = np.diff(resid, axis=1).ravel()
    centre = float(np.median(diffs))
    robust = MAD_TO_SIGMA * float(np.median(np.abs(diffs - centre)))
    assert np.all(np.abs(diffs - centre) < drift.CLIP * robust)  # nothing to clip here
    quiet = drift.own_variance(step, 0, 11)
    assert quiet == pytest.approx(float(np.mean((diffs - centre) ** 2)) / 2 * m / (m - 1))
    box = np.random.default_rng(9).normal(0.0, 0.03, 12)  # the whole box, night by night
    for cell in CELLS:
        cells[f"step_ms|{cell}"] = list(np.array(cells[f"step_ms|{cell}"]) * np.exp(box))
    moved = next(s for s in drift.series(cells) if s.key == "step")
    assert drift.own_variance(moved, 0, 11) == pytest.approx(quiet)
    assert drift.mean_variance(moved, 0, 8, 11)[0] > 10 * drift.mean_variance(step, 0, 8, 11)[0]


def test_one_wild_night_counts_in_the_night_means_but_is_clipped() -> None:
    cells = _cells(0.0, 99, nights=12)
    step = next(s for s in drift.series(cells) if s.key == "step")
    quiet, df = drift.mean_variance(step, 0, 8, 11)
    for cell in CELLS:  # one night 40 % slower on every cell: an outage-like night
        cells[f"step_ms|{cell}"][6] = 1.4 * float(cells[f"step_ms|{cell}"][6] or 0)
    wild_step = next(s for s in drift.series(cells) if s.key == "step")
    wild, _ = drift.mean_variance(wild_step, 0, 8, 11)
    means = wild_step.spread_logs.mean(axis=0)
    unclipped = float(np.sum((means[:8] - means[:8].mean()) ** 2)
                      + np.sum((means[8:] - means[8:].mean()) ** 2)) / df
    assert quiet < wild < unclipped / 9  # σ: the night counts, but as CLIP robust σ, not 34 %
    assert drift.own_variance(wild_step, 0, 11) == pytest.approx(
        drift.own_variance(step, 0, 11))  # a move of the whole box is no case's own noise


def test_a_case_is_judged_against_the_other_cases_of_its_night() -> None:
    cells = _cells(0.0, 99)
    case = next(s for s in drift.series(cells, per_case=True)
                if s.key == "step padding-ctx1663")
    logs = {c: np.log(np.array(cells[f"step_ms|{c}"], dtype=float)) for c in CELLS}
    others = np.mean([logs[c] for c in CELLS if c != "padding-ctx1663"], axis=0)
    assert case.residual and np.allclose(case.logs[0], logs["padding-ctx1663"] - others)


def test_the_trend_page_says_what_no_flag_means(tmp_path: Path) -> None:
    history = tmp_path / "history.jsonl"
    cells = _cells(0.0, 99, nights=9)
    lines = [json.dumps({"run_id": f"r{n}", "created": f"2026-11-{n + 1:02d}", "cells": {
        c: {m: cells[f"{m}|{c}"][n] for m in ("step_ms", "avg_commit")} for c in CELLS}})
        for n in range(9)]
    history.write_text("\n".join(lines[:8]) + "\n")
    # 8 nights: the last 4 have only 4 before them, one short of the 5 the scan needs.
    assert trend.drift_lines(record_trend.build(read_history(history))) == []
    assert trend.section("drift", record_trend.build(read_history(history))) == (
        '<ul class="drift"><li data-status="undetermined">Drift undetermined: the scan '
        "compares the last 4 nights with at least 5 before them, since the last boundary. It "
        "has 8 of the 9 nights it needs: 1 more.</li></ul>")
    history.write_text("\n".join(lines) + "\n")
    assert trend.section("drift", record_trend.build(read_history(history))) == (
        '<ul class="drift"><li data-status="pass">No persistent shift: no factor or case '
        "moved over the last 4 nights against the 5 before them (drift.py).</li></ul>")
