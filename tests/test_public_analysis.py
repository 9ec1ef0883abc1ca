"""The public names the benchmarks judge with: the sweep test, the run-to-run noise model and
the drift scan, driven only through ``import specperf`` as benchmarks/ does."""

from __future__ import annotations

import math

import numpy as np
import pytest

import specperf

CELLS = [f"{c}-ctx{x}" for c in ("padding", "reasoning") for x in (13, 3333)]


def test_a_medians_standard_error_is_root_half_pi_times_the_means() -> None:
    assert specperf.median_se(0.03, 9) == pytest.approx(math.sqrt(math.pi / 2) * 0.01)


def test_the_drift_scan_settings_are_the_ones_trend_runs() -> None:
    from specperf.core import drift

    scan = specperf.DRIFT_SCAN
    assert (scan.factor_threshold, scan.case_threshold, scan.window, scan.min_reference) == (
        drift.FACTOR_THRESHOLD, drift.CASE_THRESHOLD, drift.WINDOW, drift.MIN_REFERENCE)


def _history(shift_from: int, nights: int = 24) -> dict[str, list[float | None]]:
    """Every cell's step time and avg commit per night, 1 % night noise, the step time 8 %
    higher from night ``shift_from`` on."""
    rng = np.random.default_rng(5)
    up = np.where(np.arange(nights) >= shift_from, math.log(1.08), 0.0)
    out: dict[str, list[float | None]] = {}
    for cell in CELLS:
        out[f"step_ms|{cell}"] = list(90.0 * np.exp(0.01 * rng.standard_normal(nights) + up))
        out[f"avg_commit|{cell}"] = list(3.0 * np.exp(0.01 * rng.standard_normal(nights)))
    return out


def test_the_public_drift_scan_flags_a_step_shift_by_its_window_and_not_before() -> None:
    step = next(s for s in specperf.drift_series(_history(shift_from=16)) if s.key == "step")
    z = [specperf.scan_drift(step, 0, t, specperf.DRIFT_SCAN.window)[0] for t in range(24)]
    flagged = [t for t, v in enumerate(z) if v >= specperf.DRIFT_SCAN.factor_threshold]
    assert flagged and 16 <= flagged[0] <= 16 + specperf.DRIFT_SCAN.window - 1
    assert max(z[:16]) < specperf.DRIFT_SCAN.factor_threshold


def _case(text_class: str, context: int, step_ms: float, rng: np.random.Generator,
          base_step: float) -> specperf.SweepCase:
    now = list(step_ms * np.exp(0.01 * rng.standard_normal(6)))
    before = list(base_step * np.exp(0.01 * rng.standard_normal(6)))
    return specperf.SweepCase(specperf.Case(text_class, context, 600), {"step_ms": now},
                              {"step_ms": specperf.summarize(before)}, cost_s=5.0,
                              base_requests={"step_ms": before})


@pytest.mark.parametrize(("rise", "status"), [(1.0, "pass"), (1.10, "fail")])
def test_the_public_sweep_judge_same_night(rise: float, status: str) -> None:
    rng = np.random.default_rng(11)
    cases = [_case(c, x, 100.0 * rise, rng, 100.0) for c, x in
             (("padding", 13), ("padding", 3333), ("reasoning", 3333))]
    result = specperf.judge_sweep(cases, "sweep", None, specperf.sweep_budget(len(cases)),
                                  noise=specperf.NoiseModel.same_night())
    assert isinstance(result, specperf.SweepResult)
    assert result.verdict().status == status
    assert specperf.sweep_budget(3) == 128  # never fewer than the gate's subset needs


def test_the_noise_model_from_no_history_is_the_stated_prior() -> None:
    model = specperf.noise_from_history([], "box")
    assert model.of("step_ms").text() == "run-to-run ±3.0% assumed: no history yet"
