"""Drift detection on simulated nightly histories: how soon a persistent shift is flagged.

Histories of ``--nights`` (30) nights of the default sweep (8 cells: padding and reasoning
at 13, 1663, 3333, 5553 tokens). Each night every cell's step time and avg commit carry
independent night-to-night noise of ``--noise`` (3 %, log-normal). A shifted history has
its step time (every cell) ``--shift`` (3 %) higher from a start night drawn uniformly from
[MIN_REFERENCE, nights − 4] (so the level is known and the three nights after the start are
in the history) to the end. "Flagged within 3 nights" means the flag's night is the start
night or one of the three after it; a flag before the start is a false alarm.

Both detectors of drift.py see the same histories: the windowed two-sample scan (GLR, per
z threshold) and Page's CUSUM (per average run length, which sets each night's decision
interval). Prints, per setting, the share of no-shift histories flagged (any factor) and
of shifted ones flagged in time, and the per-case flags at the chosen settings; then the
same with 1.5 % of the 3 % (a quarter of the variance) common to every cell of a night
(the whole box slower), which pooling cannot average away. Last, the information bound:
the pooled z of the shift after its start night and three more, against the threshold a
scan of the history needs for ≤ 1 % false alarms (see docs/benchmarks.md §6).

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

import drift_cusum
import numpy as np

from specperf.core import drift

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


def night_z(cells: dict[str, list[float | None]], per_case: bool, key: str | None = None,
            window: int | None = drift.WINDOW) -> np.ndarray:
    """Per night, the largest decision z over the series (only ``key`` when given);
    ``window`` None: the previous scan's, the best of every candidate start."""
    chosen = [s for s in drift.series(cells, per_case=per_case) if key in (None, s.key)]
    nights = chosen[0].logs.shape[1]
    return np.array([max(drift.scan_night(s, 0, t, window)[0] for s in chosen)
                     for t in range(nights)])


def first_at(z: np.ndarray, threshold: float) -> int | None:
    hits = np.nonzero(z >= threshold)[0]
    return int(hits[0]) if len(hits) else None


def cusum_nights(cells: dict[str, list[float | None]], key: str | None = None
                 ) -> dict[str, list[drift_cusum.CusumNight]]:
    """Every factor's (or only ``key``'s) CUSUM; h is applied afterwards, so one pass serves
    every setting."""
    return {s.key: drift_cusum.cusum(s) for s in drift.series(cells) if key in (None, s.key)}


def rates(firsts: list[int | None], null: list[bool], starts: list[int]) -> dict[str, float]:
    delays = [None if f is None else f - st for f, st in zip(firsts, starts, strict=True)]
    return {"false_alarm": float(np.mean(null)),
            "within_3": float(np.mean([d is not None and 0 <= d <= 3 for d in delays])),
            "within_2": float(np.mean([d is not None and 0 <= d <= 2 for d in delays])),
            "early": float(np.mean([d is not None and d < 0 for d in delays]))}


def run(args: argparse.Namespace, common: float) -> dict[str, Any]:
    rng = np.random.default_rng([args.seed, int(common * 1000)])
    null_f, null_c, shifted, starts = [], [], [], []
    old_f, old_c, old_shifted = [], [], []
    cu_null_f, cu_shifted = [], []
    for _ in range(args.histories):
        cells = history(rng, args.nights, args.noise, 0.0, args.nights, common)
        null_f.append(night_z(cells, False))
        null_c.append(night_z(cells, True))
        old_f.append(night_z(cells, False, window=None))
        old_c.append(night_z(cells, True, window=None))
        cu_null_f.append(cusum_nights(cells))
        start = int(rng.integers(drift.MIN_REFERENCE, args.nights - 3))
        starts.append(start)
        moved = history(rng, args.nights, args.noise, args.shift, start, common)
        shifted.append(night_z(moved, False, "step"))
        old_shifted.append(night_z(moved, False, "step", window=None))
        cu_shifted.append(cusum_nights(moved, "step"))
    out: dict[str, Any] = {"histories": args.histories, "nights": args.nights,
                           "noise": args.noise, "common": common, "shift": args.shift,
                           "threshold_factor_p99": float(np.quantile([z.max() for z in null_f],
                                                                     0.99)),
                           "threshold_case_p99": float(np.quantile([z.max() for z in null_c],
                                                                   0.99)),
                           "scan": {}, "previous": {}, "cusum_arl": {}, "cusum_h": {}}
    for h in THRESHOLDS:
        out["scan"][h] = rates([first_at(z, h) for z in shifted],
                               [bool(z.max() >= h) for z in null_f], starts)
    for h in PREVIOUS_THRESHOLDS:
        out["previous"][h] = rates([first_at(z, h) for z in old_shifted],
                                   [bool(z.max() >= h) for z in old_f], starts)
    out["previous_case_false_alarm"] = float(np.mean([z.max() >= PREVIOUS_CASE
                                                      for z in old_c]))
    for arl in ARLS:
        out["cusum_arl"][arl] = rates(
            [drift_cusum.first_flag(p, arl=arl) for p in cu_shifted],
            [drift_cusum.first_flag(p, arl=arl) is not None for p in cu_null_f], starts)
    for step_h, acc_h in FIXED_H:
        hs = {"step": step_h, "acceptance": acc_h}
        out["cusum_h"][f"{step_h:g}/{acc_h:g}"] = rates(
            [drift_cusum.first_flag(p, h=hs) for p in cu_shifted],
            [drift_cusum.first_flag(p, h=hs) is not None for p in cu_null_f], starts)
    out["scan_case_false_alarm"] = float(np.mean([z.max() >= drift.CASE_THRESHOLD
                                                  for z in null_c]))
    return out


THRESHOLDS = (3.5, 3.6, 3.7, 3.85, 4.0)
# The scan before WINDOW (the best of every candidate start, per night) and its thresholds.
PREVIOUS_THRESHOLDS, PREVIOUS_CASE = (3.5, 4.0, 4.25, 4.5), 5.1
ARLS = (2000.0, 9000.0, 20000.0, 50000.0)
FIXED_H = ((2.25, 4.0), (2.5, 4.0), (2.75, 4.5))  # (step, acceptance) decision intervals


def bound(args: argparse.Namespace, cells: int = len(CELLS)) -> dict[str, float]:
    """The information bound, σ known: the pooled z of the shift over its start night and
    the three after (4 nights × ``cells`` cells) against every night before it, per start
    night; the threshold that same 4-night-window statistic, looked at every night, needs
    for ≤ 1 % of no-shift histories (simulated, its p99; and its p99.67 for step's third of
    the 1 % shared with the two acceptance factors); the detection those z buy, averaged
    over the start nights (no detector that only sees those nights does better at that
    threshold, and one that must also watch nights before the start pays the threshold)."""
    rng = np.random.default_rng([args.seed, 7])
    sd = args.noise / math.sqrt(cells)  # one night's mean over cells
    starts = range(drift.MIN_REFERENCE, args.nights - 3)
    mean_z = [math.log(1 + args.shift) / (sd * math.sqrt(1 / 4 + 1 / s)) for s in starts]
    ends = np.arange(drift.MIN_REFERENCE + 3, args.nights)  # the window's last night
    x = sd * rng.standard_normal((20000, args.nights))
    c = np.hstack([np.zeros((len(x), 1)), np.cumsum(x, axis=1)])
    window = (c[:, ends + 1] - c[:, ends - 3]) / 4
    before = c[:, ends - 3] / (ends - 3)
    peaks = ((window - before) / (sd * np.sqrt(1 / 4 + 1 / (ends - 3)))).max(axis=1)
    out = {"night_sd": sd, "z_min": min(mean_z), "z_max": max(mean_z),
           "z_mean": float(np.mean(mean_z))}
    for name, q in (("", 0.99), ("_third", 1 - 0.01 / 3)):
        threshold = float(np.quantile(peaks, q))
        out["threshold" + name] = threshold
        out["ceiling" + name] = float(np.mean([0.5 * math.erfc((threshold - z) / math.sqrt(2))
                                               for z in mean_z]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--histories", type=int, default=2000)
    parser.add_argument("--nights", type=int, default=30)
    parser.add_argument("--noise", type=float, default=0.03)
    parser.add_argument("--shift", type=float, default=0.03)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-common", action="store_true",
                        help="skip the histories with noise common to a night's cells")
    args = parser.parse_args()
    started = time.perf_counter()
    rows = [run(args, 0.0)] + ([] if args.no_common else [run(args, 0.015)])
    print(f"{args.histories} histories of {args.nights} nights, {args.noise:.0%} night-to-night "
          f"noise, step shift {args.shift:.0%}; scan thresholds factor "
          f"{drift.FACTOR_THRESHOLD}, case {drift.CASE_THRESHOLD}")
    for r in rows:
        print(f"common noise {r['common']:.1%}: scan p99 of a no-shift history's largest z: "
              f"factor {r['threshold_factor_p99']:.2f}, case {r['threshold_case_p99']:.2f}; "
              f"per-case flags (scan at {drift.CASE_THRESHOLD}): "
              f"{r['scan_case_false_alarm']:.3f} of histories")
        print(f"  previous scan: per-case flags at {PREVIOUS_CASE}: "
              f"{r['previous_case_false_alarm']:.3f} of histories")
        for name, label in (("scan", "window scan z"), ("previous", "previous scan z"),
                            ("cusum_arl", "CUSUM, Siegmund h, ARL"),
                            ("cusum_h", "CUSUM, fixed h step/acceptance")):
            for h, v in r[name].items():
                print(f"  {label} {h}: no-shift flagged {v['false_alarm']:.3f}; shift flagged "
                      f"within 3 nights {v['within_3']:.3f} (within 2 {v['within_2']:.3f}, "
                      f"before its start {v['early']:.3f})")
    b = bound(args)
    print(f"bound: night sd {b['night_sd']:.4f}; pooled z after 4 nights {b['z_min']:.2f} "
          f"(start night {drift.MIN_REFERENCE}) to {b['z_max']:.2f}, mean {b['z_mean']:.2f}; "
          f"≤ 1 % scan threshold {b['threshold']:.2f}, ceiling {b['ceiling']:.3f}; with a "
          f"third of the 1 % {b['threshold_third']:.2f}, ceiling {b['ceiling_third']:.3f}")
    print(f"wall {time.perf_counter() - started:.0f} s")
    RESULTS.mkdir(exist_ok=True)
    name = "drift_power" + ("" if args.noise == 0.03 else f"_noise{args.noise:g}") + ".json"
    (RESULTS / name).write_text(json.dumps({"rows": rows, "bound": b},
                                                         indent=2) + "\n")


if __name__ == "__main__":
    main()
