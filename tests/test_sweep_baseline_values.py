"""Baselines keep per-request values; the sweep test compares means against them.

A stored median's error is √(π/2) ≈ 1.25× a mean's, so the smoke subset's step test could not
reach 95 % power against a 5-repeat baseline of medians (docs/benchmarks.md §6); with the
requests stored the baseline side weighs as a mean. Files written before keep working.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from specperf.baselines.store import Baseline
from specperf.core.errors import BaselineError
from specperf.core.noise import NoiseModel
from specperf.core.stats import MEDIAN_SE_FACTOR, summarize
from specperf.judge.sweep.estimate import estimate, information_gain
from specperf.judge.sweep.factor import CaseData, Factor
from specperf.measure.sample import Measurement, Sample
from specperf.plan.workload import Case
from specperf.plugin.sweeprun import MIN_TOP_UPS, TOP_UPS_PER_CASE, budget


def _baseline() -> Baseline:
    samples = tuple(
        Sample("padding-ctx13", i, False, 13, 600, wall, 127, wall - 0.1, 0.1, 4.72, 0,
               "response", "length") for i, wall in enumerate((4.2, 4.3, 4.4)))
    measurement = Measurement(Case("padding", 13, 600), samples, "server", "response")
    return Baseline.from_run("sim", {"model": "m"}, [measurement], {}, version=1,
                             suite_version="0.1.0", git_revision="x", provenance="run",
                             simulated=True)


def test_a_baseline_stores_each_metrics_requests_and_reads_them_back() -> None:
    base = _baseline()
    stored = base.cases["padding-ctx13"]
    assert stored.values["tok_s"] == pytest.approx([600 / 4.2, 600 / 4.3, 600 / 4.4])
    assert set(stored.values) == set(stored.metrics)
    text = base.to_json()
    step = json.loads(text)["cases"]["padding-ctx13"]["metrics"]["step_ms"]
    assert step["values"] == stored.values["step_ms"] and step["median"] == \
        stored.metrics["step_ms"].median
    assert Baseline.from_json(text, "v1.json") == base


def test_a_file_written_before_values_were_stored_still_reads() -> None:
    data = json.loads(_baseline().to_json())
    for metric in data["cases"]["padding-ctx13"]["metrics"].values():
        del metric["values"]
    old = Baseline.from_json(json.dumps(data), "v1.json")
    assert old.cases["padding-ctx13"].values == {}
    assert old.cases["padding-ctx13"].metrics == _baseline().cases["padding-ctx13"].metrics


def test_bad_stored_values_name_the_field() -> None:
    data = json.loads(_baseline().to_json())
    data["cases"]["padding-ctx13"]["metrics"]["step_ms"]["values"] = ["fast"]
    with pytest.raises(BaselineError) as err:
        Baseline.from_json(json.dumps(data), "v1.json")
    assert str(err.value).startswith(
        "baseline v1.json: cases.padding-ctx13.metrics.step_ms.values should be a list of "
        "non-negative numbers: ")


STEP = Factor("step", "step_ms", +1, "", ("padding-ctx13", "padding-ctx3333"))


def _data(stored: bool, rise: float = 0.0) -> dict[str, CaseData]:
    rng = np.random.default_rng(4)
    out = {}
    for context in (13, 3333):
        before = list(40.0 * np.exp(0.03 * rng.standard_normal(5)))
        now = list(40.0 * (1 + rise) * np.exp(0.03 * rng.standard_normal(6)))
        case = Case("padding", context, 600)
        out[case.id] = CaseData(case, {"step_ms": now}, {"step_ms": summarize(before)}, None,
                                5.0, base_requests={"step_ms": before} if stored else None)
    return out


def test_stored_requests_compare_means_with_a_means_error() -> None:
    data = _data(stored=True, rise=0.05)
    est = estimate(STEP, data, NoiseModel.prior(0.0))  # the request terms alone
    logs = {cid: (np.log(c.run["step_ms"]), np.log((c.base_requests or {})["step_ms"]))
            for cid, c in data.items()}
    d = [float(now.mean() - then.mean()) for now, then in logs.values()]
    assert est.per_case == pytest.approx(dict(zip(logs, d, strict=True)))
    sd_now = math.sqrt(sum(float(((n - n.mean()) ** 2).sum()) for n, _ in logs.values()) / 10)
    sd_then = math.sqrt(sum(float(((t - t.mean()) ** 2).sum()) for _, t in logs.values()) / 8)
    per_case = sd_now**2 / 6 + sd_then**2 / 5  # k = 1: a mean's error, not a median's
    assert est.se == pytest.approx(math.sqrt(per_case / 2))
    assert est.d == pytest.approx(sum(d) / 2)
    assert 8 < est.df < 18  # Welch: between the smaller side's df and both together
    # The run-to-run noise adds its common part whole and its own part per case.
    night = estimate(STEP, data, NoiseModel.prior(0.02, 0.5))
    common, own = 0.01**2 * 2, (0.02**2 * 0.75) * 2
    assert night.se == pytest.approx(math.sqrt(1 / (2 / (per_case + own)) + common))
    assert night.run_var == pytest.approx(own / 2 + common)


def test_without_stored_requests_the_median_rule_stays() -> None:
    data = _data(stored=False)
    est = estimate(STEP, data)
    base = data["padding-ctx13"].base["step_ms"]
    assert est.per_case["padding-ctx13"] == pytest.approx(
        float(np.mean(np.log(data["padding-ctx13"].run["step_ms"]))) - math.log(base.median))
    gain_median = information_gain(STEP, data["padding-ctx13"])
    gain_mean = information_gain(STEP, _data(stored=True)["padding-ctx13"])
    # the same request buys more against a mean than against a median (k 1 vs π/2)
    n, nb = 6, 5
    assert gain_mean / gain_median == pytest.approx(
        (1 / (1 / 7 + 1 / nb) - 1 / (1 / n + 1 / nb))
        / (1 / (1 / 7 + MEDIAN_SE_FACTOR**2 / nb) - 1 / (1 / n + MEDIAN_SE_FACTOR**2 / nb)))


def test_a_small_subset_may_take_as_many_top_ups_as_the_default_sweep() -> None:
    assert budget(3) == budget(8) == MIN_TOP_UPS > 8 * TOP_UPS_PER_CASE
    assert budget(40) == 40 * TOP_UPS_PER_CASE > MIN_TOP_UPS
