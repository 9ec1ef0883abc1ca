"""Drift σ from the long history: the night noise is measured across baseline and fingerprint
boundaries (the box outlives a baseline), while the level a shift is measured against is
still reset at each boundary (docs/benchmarks.md §6; the calibration is
`python benchmarks/drift_power.py`)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specperf.core import drift

CELLS = [f"{c}-ctx{x}" for c in ("padding", "reasoning") for x in (13, 1663, 3333, 5553)]


def _history(rng: np.random.Generator, before: int, after: int, noise: float = 0.01,
             jump: float = 0.0, shift: float = 0.0, start: int | None = None
             ) -> dict[str, list[float | None]]:
    """``before`` nights, a boundary where each cell's level moves by its own ``jump``-σ draw,
    then ``after`` nights; every cell's step time ``shift`` higher from night ``start``."""
    nights = before + after
    out: dict[str, list[float | None]] = {}
    moved = np.where(np.arange(nights) >= (nights if start is None else start), shift, 0.0)
    for cell in CELLS:
        level = np.where(np.arange(nights) >= before, jump * rng.standard_normal(), 0.0)
        for metric, base in (("step_ms", 90.0), ("avg_commit", 3.0)):
            z = noise * rng.standard_normal(nights) + level
            out[f"{metric}|{cell}"] = list(base * np.exp(z + (moved if metric == "step_ms"
                                                               else 0.0)))
    return out


def _step(cells: dict[str, list[float | None]]) -> drift.Series:
    return next(s for s in drift.series(cells) if s.key == "step")


def test_the_night_means_spread_pools_every_segment_about_its_own_level() -> None:
    step = _step(_history(np.random.default_rng(1), 20, 12, jump=0.2))
    b, k, t = 20, 28, 31
    means = step.spread_logs.mean(axis=0)
    segments = [means[:b], means[b:k], means[k:t + 1]]
    df = (t + 1) - len(segments)
    pooled = sum(float(np.sum((x - x.mean()) ** 2)) for x in segments) / df
    assert drift.mean_variance(step, 0, k, t, [b]) == pytest.approx((pooled, df))
    # Without the cut the 20 % level moves of the boundary would be taken for night noise.
    assert drift.mean_variance(step, 0, k, t)[0] > 2 * pooled


def test_no_own_difference_spans_a_boundary() -> None:
    step = _step(_history(np.random.default_rng(2), 20, 12, jump=0.2))
    b, t = 20, 31
    m = len(CELLS)
    resid = step.spread_logs - step.spread_logs.mean(axis=0)
    diffs = np.concatenate([np.diff(resid[:, :b], axis=1).ravel(),
                            np.diff(resid[:, b:], axis=1).ravel()])
    centre = float(np.median(diffs))
    expect = float(np.mean((diffs - centre) ** 2)) / 2 * m / (m - 1)  # nothing to clip at 1 %
    assert drift.own_variance(step, 0, t, [b]) == pytest.approx(expect)
    assert drift.own_variance(step, 0, t) > 1.2 * expect  # the 8 jumps, clipped, still count


def test_the_noise_comes_from_before_the_boundary_and_the_level_from_after() -> None:
    """Six nights after a deploy, then every case 3 % slower in 3 % own night noise: the t-test
    of the ten nights alone has 8 degrees of freedom and misses it (a fixed draw; about half
    such histories are flagged with the long history, a quarter without: drift_power.py);
    with the 60 nights before the boundary it nears the known-σ z. The level is still the six
    nights' (the boundary moved every cell by its own 20 %, which is not a shift)."""
    cells = _history(np.random.default_rng(0), 60, 10, noise=0.03, jump=0.2,
                     shift=math.log(1.03), start=66)
    step = _step(cells)
    long_z, k, d = drift.scan_night(step, 60, 69, drift.WINDOW, [60])
    assert k == 66 and d == pytest.approx(float(np.mean(
        step.logs[:, 66:70].mean(axis=1) - step.logs[:, 60:66].mean(axis=1))))
    alone = {name: values[60:] for name, values in cells.items()}
    short_z = drift.scan_night(_step(alone), 0, 9, drift.WINDOW)[0]
    night, df = drift.mean_variance(step, 0, 66, 69, [60])
    assert df == 70 - 3 and long_z > short_z
    flag = drift.detect(step, drift.FACTOR_THRESHOLD, [60])
    assert flag is not None and flag.began == 66 and flag.seen <= 66 + 3
    assert drift.detect(_step(alone), drift.FACTOR_THRESHOLD) is None
    quiet = _history(np.random.default_rng(0), 60, 10, noise=0.03, jump=0.2)
    assert not [s for s in drift.series(quiet) if drift.detect(s, drift.FACTOR_THRESHOLD, [60])]


def test_sigma_looks_back_at_most_sigma_nights() -> None:
    step = _step(_history(np.random.default_rng(3), 150, 10))
    t = 159
    lo = t - drift.SIGMA_NIGHTS + 1
    got = drift.scan_night(step, 150, t, drift.WINDOW, [150])
    # The same history cut to the nights σ may see gives the same z.
    cut = _history(np.random.default_rng(3), 150, 10)
    cut = {name: values[lo:] for name, values in cut.items()}
    same = drift.scan_night(_step(cut), 150 - lo, t - lo, drift.WINDOW, [150 - lo])
    assert got[0] == pytest.approx(same[0]) and got[1] - lo == same[1]
