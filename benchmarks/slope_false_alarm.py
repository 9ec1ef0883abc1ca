"""The slope check's false alarms and its power, judged as the plugin judges them (issue 13).

A clean simulator, a clean baseline written over the contexts 13, 20, 600, 1663, 3333 and
5553 (both default text classes), then:

- ``--runs`` runs of ``--contexts 13,20`` and as many of ``--contexts 13,600``: every
  case is measured and judged (RunState: adaptive repeats, judge_case) and each class's
  slope is judged (RunState.judge_fit). The goal: zero slope failures; a slope the contexts
  cannot determine is a skip (counted "undetermined"), never a pass or a fail.
- ``--regression-runs`` runs on the default contexts with ``slope_mult`` 1.4 (the context
  slope b 40 % steeper): every one must fail the slope check.

    python benchmarks/slope_false_alarm.py [--runs 40] [--regression-runs 10] [--time-scale 0.1]

Writes benchmarks/results/slope_false_alarm.json.
"""

from __future__ import annotations

import argparse
import collections
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from specperf import NotJudged, RunState, SimProcess, SpecperfError, load_text_classes, resolve

RESULTS = Path(__file__).resolve().parent / "results"
BASELINE_CONTEXTS = "13,20,600,1663,3333,5553"
DEFAULT_CONTEXTS = "13,1663,3333,5553"


def _state(url: str, contexts: str, baseline_dir: Path, update: bool = False) -> RunState:
    settings = resolve({"endpoint": url, "contexts": contexts, "baseline_dir": str(baseline_dir),
                        "update_baselines": "true" if update else None}, {}, {})
    return RunState(settings, load_text_classes())


def write_baseline(url: str, baseline_dir: Path) -> list[str]:
    state = _state(url, BASELINE_CONTEXTS, baseline_dir, update=True)
    try:
        for case in state.cases:
            state.measure(case, state.tolerances_for(case, {}))
        return state.update_baseline(clean=True)
    finally:
        state.close_session()


def one_run(url: str, contexts: str, baseline_dir: Path) -> dict[str, Any]:
    """Measure and judge every case, then each class's slope; what each verdict was."""
    state = _state(url, contexts, baseline_dir)
    cases: list[dict[str, str]] = []
    fits: list[dict[str, str]] = []
    try:
        for case in state.cases:
            try:
                measured = state.measure(case, state.tolerances_for(case, {}))
            except SpecperfError as exc:
                cases.append({"case": case.id, "status": "error", "message": str(exc)})
                continue
            base = state.baseline_case(case)
            assert not isinstance(base, NotJudged), base
            verdict = state.judging.judge(measured, base, {})[0]
            cases.append({"case": case.id, "status": verdict.status})
        for text_class in state.settings.text_classes:
            try:
                found = state.judging.judge_fit(text_class, {})
            except SpecperfError as exc:
                fits.append({"class": text_class, "status": "error", "message": str(exc)})
                continue
            if isinstance(found, NotJudged):
                fits.append({"class": text_class, "status": "undetermined",
                             "message": found.reason})
            else:
                fits.append({"class": text_class, "status": found.status,
                             "message": found.message})
    finally:
        state.close_session()
    return {"contexts": contexts, "cases": cases, "fits": fits}


def scenario(url: str, contexts: str, runs: int, baseline_dir: Path) -> dict[str, Any]:
    started = time.perf_counter()
    results = [one_run(url, contexts, baseline_dir) for _ in range(runs)]
    fit_counts = collections.Counter(f["status"] for r in results for f in r["fits"])
    case_counts = collections.Counter(c["status"] for r in results for c in r["cases"])
    return {"contexts": contexts, "runs": runs, "fit_verdicts": dict(fit_counts),
            "case_verdicts": dict(case_counts),
            "runs_with_a_slope_failure": sum(any(f["status"] == "fail" for f in r["fits"])
                                             for r in results),
            "wall_s": round(time.perf_counter() - started, 1), "results": results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--regression-runs", type=int, default=10)
    parser.add_argument("--time-scale", type=float, default=0.1)
    args = parser.parse_args()
    out: dict[str, Any] = {"time_scale": args.time_scale}
    with SimProcess("kimi-k26-ddtree", args.time_scale, seed=1) as sim, \
            tempfile.TemporaryDirectory(prefix="specperf-slope-") as tmp:
        baseline_dir = Path(tmp)
        out["baseline"] = write_baseline(sim.url, baseline_dir)
        print("\n".join(out["baseline"]), flush=True)
        for contexts in ("13,20", "13,600"):
            out[contexts] = scenario(sim.url, contexts, args.runs, baseline_dir)
            print(contexts, out[contexts]["fit_verdicts"], out[contexts]["case_verdicts"],
                  flush=True)
        httpx.post(f"{sim.url}/_sim/faults", json={"slope_mult": 1.4}).raise_for_status()
        out["slope_mult 1.4"] = scenario(sim.url, DEFAULT_CONTEXTS, args.regression_runs,
                                         baseline_dir)
        print("slope_mult 1.4", out["slope_mult 1.4"]["fit_verdicts"], flush=True)
    print(f"slope verdicts per class, time scale {args.time_scale:g}, 600 output tokens")
    print(f"{'runs':<28} {'n':>4} {'fail':>5} {'pass':>5} {'undetermined':>13} {'other':>6}")
    for name in ("13,20", "13,600", "slope_mult 1.4"):
        counts = collections.Counter(out[name]["fit_verdicts"])
        other = sum(v for k, v in counts.items() if k not in ("fail", "pass", "undetermined"))
        label = name if name.startswith("slope") else f"--contexts {name} (clean)"
        print(f"{label:<28} {out[name]['runs']:>4} {counts['fail']:>5} {counts['pass']:>5} "
              f"{counts['undetermined']:>13} {other:>6}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "slope_false_alarm.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
