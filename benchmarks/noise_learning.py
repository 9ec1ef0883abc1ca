"""The noise model's learning curve: what a nightly sweep can see after N nights of history.

For each true night noise (1 % and 3 % σ per case, half of it common to the night) and each
length of history (0, 2, 5, 10, 20, 60 nights), draw the box's history as
benchmarks/sweep_power.py does (cell medians of 5 requests with their standard errors, a
night a day), let :func:`specperf.noise_from_history` estimate the run-to-run noise with the
default prior (3 %, not stated), judge one no-change full sweep against a baseline of another
night with it, and read the sweep's resolution: per factor, the smallest change in its bad
direction it catches with 95 % power (judge/sweep/factortest.py ``FactorTest.resolution``). The
figures are the median over ``--draws`` boxes, with the 10th and 90th percentiles.

    python benchmarks/noise_learning.py [--draws 60] [--seed 2027]

Writes benchmarks/results/noise_learning_seed<seed>.json.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import sweep_power as sp

NIGHTS = (0, 2, 5, 10, 20, 60)
FACTORS = ("tok_s", "step_ms", "avg_commit")


def resolution(night: float, nights: int, seed: int) -> dict[str, float]:
    """One box: its history of ``nights`` nights, one no-change sweep, its resolution."""
    box = replace(sp.Box(), night=night)
    setup = sp.Setup("nightly", tuple(sp.physics(*c) for c in sp.SWEEP), box, 5,
                     history_nights=max(nights, 1) if nights else 0)
    seen: dict[str, float] = {}

    def spy(data: Any, *args: Any, **kw: Any) -> Any:
        result = judge(data, *args, **kw)
        seen.update({k: v for k, v in result.resolution().items() if k in FACTORS})
        seen["nights"] = float(kw["noise"].of("step_ms").nights) if kw.get("noise") else 0.0
        return result

    judge = sp.judge_sweep
    sp.judge_sweep = spy
    try:
        sp.trial(setup, sp.NO_CHANGE, (seed, nights, int(1000 * night)))
    finally:
        sp.judge_sweep = judge
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=60)
    parser.add_argument("--seed", type=int, default=2027)
    args = parser.parse_args()
    rows = []
    print("true night σ  nights  " + "  ".join(f"{f:>22}" for f in FACTORS)
          + "   (median [p10, p90] of the smallest bad change seen with 95 % power)")
    for night in (0.01, 0.03):
        for nights in NIGHTS:
            draws = [resolution(night, nights, args.seed * 1000 + d) for d in range(args.draws)]
            row: dict[str, Any] = {"night": night, "nights": nights, "draws": args.draws}
            cells = []
            for f in FACTORS:
                values = np.array([d[f] for d in draws])
                p10, p50, p90 = (float(np.percentile(values, q)) for q in (10, 50, 90))
                row[f] = {"median": p50, "p10": p10, "p90": p90}
                cells.append(f"{100 * p50:+6.1f}% [{100 * p10:+.1f}, {100 * p90:+.1f}]")
            rows.append(row)
            print(f"{night:>11.0%}  {nights:>6}  " + "  ".join(f"{c:>22}" for c in cells),
                  flush=True)
    out = Path(__file__).resolve().parent / "results" / f"noise_learning_seed{args.seed}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"args": vars(args), "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
