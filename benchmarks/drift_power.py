"""Drift detection on simulated nightly histories: how soon a persistent shift is flagged.

Histories of ``--nights`` (30) nights of the default sweep (8 cells: padding and reasoning
at 13, 1663, 3333, 5553 tokens). Each night every cell's step time and avg commit carry
independent night-to-night noise of ``--noise`` (3 %, log-normal). A shifted history has
its step time (every cell) ``--shift`` (3 %) higher from a start night drawn uniformly from
[MIN_REFERENCE, nights − 4] (so the level is known and the three nights after the start are
in the history) to the end. "Flagged within 3 nights" means the flag's night is the start
night or one of the three after it; a flag before the start is a false alarm.

Prints, per threshold, the share of no-shift histories flagged (any factor) and of shifted
ones flagged in time, and the 99th percentile of a no-shift history's largest scan z (how
drift.FACTOR_THRESHOLD and CASE_THRESHOLD were set); then the same with 1.5 % of the 3 %
(a quarter of the variance) common to every cell of a night (the whole box slower),
which pooling cannot average away.

    python benchmarks/drift_power.py [--histories 2000] [--seed 1]

Writes benchmarks/results/drift_power.json.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from specperf import drift

RESULTS = Path(__file__).resolve().parent / "results"
CELLS = [f"{c}-ctx{x}" for c in ("padding", "reasoning") for x in (13, 1663, 3333, 5553)]


def history(rng: np.random.Generator, nights: int, noise: float, shift: float, start: int,
            common: float = 0.0) -> dict[str, list[float | None]]:
    """One history's cells as ``metric|cell`` series (what specperf trend reads)."""
    out: dict[str, list[float | None]] = {}
    own = math.sqrt(max(noise**2 - common**2, 0.0))
    box = common * rng.standard_normal(nights)
    for cell in CELLS:
        for metric, level in (("step_ms", 90.0), ("avg_commit", 3.0)):
            z = own * rng.standard_normal(nights) + (box if metric == "step_ms" else 0.0)
            jump = np.where(np.arange(nights) >= start, shift, 0.0) if metric == "step_ms" \
                else 0.0
            out[f"{metric}|{cell}"] = list(level * np.exp(z + jump))
    return out


def night_z(cells: dict[str, list[float | None]], per_case: bool, key: str | None = None
            ) -> np.ndarray:
    """Per night, the largest scan z over the series (only ``key`` when given)."""
    chosen = [s for s in drift.series(cells, per_case=per_case) if key in (None, s.key)]
    nights = chosen[0].logs.shape[1]
    return np.array([max(drift.scan_night(s, 0, t)[0] for s in chosen) for t in range(nights)])


def first_at(z: np.ndarray, threshold: float) -> int | None:
    hits = np.nonzero(z >= threshold)[0]
    return int(hits[0]) if len(hits) else None


def run(args: argparse.Namespace, common: float) -> dict[str, Any]:
    rng = np.random.default_rng([args.seed, int(common * 1000)])
    null_f, null_c, shifted, starts = [], [], [], []
    for _ in range(args.histories):
        cells = history(rng, args.nights, args.noise, 0.0, args.nights, common)
        null_f.append(night_z(cells, False))
        null_c.append(night_z(cells, True))
        start = int(rng.integers(drift.MIN_REFERENCE, args.nights - 3))
        starts.append(start)
        shifted.append(night_z(history(rng, args.nights, args.noise, args.shift, start, common),
                               False, "step"))
    out: dict[str, Any] = {"histories": args.histories, "nights": args.nights,
                           "noise": args.noise, "common": common, "shift": args.shift,
                           "threshold_factor_p99": float(np.quantile([z.max() for z in null_f],
                                                                     0.99)),
                           "threshold_case_p99": float(np.quantile([z.max() for z in null_c],
                                                                   0.99)),
                           "by_threshold": {}}
    for h in THRESHOLDS:
        seen = [first_at(z, h) for z in shifted]
        delays = [None if s is None else s - st for s, st in zip(seen, starts, strict=True)]
        out["by_threshold"][h] = {
            "false_alarm": float(np.mean([z.max() >= h for z in null_f])),
            "within_3": float(np.mean([d is not None and 0 <= d <= 3 for d in delays])),
            "within_2": float(np.mean([d is not None and 0 <= d <= 2 for d in delays])),
            "early": float(np.mean([d is not None and d < 0 for d in delays]))}
    out["case_false_alarm"] = float(np.mean([z.max() >= drift.CASE_THRESHOLD for z in null_c]))
    return out


THRESHOLDS = (3.5, 3.75, 4.0, 4.25, 4.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--histories", type=int, default=2000)
    parser.add_argument("--nights", type=int, default=30)
    parser.add_argument("--noise", type=float, default=0.03)
    parser.add_argument("--shift", type=float, default=0.03)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    started = time.perf_counter()
    rows = [run(args, 0.0), run(args, 0.015)]
    print(f"{args.histories} histories of {args.nights} nights, {args.noise:.0%} night-to-night "
          f"noise, step shift {args.shift:.0%}; thresholds factor {drift.FACTOR_THRESHOLD}, "
          f"case {drift.CASE_THRESHOLD}")
    for r in rows:
        print(f"common noise {r['common']:.1%}: p99 of a no-shift history's largest z: factor "
              f"{r['threshold_factor_p99']:.2f}, case {r['threshold_case_p99']:.2f}; per-case "
              f"flags at {drift.CASE_THRESHOLD}: {r['case_false_alarm']:.3f} of histories")
        for h, v in r["by_threshold"].items():
            print(f"  threshold {h}: no-shift flagged {v['false_alarm']:.3f}; shift flagged "
                  f"within 3 nights {v['within_3']:.3f} (within 2 {v['within_2']:.3f}, "
                  f"before its start {v['early']:.3f})")
    print(f"wall {time.perf_counter() - started:.0f} s")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "drift_power.json").write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
