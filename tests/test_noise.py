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
    assert noise.text() == "run-to-run ±3.0% assumed: no history yet"
    assert from_history([], "box", total=0.01).of("tok_s").text() == \
        "run-to-run ±1.0% assumed: no history yet"


@pytest.mark.parametrize("sigma", [0.01, 0.03])
def test_a_long_history_recovers_the_box_across_boundaries(sigma: float) -> None:
    """60 nights, a new baseline (and a level jump of 5 %) every 10: the levels reset, the
    spread is pooled, each median's request noise is not counted as night noise."""
    rng = np.random.default_rng(7)
    noise = from_history(_history(rng, 60, sigma, 0.5, jump=0.05), "box").of("step_ms")
    assert noise.source == "history" and noise.nights == 60
    assert noise.case_sd() == pytest.approx(sigma, rel=0.35)
    assert noise.own == pytest.approx(sigma * math.sqrt(0.75), rel=0.2)
    assert noise.text() == f"run-to-run ±{100 * noise.case_sd():.1f}% from 60 nights"


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


def _dated(lines: list[dict[str, object]], per_night: int = 1) -> list[dict[str, object]]:
    """``lines`` written one night a day at 02:00, ``per_night`` runs a night 20 min apart."""
    from datetime import datetime, timedelta, timezone
    first = datetime(2026, 9, 1, 2, 0, tzinfo=timezone.utc)
    return [{**line, "created": (first + timedelta(days=n // per_night,
                                                   minutes=20 * (n % per_night))).isoformat()}
            for n, line in enumerate(lines)]


def test_two_runs_in_one_night_count_as_one_night() -> None:
    """Back-to-back runs share the night's term: they are one night of history, and the
    sentence counts nights."""
    rng = np.random.default_rng(11)
    lines = _dated(_history(rng, 8, 0.02, 0.5, per_segment=100))
    model = from_history(lines, "box").of("step_ms")
    assert model.nights == 8 and model.text().endswith("from 8 nights")
    again = [{**line, "run_id": f"{line['run_id']}b",
              "created": str(line["created"]).replace("T02:00", "T02:05")} for line in lines]
    both = from_history(lines + again, "box").of("step_ms")
    assert both.nights == 8 and both.text().endswith("from 8 nights")
    # A narrower window splits them again: the window is the setting's.
    split = from_history(lines + again, "box", night_window_h=0.05).of("step_ms")
    assert split.nights == 16


def test_a_history_of_one_night_is_not_called_no_history() -> None:
    """Runs minutes apart are one night: no spread between nights, so the prior judges. Its
    sentence says how much history there was, not that there was none (it did, after six
    runs on one night)."""
    rng = np.random.default_rng(5)
    lines = _dated(_history(rng, 6, 0.02, 0.5, per_segment=100), per_night=6)
    noise = from_history(lines, "box").of("step_ms")
    assert noise.source == "prior" and noise.nights == 1
    assert noise.text() == "run-to-run ±3.0% assumed: 1 night of history, no spread between " \
        "nights yet"
    stated = from_history(lines, "box", total=0.005, stated=True).of("step_ms")
    assert stated.text() == "run-to-run ±0.5% as stated: 1 night of history, no spread " \
        "between nights yet"
    # Two nights under two baselines: history, but no two nights share their levels.
    split = [{**line, "baseline": {"deployment": "d", "version": n}}
             for n, line in enumerate(_dated(_history(rng, 2, 0.02, 0.5)))]
    assert from_history(split, "box").of("step_ms").text().endswith(
        "2 nights of history, no spread between nights yet")
    assert from_history([], "box").of("step_ms").text().endswith("no history yet")


def test_back_to_back_runs_do_not_shrink_the_night_noise() -> None:
    """Three runs a night with the night's term in common: counted as runs, their small
    within-night spread would pull the estimate low; counted as nights, it is the box's."""
    rng = np.random.default_rng(5)
    nights = _history(rng, 40, 0.03, 0.5, per_segment=100)
    tripled = []
    for line in nights:  # the same night term, each run its own requests' medians
        for k in range(3):
            cells = {c: {"step_ms": v["step_ms"] * math.exp(0.01 * rng.standard_normal())}
                     for c, v in line["cells"].items()}  # type: ignore[union-attr]
            tripled.append({**line, "run_id": f"{line['run_id']}-{k}", "cells": cells})
    model = from_history(_dated(tripled, per_night=3), "box").of("step_ms")
    assert model.nights == 40
    assert model.case_sd() == pytest.approx(0.03, rel=0.3)


def test_a_level_shift_is_not_spread_and_a_regressed_run_is_left_out() -> None:
    """A 6 % step rise that persists inside one baseline's segment: the nights judged
    regressed are left out, and successive differences keep even an unflagged shift to one
    difference, so the spread stays the box's."""
    rng = np.random.default_rng(21)
    lines = _dated(_history(rng, 30, 0.01, 0.5, per_segment=100))
    clean = from_history(lines, "box").of("step_ms").case_sd()
    shifted = [{**line, "cells": {c: {"step_ms": v["step_ms"] * 1.06}
                                  for c, v in line["cells"].items()}}  # type: ignore[union-attr]
               if n >= 20 else line for n, line in enumerate(lines)]
    unflagged = from_history(shifted, "box").of("step_ms").case_sd()
    # Deviations from a segment mean would put about (6 %)²·(20·10/30²) into the variance:
    # σ ≈ 3 %. One successive difference of 30 adds (6 %)²/2/29 to the common part's.
    assert unflagged < clean + 0.005
    flagged = [{**line, "failed": ["sweep"]} if n >= 20 else line
               for n, line in enumerate(shifted)]
    left_out = from_history(flagged, "box").of("step_ms")
    assert left_out.nights == 20
    assert left_out.case_sd() == pytest.approx(clean, rel=0.35)


def test_a_stated_prior_is_knowledge_the_default_a_guess() -> None:
    """No history: either prior is used as known (the normal quantile), and the sentence says
    which; the stated one outweighs a short history that disagrees, the default does not."""
    default = from_history([], "box").of("step_ms")
    stated = from_history([], "box", total=0.005, stated=True).of("step_ms")
    assert math.isinf(default.df) and math.isinf(stated.df)
    assert stated.text() == "run-to-run ±0.5% as stated: no history yet"
    rng = np.random.default_rng(2)
    noisy = _dated(_history(rng, 4, 0.03, 0.5, per_segment=100))
    assert from_history(noisy, "box", total=0.005, stated=True).of("step_ms").case_sd() < 0.015
    quiet = _dated(_history(rng, 6, 0.005, 0.5, per_segment=100, req_se=0.002))
    assert from_history(quiet, "box").of("step_ms").case_sd() < 0.015


def test_nights_that_repeat_each_other_exactly_carry_no_run_term() -> None:
    """A simulator's exact prompts give the same avg commit every night: the history shows no
    run-to-run noise at all, and the model learns that rather than keep the prior."""
    rng = np.random.default_rng(4)
    lines = _dated(_history(rng, 5, 0.0, 0.5, per_segment=100, req_se=0.0))
    for line in lines:
        line["cells"] = {c: {"step_ms": 100.0} for c in line["cells"]}  # type: ignore[union-attr]
    model = from_history(lines, "box").of("step_ms")
    assert model.source == "history" and model.case_sd() == 0.0
