"""The trend page over runs of several deployments and few nights (issue 41, item 4): each
deployment its own series, colour, boundaries and drift scan; a scan without the nights it
needs says undetermined and how many more; run labels short, thinned and slanted; boundary
lines tagged, their text listed."""

from __future__ import annotations

import re

from specperf.record import trend as record_trend
from specperf.views import trend

CELLS = ("padding-ctx13", "padding-ctx3333", "reasoning-ctx13")


def _run(n: int, deployment: str, *, version: int = 1, tok: float = 100.0,
         label: str = "") -> dict:
    return {"run_id": f"202612{n // 24 + 1:02d}-{n % 24:02d}3000-ab{n:02d}",
            "created": f"2026-12-{n // 24 + 1:02d}T{n % 24:02d}:30:00Z",
            "label": label or f"http://{deployment}:30000", "kind": "full",
            "baseline": {"deployment": deployment, "version": version},
            "fingerprint": {"model": "m", "draft_model": deployment},
            "cells": {c: {"tok_s": tok, "step_ms": 30.0 + n % 3, "avg_commit": 4.7}
                      for c in CELLS}}


def test_each_deployment_is_its_own_series_with_its_own_boundaries():
    runs = [_run(i, "alpha" if i % 2 == 0 else "beta", tok=100.0 if i % 2 == 0 else 60.0)
            for i in range(6)]
    built = record_trend.build(runs)
    assert built.deployments == ["alpha", "beta"] * 3
    # Alternating runs are no change of either deployment: one boundary each, not six.
    assert built.boundaries == [(0, "baseline alpha v1"), (1, "baseline beta v1")]
    svg = str(trend.view(built)["metrics"][0]["figure"].svg)
    legend = re.findall(r">(deployment [^<]+)</text>", svg)
    assert legend == ["deployment alpha", "deployment beta"]
    colours = set(re.findall(r"stroke: (#[0-9a-f]{6}); stroke-width: 1.5", svg))
    assert len(colours) == 2  # one per deployment, not one per cell (three)


def test_a_run_that_wrote_the_baseline_joins_its_endpoints_deployment():
    first = {**_run(0, "alpha"), "baseline": None}
    built = record_trend.build([first, _run(1, "alpha"), _run(2, "beta")])
    assert built.deployments == ["alpha", "alpha", "beta"]
    alone = {**first, "label": "http://elsewhere:1", "simulated": True,
             "fingerprint": {"sim_profile": "kimi"}}
    assert record_trend.deployment_of(alone, [alone]) == "sim-kimi"


def test_drift_with_too_few_nights_is_undetermined_and_says_how_many_more():
    runs = [_run(i, "alpha") for i in range(3)] + [_run(i, "beta") for i in range(3, 9)]
    lines = [(line.status, line.text) for line in record_trend.build(runs).drift]
    # Runs an hour apart are one night each deployment (the noise model's nights, 12 h).
    assert lines == [
        ("undetermined", "Drift undetermined (alpha): the scan compares the last 4 nights with "
                         "at least 5 before them, since the last boundary. It has 1 of the 9 "
                         "nights it needs: 8 more."),
        ("undetermined", "Drift undetermined (beta): the scan compares the last 4 nights with "
                         "at least 5 before them, since the last boundary. It has 1 of the 9 "
                         "nights it needs: 8 more.")]
    hourly = [(line.status, line.text)
              for line in record_trend.build(runs[3:], night_window_h=0.5).drift]
    assert hourly[0][1].endswith("It has 6 of the 9 nights it needs: 3 more.")
    page = trend.render(record_trend.build(runs[:3]))
    assert "No persistent shift" not in page and "It has 1 of the 9 nights it needs" in page


def test_run_labels_are_short_and_thinned_and_boundaries_are_tagged():
    assert record_trend.short_labels(["20261203-092719-8535", "20261203-093002-9785"]) == \
        ["12-03 09:27", "12-03 09:30"]
    assert record_trend.short_labels(["20261203-092719-aa", "20261203-092758-bb", "r7"]) == \
        ["12-03 09:27:19", "12-03 09:27:58", "r7"]
    assert record_trend.short_labels(["20261203-092719-aa", "20261203-092719-bb"]) == \
        ["12-03 09:27:19 aa", "12-03 09:27:19 bb"]
    runs = [_run(i, "alpha", version=1 + i // 20) for i in range(40)]
    built = record_trend.build(runs)
    svg = str(trend.view(built)["metrics"][0]["figure"].svg)
    ticks = re.findall(r">(12-0\d \d\d:\d\d)</text>", svg)
    assert 10 <= len(ticks) <= 17 and ticks[-1] == "12-02 15:30"  # thinned, the last kept
    assert "rotate(-40" in svg  # slanted, so neighbours do not overlap
    assert re.findall(r">(B\d)</text>", svg) == ["B1", "B2"]
    assert "baseline alpha v2" not in svg  # the text is listed on the page, not on the line
    assert "<b>B2</b> before 20261201-203000-ab20: baseline alpha v2" in trend.render(built)
