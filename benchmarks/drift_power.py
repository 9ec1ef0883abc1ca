"""Drift detection on simulated nightly histories: how soon a persistent shift is flagged.

Histories of ``--nights`` (30) nights of the default sweep (8 cells: padding and reasoning
at 13, 1663, 3333, 5553 tokens). Each night every cell's step time and avg commit carry
independent night-to-night noise of ``--noise`` (3 %, log-normal). A shifted history has
its step time (every cell) ``--shift`` (3 %) higher from a start night drawn uniformly from
[MIN_REFERENCE, nights − 4] (so the level is known and the three nights after the start are
in the history) to the end. "Flagged within 3 nights" means the flag's night is the start
night or one of the three after it; a flag before the start is a false alarm.

Also prints the thresholds the no-shift histories call for (99th percentile of the largest
scan z of a history), which is how drift.FACTOR_THRESHOLD and CASE_THRESHOLD were set, and
a row with part of the noise common to every cell of a night (the whole box slower), which
pooling cannot average away.

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


def max_z(cells: dict[str, list[float | None]], per_case: bool) -> float:
    """The largest scan z anywhere in a history (for calibrating thresholds)."""
    best = -math.inf
    for s in drift.series(cells, per_case=per_case):
        for t in range(s.logs.shape[1]):
            best = max(best, drift.scan_night(s, 0, t)[0])
    return best


def run(args: argparse.Namespace, common: float) -> dict[str, Any]:
    rng = np.random.default_rng([args.seed, int(common * 1000)])
    null_factor, null_case, any_null, flagged, delays = [], [], 0, 0, []
    for _ in range(args.histories):
        cells = history(rng, args.nights, args.noise, 0.0, args.nights, common)
        if not args.skip_calibration:
            null_factor.append(max_z(cells, False))
            null_case.append(max_z(cells, True))
        any_null += bool(drift.detect_all(cells))
        start = int(rng.integers(drift.MIN_REFERENCE, args.nights - 3))
        shifted = history(rng, args.nights, args.noise, args.shift, start, common)
        flags = [f for s in drift.series(shifted)
                 if (f := drift.detect(s, drift.FACTOR_THRESHOLD)) and f.key == "step"]
        seen = flags[0].seen if flags else None
        ok = seen is not None and start <= seen <= start + 3
        flagged += ok
        delays.append(None if seen is None else seen - start)
    out: dict[str, Any] = {"histories": args.histories, "nights": args.nights,
                           "noise": args.noise, "common": common, "shift": args.shift,
                           "false_alarm": any_null / args.histories,
                           "flagged_within_3": flagged / args.histories,
                           "delays": delays}
    if null_factor:
        out["threshold_factor_p99"] = float(np.quantile(null_factor, 0.99))
        out["threshold_case_p99"] = float(np.quantile(null_case, 0.99))
    ok_delays = [d for d in delays if d is not None and d >= 0]
    out["median_delay"] = float(np.median(ok_delays)) if ok_delays else None
    out["within_2"] = sum(1 for d in delays if d is not None and 0 <= d <= 2) / args.histories
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--histories", type=int, default=2000)
    parser.add_argument("--nights", type=int, default=30)
    parser.add_argument("--noise", type=float, default=0.03)
    parser.add_argument("--shift", type=float, default=0.03)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--skip-calibration", action="store_true")
    args = parser.parse_args()
    started = time.perf_counter()
    rows = [run(args, 0.0), run(args, 0.015)]
    print(f"{args.histories} histories of {args.nights} nights, {args.noise:.0%} night-to-night "
          f"noise, step shift {args.shift:.0%}; thresholds factor {drift.FACTOR_THRESHOLD}, "
          f"case {drift.CASE_THRESHOLD}")
    for r in rows:
        cal = (f"  p99 max z: factor {r['threshold_factor_p99']:.2f}, case "
               f"{r['threshold_case_p99']:.2f}") if "threshold_factor_p99" in r else ""
        print(f"common noise {r['common']:.1%}: no-shift histories flagged {r['false_alarm']:.3f}"
              f"; shift flagged within 3 nights {r['flagged_within_3']:.3f} (within 2: "
              f"{r['within_2']:.3f}, median delay {r['median_delay']}){cal}")
    print(f"wall {time.perf_counter() - started:.0f} s")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "drift_power.json").write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
