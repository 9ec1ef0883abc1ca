"""The drift decision looks once a night: the last four nights against every night before.

docs/benchmarks.md §6: one look a night (instead of the best of six candidate starts)
lowers the threshold a ≤ 1 % false-alarm rate needs, which is what a 3 % shift's four
nights can clear; the night the shift began is still found among the candidate starts.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from specperf.core import drift
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
    sigma = drift.night_sigma(step, 0, t)
    se = sigma * math.sqrt(len(CELLS) * (1 / drift.WINDOW + 1 / k)) / len(CELLS)
    assert d == pytest.approx(expect)
    assert z == pytest.approx(expect / se)


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


def test_night_sigma_is_the_rms_of_differences_and_one_wild_night_is_clipped() -> None:
    cells = _cells(0.0, 99, nights=12)
    step = next(s for s in drift.series(cells) if s.key == "step")
    diffs = np.diff(step.spread_logs, axis=1).ravel()
    centre = float(np.median(diffs))
    robust = 1.4826 * float(np.median(np.abs(diffs - centre)))
    assert np.all(np.abs(diffs - centre) < drift.CLIP * robust)  # nothing to clip here
    quiet = drift.night_sigma(step, 0, 11)
    assert quiet == pytest.approx(float(np.sqrt(np.mean((diffs - centre) ** 2)) / math.sqrt(2)))
    for cell in CELLS:  # one night 40 % slower on every cell: an outage-like night
        cells[f"step_ms|{cell}"][6] = 1.4 * float(cells[f"step_ms|{cell}"][6] or 0)
    wild_step = next(s for s in drift.series(cells) if s.key == "step")
    wild = drift.night_sigma(wild_step, 0, 11)
    raw = np.diff(wild_step.spread_logs, axis=1).ravel()
    unclipped = float(np.sqrt(np.mean((raw - np.median(raw)) ** 2))) / math.sqrt(2)
    assert quiet < wild < unclipped / 3  # the night counts, but as CLIP robust σ, not 34 %


def test_the_trend_page_says_what_no_flag_means(tmp_path: Path) -> None:
    history = tmp_path / "history.jsonl"
    cells = _cells(0.0, 99, nights=8)
    lines = [json.dumps({"run_id": f"r{n}", "created": f"2026-11-{n + 1:02d}", "cells": {
        c: {m: cells[f"{m}|{c}"][n] for m in ("step_ms", "avg_commit")} for c in CELLS}})
        for n in range(8)]
    history.write_text("\n".join(lines) + "\n")
    assert trend.drift_lines(trend.build(trend.load_history(history))) == []
    assert trend._drift_list(trend.build(trend.load_history(history))) == (
        "<p>No persistent shift: no factor or case moved over its last 4 runs against the "
        "runs before them (drift.py).</p>")
