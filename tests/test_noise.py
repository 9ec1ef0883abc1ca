"""The run-to-run noise model: what it learns from the history, and what it says."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specperf.core.noise import DEFAULT_RUN_NOISE, NoiseModel, baseline_share, from_history


def _history(rng: np.random.Generator, nights: int, sigma: float, share: float, *,
             cells: int = 16, per_segment: int = 10, req_se: float = 0.01,
             jump: float = 0.0, label: str = "box") -> list[dict[str, object]]:
    """History lines of one box: a night's common part σ·share, each cell's own part, each
    median's request noise ``req_se`` (stored as cell_se), a new baseline every
    ``per_segment`` nights whose level moves every cell by up to ``jump``."""
    out: list[dict[str, object]] = []
    levels = np.full(cells, 100.0)
    for n in range(nights):
        if n % per_segment == 0 and n:
            levels = levels * np.exp(jump * rng.standard_normal(cells))
        common = sigma * share * rng.standard_normal()
        own = sigma * math.sqrt(1 - share**2) * rng.standard_normal(cells)
        values = levels * np.exp(common + own + req_se * rng.standard_normal(cells))
        out.append({"label": label, "kind": "full", "created": f"2026-11-{n:04d}",
                    "run_id": f"r{n}", "fingerprint": {"model": "m"},
                    "baseline": {"deployment": "d", "version": n // per_segment + 1},
                    "cells": {f"c{i}": {"step_ms": float(v)} for i, v in enumerate(values)},
                    "cell_se": {f"c{i}": {"step_ms": req_se} for i in range(cells)}})
    return out


def test_no_history_is_the_stated_prior_and_says_so() -> None:
    noise = from_history([], "box").of("step_ms")
    assert noise.source == "prior" and noise.nights == 0
    assert noise.case_sd() == pytest.approx(DEFAULT_RUN_NOISE)
    assert noise.common == pytest.approx(DEFAULT_RUN_NOISE / 2)
    assert noise.text() == "run-to-run prior ±3.0 %: no history yet"
    assert from_history([], "box", total=0.01).of("tok_s").text() == \
        "run-to-run prior ±1.0 %: no history yet"


@pytest.mark.parametrize("sigma", [0.01, 0.03])
def test_a_long_history_recovers_the_box_across_boundaries(sigma: float) -> None:
    """60 nights, a new baseline (and a level jump of 5 %) every 10: the levels reset, the
    spread is pooled, each median's request noise is not counted as night noise."""
    rng = np.random.default_rng(7)
    noise = from_history(_history(rng, 60, sigma, 0.5, jump=0.05), "box").of("step_ms")
    assert noise.source == "history" and noise.nights == 60
    assert noise.case_sd() == pytest.approx(sigma, rel=0.35)
    assert noise.own == pytest.approx(sigma * math.sqrt(0.75), rel=0.2)
    assert noise.text() == f"run-to-run ±{100 * noise.case_sd():.1f} % from 60 nights"


def test_other_boxes_and_incomplete_runs_do_not_count() -> None:
    rng = np.random.default_rng(3)
    lines = _history(rng, 12, 0.01, 0.5, label="other")
    lines += [{**line, "label": "box", "interrupted": True} for line in lines]
    lines += [{**line, "label": "box", "kind": "gate"} for line in lines]
    assert from_history(lines, "box").of("step_ms").source == "prior"


def test_same_night_cancels_and_a_merged_baseline_shrinks_its_side() -> None:
    assert NoiseModel.same_night().of("step_ms").comparison_var(8) == 0.0
    assert NoiseModel.same_night().of("step_ms").text() == \
        "same-night reference: run-to-run noise cancels"
    prior = NoiseModel.prior(0.02, 0.5).of("step_ms")
    one, five = prior.comparison_var(1, 1), prior.comparison_var(1, 5)
    assert one == pytest.approx(2 * 0.02**2)
    # A 5-run merge is a median over the runs: 1.43/5 of a night's variance, not a mean's 1/5.
    assert five == pytest.approx(1.286 * 0.02**2, abs=0.001 * 0.02**2)
    common, own = prior.parts(5)
    assert common == pytest.approx(1.286 * 0.01**2, rel=1e-3)
    assert own == pytest.approx(1.286 * 0.75 * 0.02**2, rel=1e-3)


@pytest.mark.parametrize("runs", [1, 2, 3, 5, 8, 12, 20])
def test_a_merged_baselines_night_share_is_a_medians_never_less(runs: int) -> None:
    """baselines/merge.py keeps the median of the runs: its night term, drawn here, has the
    variance baseline_share says (at most π/2 / n beyond the table), never a mean's 1/n."""
    nights = np.random.default_rng([33, runs]).standard_normal((200_000, runs))
    drawn = float(np.var(np.median(nights, axis=1)))
    share = baseline_share(runs)
    assert share >= 1 / runs
    if runs <= 12:
        assert share == pytest.approx(drawn, rel=0.02)
    else:
        assert drawn <= share <= 1.2 * drawn
