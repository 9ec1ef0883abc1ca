"""Drift detection on simulated nightly histories: false flags and how soon a shift is flagged.

Histories of ``--before`` (60) nights, a boundary (a new baseline or fingerprint: every
cell's level moves by its own 5 %-σ draw), then the ``--nights`` (30) nights watched, of the
default sweep (8 cells: padding and reasoning at 13, 1663, 3333, 5553 tokens). The detector
is drift.py's as `specperf trend` runs it: the level reset at the boundary, the night noise
measured across it. Each night every cell's step time and avg commit carry night-to-night
noise of ``--noise`` (3 %, log-normal), with each of ``--commons`` (0, 0.5, 1) of its σ
common to every cell of the night (per metric: the box's clocks, driver, thermal move every
case together; 0.5 of 3 % is 1.5 %, a quarter of the variance; 1: nothing of a cell's own)
and the rest each cell's own. Only the watched nights are looked at (flags are per 30
watched nights, as before); ``--before 0`` is the history without a boundary. Three kinds
of history per noise setting, each its own draws:

- no shift: the share flagged at all (any factor or case), and by factors / cases apart;
- every case's step time ``--shift`` (3 %) higher from a watched start night drawn uniformly
  from [MIN_REFERENCE, nights − 4] (so the level is known and the three nights after the
  start are in the history) to the end: flagged by the step factor;
- one case's step time (the cases in turn) ``--case-shift`` (3 %) higher from such a night:
  flagged by that case's own scan.

"Flagged within 3 nights" means the flag's night is the start night or one of the three
after it; a flag before the start is a false alarm. Every share carries its 95 % Wilson
interval. The scan's factor-threshold rows show the trade-off at other thresholds. With
``--compare``, the detectors §6 compared before (the best-of-six-starts scan and Page's
CUSUM, benchmarks/drift_cusum.py) on the same histories. Last, the information bound: the
pooled z of the shift after its start night and three more, against the threshold a scan
of the history needs for ≤ 1 % false alarms, with σ known and with σ measured on the night
means (a t-test: what common noise forces; see docs/benchmarks.md §6).

    python benchmarks/drift_power.py [--histories 1000] [--seed 2026] [--commons 0,0.5,1]
        [--before 60] [--nights 30] [--noise 0.03] [--shift 0.03] [--case-shift 0.03]
        [--compare --before 0]

Tune on seeds 1..9; report on seed 2026.

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

from specperf import DRIFT_SCAN, drift_series, scan_drift

RESULTS = Path(__file__).resolve().parent / "results"
CELLS = [f"{c}-ctx{x}" for c in ("padding", "reasoning") for x in (13, 1663, 3333, 5553)]
METRICS = (("step_ms", 90.0), ("avg_commit", 3.0))


LEVEL_JUMP = 0.05  # σ of each cell's level move at the boundary (a deploy, a new baseline)


def history(rng: np.random.Generator, nights: int, noise: float, shift: float, start: int,
            common: float = 0.0, case: str | None = None, before: int = 0
            ) -> dict[str, list[float | None]]:
    """One history's cells as ``metric|cell`` series (what specperf trend reads): ``before``
    nights, a boundary where every cell's level moves its own way, then ``nights``;
    ``common`` of the noise σ shared by a night's cells (per metric), the step shift (from
    watched night ``start``) on every cell or on ``case`` alone."""
    out: dict[str, list[float | None]] = {}
    total = before + nights
    own = noise * math.sqrt(max(1.0 - common**2, 0.0))
    box = {metric: noise * common * rng.standard_normal(total) for metric, _ in METRICS}
    after = np.where(np.arange(total) >= before + start, shift, 0.0)
    watched = np.arange(total) >= before
    for cell in CELLS:
        for metric, level in METRICS:
            z = own * rng.standard_normal(total) + box[metric]
            z = z + np.where(watched, LEVEL_JUMP * rng.standard_normal(), 0.0) if before else z
            moved = metric == "step_ms" and case in (None, cell)
            out[f"{metric}|{cell}"] = list(level * np.exp(z + (after if moved else 0.0)))
    return out


def night_z(cells: dict[str, list[float | None]], per_case: bool, key: str | None = None,
            window: int | None = DRIFT_SCAN.window, before: int = 0) -> np.ndarray:
    """Per watched night, the largest decision z over the series (only ``key`` when given),
    the level from the boundary at ``before``, the noise across it; ``window`` None: the
    previous scan's, the best of every candidate start."""
    chosen = [s for s in drift_series(cells, per_case=per_case) if key in (None, s.key)]
    nights = chosen[0].logs.shape[1]
    cuts = [before] if before else []
    return np.array([max(scan_drift(s, before, t, window, cuts)[0] for s in chosen)
                     for t in range(before, nights)])


def first_at(z: np.ndarray, threshold: float) -> int | None:
    hits = np.nonzero(z >= threshold)[0]
    return int(hits[0]) if len(hits) else None


def cusum_nights(cells: dict[str, list[float | None]], key: str | None = None
                 ) -> dict[str, list[drift_cusum.CusumNight]]:
    """Every factor's (or only ``key``'s) CUSUM; h is applied afterwards, so one pass serves
    every setting."""
    return {s.key: drift_cusum.cusum(s) for s in drift_series(cells) if key in (None, s.key)}


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson score interval of a binomial share k/n (sound at k = 0, unlike ±2 se)."""
    p, d = k / n, 1 + z * z / n
    mid, half = (p + z * z / (2 * n)) / d, z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (max(mid - half, 0.0), min(mid + half, 1.0))


def share(hits: list[bool]) -> dict[str, Any]:
    k, n = int(sum(hits)), len(hits)
    return {"k": k, "n": n, "rate": k / n, "ci95": wilson(k, n)}


def rates(firsts: list[int | None], null: list[bool], starts: list[int]) -> dict[str, Any]:
    delays = [None if f is None else f - st for f, st in zip(firsts, starts, strict=True)]
    return {"false_alarm": share(null),
            "within_3": share([d is not None and 0 <= d <= 3 for d in delays]),
            "within_2": share([d is not None and 0 <= d <= 2 for d in delays]),
            "early": share([d is not None and d < 0 for d in delays])}


THRESHOLDS = (3.3, 3.4, 3.5, 3.6, 3.7, 4.0)
CASE_THRESHOLDS = (4.0, 4.2, 4.4, 4.6, 4.8)
# The scan before WINDOW (the best of every candidate start, per night) and its thresholds.
PREVIOUS_THRESHOLDS, PREVIOUS_CASE = (3.5, 4.0, 4.25, 4.5), 5.1
ARLS = (2000.0, 9000.0, 20000.0, 50000.0)
FIXED_H = ((2.25, 4.0), (2.5, 4.0), (2.75, 4.5))  # (step, acceptance) decision intervals


def draw(args: argparse.Namespace, common: float) -> dict[str, list[Any]]:
    """Every history's per-night z (and, with --compare, the other detectors' paths)."""
    rng = np.random.default_rng([args.seed, int(round(common * 1000))])
    got: dict[str, list[Any]] = {k: [] for k in (
        "null_f", "null_c", "shifted", "one", "starts", "one_starts",
        "old_f", "old_c", "old_shifted", "cu_null", "cu_shifted")}
    before = args.before
    for i in range(args.histories):
        cells = history(rng, args.nights, args.noise, 0.0, args.nights, common, before=before)
        got["null_f"].append(night_z(cells, False, before=before))
        got["null_c"].append(night_z(cells, True, before=before))
        start = int(rng.integers(DRIFT_SCAN.min_reference, args.nights - 3))
        moved = history(rng, args.nights, args.noise, args.shift, start, common, before=before)
        got["starts"].append(start)
        got["shifted"].append(night_z(moved, False, "step", before=before))
        case, one_start = CELLS[i % len(CELLS)], int(rng.integers(DRIFT_SCAN.min_reference,
                                                                   args.nights - 3))
        alone = history(rng, args.nights, args.noise, args.case_shift, one_start, common, case,
                        before)
        got["one_starts"].append(one_start)
        got["one"].append(night_z(alone, True, f"step {case}", before=before))
        if args.compare:
            got["old_f"].append(night_z(cells, False, window=None))
            got["old_c"].append(night_z(cells, True, window=None))
            got["old_shifted"].append(night_z(moved, False, "step", window=None))
            got["cu_null"].append(cusum_nights(cells))
            got["cu_shifted"].append(cusum_nights(moved, "step"))
    return got


def run(args: argparse.Namespace, common: float) -> dict[str, Any]:
    """One noise setting's shares, at drift.py's thresholds and at the others listed."""
    g = draw(args, common)
    fac, case = DRIFT_SCAN.factor_threshold, DRIFT_SCAN.case_threshold
    out: dict[str, Any] = {
        "histories": args.histories, "nights": args.nights, "noise": args.noise,
        "common": common, "shift": args.shift, "case_shift": args.case_shift,
        "threshold_factor_p99": float(np.quantile([z.max() for z in g["null_f"]], 0.99)),
        "threshold_case_p99": float(np.quantile([z.max() for z in g["null_c"]], 0.99)),
        "no_shift": {"any": share([bool(f.max() >= fac or c.max() >= case)
                                   for f, c in zip(g["null_f"], g["null_c"], strict=True)]),
                     "factor": share([bool(z.max() >= fac) for z in g["null_f"]]),
                     "case": share([bool(z.max() >= case) for z in g["null_c"]])},
        "all_cases": rates([first_at(z, fac) for z in g["shifted"]],
                           [bool(z.max() >= fac) for z in g["null_f"]], g["starts"]),
        "one_case": rates([first_at(z, case) for z in g["one"]],
                          [bool(z.max() >= case) for z in g["null_c"]], g["one_starts"]),
        "scan": {h: rates([first_at(z, h) for z in g["shifted"]],
                          [bool(z.max() >= h) for z in g["null_f"]], g["starts"])
                 | {"any": share([bool(f.max() >= h or c.max() >= case)
                                  for f, c in zip(g["null_f"], g["null_c"], strict=True)])}
                 for h in THRESHOLDS},
        # Each no-shift history's largest factor and case z: any pair of thresholds' share.
        "null_max": {"factor": [float(z.max()) for z in g["null_f"]],
                     "case": [float(z.max()) for z in g["null_c"]]},
        "case_scan": {h: rates([first_at(z, h) for z in g["one"]],
                               [bool(z.max() >= h) for z in g["null_c"]], g["one_starts"])
                      for h in CASE_THRESHOLDS}}
    if args.compare:
        out |= compare(g)
    return out


def compare(g: dict[str, list[Any]]) -> dict[str, Any]:
    """The detectors §6 weighed before: the best-of-six-starts scan and the CUSUMs."""
    out: dict[str, Any] = {"previous": {}, "cusum_arl": {}, "cusum_h": {}}
    for h in PREVIOUS_THRESHOLDS:
        out["previous"][h] = rates([first_at(z, h) for z in g["old_shifted"]],
                                   [bool(z.max() >= h) for z in g["old_f"]], g["starts"])
    out["previous_case_false_alarm"] = share([bool(z.max() >= PREVIOUS_CASE)
                                              for z in g["old_c"]])
    for arl in ARLS:
        out["cusum_arl"][arl] = rates(
            [drift_cusum.first_flag(p, arl=arl) for p in g["cu_shifted"]],
            [drift_cusum.first_flag(p, arl=arl) is not None for p in g["cu_null"]],
            g["starts"])
    for step_h, acc_h in FIXED_H:
        hs = {"step": step_h, "acceptance": acc_h}
        out["cusum_h"][f"{step_h:g}/{acc_h:g}"] = rates(
            [drift_cusum.first_flag(p, h=hs) for p in g["cu_shifted"]],
            [drift_cusum.first_flag(p, h=hs) is not None for p in g["cu_null"]], g["starts"])
    return out


def bound(args: argparse.Namespace, cells: int = len(CELLS)) -> dict[str, float]:
    """The information bound, σ known: the pooled z of the shift over its start night and
    the three after (4 nights × ``cells`` cells) against every night before it, per start
    night; the threshold that same 4-night-window statistic, looked at every night, needs
    for ≤ 1 % of no-shift histories (simulated, its p99; and its p99.67 for step's third of
    the 1 % shared with the two acceptance factors); the detection those z buy, averaged
    over the start nights (no detector that only sees those nights does better at that
    threshold, and one that must also watch nights before the start pays the threshold).
    ``ceiling_t``: the same when the night mean's σ is not known but measured on the
    nights themselves, as it must be once part of the noise is common to a night's cells —
    the window's two-sample t-test (s + 2 degrees of freedom at start night s) at the
    threshold's tail probability."""
    from scipy import stats

    rng = np.random.default_rng([args.seed, 7])
    sd = args.noise / math.sqrt(cells)  # one night's mean over cells
    starts = range(DRIFT_SCAN.min_reference, args.nights - 3)
    mean_z = [math.log(1 + args.shift) / (sd * math.sqrt(1 / 4 + 1 / s)) for s in starts]
    ends = np.arange(DRIFT_SCAN.min_reference + 3, args.nights)  # the window's last night
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
        tail = stats.norm.sf(threshold)
        out["ceiling_t" + name] = float(np.mean([
            stats.nct.sf(stats.t.isf(tail, s + 2), s + 2, z)
            for s, z in zip(starts, mean_z, strict=True)]))
    return out


def pct(s: dict[str, Any]) -> str:
    """'0.8 % [0.4, 1.6]': a share and its 95 % interval."""
    low, high = s["ci95"]
    return f"{100 * s['rate']:.1f} % [{100 * low:.1f}, {100 * high:.1f}]"


def report(r: dict[str, Any], compared: bool) -> None:
    n = r["no_shift"]
    noise = "independent" if r["common"] == 0 else f"common {r['common']:g} of σ"
    print(f"{noise} night noise: no-shift histories flagged {pct(n['any'])} (factors "
          f"{pct(n['factor'])}, cases {pct(n['case'])}); p99 of the largest z: factor "
          f"{r['threshold_factor_p99']:.2f}, case {r['threshold_case_p99']:.2f}")
    for name, label, size in (("all_cases", "every case", r["shift"]),
                              ("one_case", "one case alone", r["case_shift"])):
        v = r[name]
        print(f"  {size:.0%} shift, {label}: flagged within 3 nights {pct(v['within_3'])} "
              f"(within 2 {pct(v['within_2'])}, before its start {pct(v['early'])})")
    rows = [("scan", "window scan factor z"), ("case_scan", "window scan case z (one case)")]
    if compared:
        rows += [("previous", "previous scan z"), ("cusum_arl", "CUSUM, Siegmund h, ARL"),
                 ("cusum_h", "CUSUM, fixed h step/acceptance")]
    for name, label in rows:
        for h, v in r[name].items():
            anyf = f" (any flag {pct(v['any'])})" if "any" in v else ""
            print(f"  {label} {h}: no-shift flagged {pct(v['false_alarm'])}{anyf}; shift within 3 "
                  f"nights {pct(v['within_3'])} (within 2 {v['within_2']['rate']:.3f}, "
                  f"before its start {v['early']['rate']:.3f})")
    if compared:
        print(f"  previous scan: per-case flags at {PREVIOUS_CASE}: "
              f"{pct(r['previous_case_false_alarm'])} of histories")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--histories", type=int, default=1000)
    parser.add_argument("--nights", type=int, default=30)
    parser.add_argument("--noise", type=float, default=0.03)
    parser.add_argument("--shift", type=float, default=0.03)
    parser.add_argument("--case-shift", type=float, default=0.03,
                        help="the one-case shift (step time of one case alone)")
    parser.add_argument("--commons", default="0,0.5,1",
                        help="shares of the night noise σ common to every cell of a night, "
                             "one row each (0.5: 1.5 %% of 3 %%, a quarter of the variance; 0: "
                             "only independent noise; 1: only common)")
    parser.add_argument("--before", type=int, default=60,
                        help="history nights before the boundary (0: none, as before)")
    parser.add_argument("--compare", action="store_true",
                        help="also the previous scan and the CUSUMs (several times slower; "
                             "with --before 0)")
    parser.add_argument("--seed", type=int, default=2026, help="2026 reports; tune on 1..9")
    args = parser.parse_args()
    if args.compare and args.before:
        parser.error("--compare runs the previous detectors, which know no boundary: add "
                     "--before 0.")
    started = time.perf_counter()
    rows = [run(args, float(c)) for c in args.commons.split(",")]
    print(f"{args.histories} histories of {args.before} + {args.nights} nights per kind "
          f"(a boundary between), {args.noise:.0%} "
          f"night-to-night noise, step shift {args.shift:.0%} (one case: "
          f"{args.case_shift:.0%}); scan thresholds factor {DRIFT_SCAN.factor_threshold}, case "
          f"{DRIFT_SCAN.case_threshold}; [95 % interval]")
    for r in rows:
        report(r, args.compare)
    b = bound(args)
    print(f"bound: night sd {b['night_sd']:.4f}; pooled z after 4 nights {b['z_min']:.2f} "
          f"(start night {DRIFT_SCAN.min_reference}) to {b['z_max']:.2f}, mean {b['z_mean']:.2f}; "
          f"≤ 1 % scan threshold {b['threshold']:.2f}, ceiling {b['ceiling']:.3f}; with a "
          f"third of the 1 % {b['threshold_third']:.2f}, ceiling {b['ceiling_third']:.3f}; "
          f"night mean's σ measured (t-test): ceiling {b['ceiling_t']:.3f}, with a third "
          f"{b['ceiling_t_third']:.3f}")
    print(f"wall {time.perf_counter() - started:.0f} s")
    RESULTS.mkdir(exist_ok=True)
    name = "drift_power" + ("" if args.noise == 0.03 else f"_noise{args.noise:g}") \
        + f"_before{args.before}_seed{args.seed}" \
        + ("" if args.commons == "0,0.5,1" else f"_common{args.commons.replace(',', '-')}") \
        + ".json"
    (RESULTS / name).write_text(json.dumps({"rows": rows, "bound": b}, indent=2) + "\n")


if __name__ == "__main__":
    main()
