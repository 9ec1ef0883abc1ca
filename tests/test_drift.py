"""Drift across nights: a persistent shift is flagged with the night it began; noise is not."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from specperf.cli import main
from specperf.core import drift
from specperf.views import trend

CELLS = [f"{c}-ctx{x}" for c in ("padding", "reasoning") for x in (13, 3333)]


def _cells(nights: int, step_shift: float = 0.0, start: int = 0, commit_fall: float = 0.0,
           seed: int = 3) -> dict[str, list[float | None]]:
    rng = np.random.default_rng(seed)
    out: dict[str, list[float | None]] = {}
    for cell in CELLS:
        noise = 0.01 * rng.standard_normal((2, nights))
        after = np.arange(nights) >= start
        out[f"step_ms|{cell}"] = list(90 * np.exp(noise[0] + np.where(after, step_shift, 0)))
        fall = commit_fall if cell.startswith("reasoning") else 0.0
        out[f"avg_commit|{cell}"] = list(3 * np.exp(noise[1] + np.where(after, -fall, 0)))
    return out


def test_a_step_shift_is_flagged_with_the_night_it_began() -> None:
    flags = drift.detect_all(_cells(20, step_shift=math.log(1.04), start=12))
    step = [f for f in flags if f.key == "step"]
    assert len(step) == 1 and step[0].began == 12 and 13 <= step[0].seen <= 14
    labels = [f"n{i}" for i in range(20)]
    assert step[0].sentence(labels).startswith("step time +")
    assert step[0].sentence(labels).endswith(
        f"since run n12 (flagged on run n{step[0].seen}, z {step[0].z:.1f}) — a persistent "
        "step shift below the per-run tolerance: check the kernels, attention backend and "
        "KV cache.")
    assert not [f for f in flags if f.factor == "acceptance"]


def test_an_acceptance_fall_is_attributed_to_its_text_class() -> None:
    flags = drift.detect_all(_cells(20, commit_fall=0.04, start=10))
    assert {f.key for f in flags if " " not in f.key} == {"acceptance:reasoning"}


def test_noise_alone_raises_no_flag() -> None:
    assert drift.detect_all(_cells(30, seed=11)) == []


def test_a_boundary_restarts_the_reference() -> None:
    cells = _cells(20, step_shift=math.log(1.04), start=12)
    assert not [f for f in drift.detect_all(cells, boundaries=[12]) if f.key == "step"]


def test_specperf_trend_prints_the_drift(tmp_path: Path, capsys: object) -> None:
    cells = _cells(16, step_shift=math.log(1.05), start=9)
    history = tmp_path / "history.jsonl"
    lines = []
    for night in range(16):
        run = {c: {m: cells[f"{m}|{c}"][night] for m in ("step_ms", "avg_commit")}
               for c in CELLS}
        lines.append(json.dumps({"run_id": f"r{night:02d}", "created": f"2026-11-{night + 1:02d}",
                                 "cells": run}))
    history.write_text("\n".join(lines) + "\n")
    assert main(["trend", "--history", str(history)]) == 0
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    assert "specperf drift: step time +" in out and "since run r09" in out
    page = (tmp_path / "trend.html").read_text()
    assert '<ul class="drift">' in page
    assert trend.drift_lines(trend.build(trend.load_history(history)))
