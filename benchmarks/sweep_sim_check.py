"""The sweep-level test on real simulator runs, beside today's per-case rule, across nights.

A few runs through the suite's own path (RunState: measure, judge_case, then
judge_run_sweep with its top-ups) against simulator processes with per-request step noise
(``request_noise``). Baseline mode: a baseline written by --update-baselines (the setting's
repeats) into a temporary directory, then a run with the injected change judged against it.
Between the two a **run-to-run offset**: the simulator's ``step_time_mult`` is a fresh draw
``exp(σ·z)`` for the baseline's night and another for the run's, σ = ``--night`` ·
√``--common-share`` (3 % · √0.5: the part of a 3 % night noise common to every case; the
simulator's fault is global, so a case's own part is not modelled here —
benchmarks/sweep_power.py has both). ``--night 0`` is the same night (the offset cancels).
A/B mode: two simulators on one night, the candidate with the change. Scenarios: none,
step +2 %, step +5 % (``step_time_mult``), acceptance −5 % (``acceptance_mult``), mixed
+2.5 % / −2.5 %. CPU-heavy: keep ``--runs`` small.

    python benchmarks/sweep_sim_check.py [--runs 3] [--time-scale 0.05] [--noise 0.03]
        [--night 0.03] [--common-share 0.5] [--seed 2026] [--subsets sweep,smoke,ab]
        [--scenarios none,step +5%,...]

Writes benchmarks/results/sweep_sim_check.json.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from specperf import (
    Case,
    CaseBaseline,
    NotJudged,
    RunState,
    SimProcess,
    judge_run_sweep,
    load_text_classes,
    resolve,
)

RESULTS = Path(__file__).resolve().parent / "results"
SWEEP = [("padding", x) for x in (13, 1663, 3333, 5553)] + \
    [("reasoning", x) for x in (13, 1663, 3333, 5553)]
SMOKE = [("reasoning", 3333), ("padding", 3333), ("padding", 13)]
SCENARIOS = {"none": {}, "step +2%": {"step_time_mult": 1.02},
             "step +5%": {"step_time_mult": 1.05}, "commit -5%": {"acceptance_mult": 0.95},
             "mixed 2.5+2.5": {"step_time_mult": 1.025, "acceptance_mult": 0.975}}


def faults(url: str, noise: float, extra: dict[str, float], night: float = 1.0) -> None:
    """Set the simulator's faults: ``extra`` (the change) on top of the night's step factor."""
    body = {"request_noise": noise, "step_time_mult": 1.0, "acceptance_mult": 1.0, **extra}
    body["step_time_mult"] *= night
    httpx.post(f"{url}/_sim/faults", json=body, timeout=30, trust_env=False).raise_for_status()


def judged(state: RunState, cases: Sequence[tuple[str, int]]) -> dict[str, Any]:
    """Today's per-case verdicts and the sweep test on the same requests."""
    chosen = [Case(c, x, 600) for c, x in cases]
    fails, gpu = 0, 0.0
    for case in chosen:
        measured = state.measure(case, state.tolerances_for(case, {}))
        base = state.baseline_case(case)
        assert isinstance(base, CaseBaseline), base
        fails += state.judging.judge(measured, base, {})[0].status == "fail"
        gpu += sum(s.wall_s for s in measured.samples)
        if state.comparison is not None:
            gpu += sum(s.wall_s for s in state.comparison.references[case.id].samples)
    result = judge_run_sweep(state, chosen, "sweep")
    if isinstance(result, NotJudged):  # undetermined: a skip, neither a pass nor a fail
        spent = re.search(r"\((\d+) extra requests, (\d+) s;", result.reason)
        extra, extra_s = (int(spent[1]), float(spent[2])) if spent else (0, 0.0)
        return {"today": fails > 0, "sweep_only": False, "sweep": fails > 0,
                "undetermined": True, "gpu_today": gpu, "gpu_sweep": gpu + extra_s,
                "extra": extra, "message": result.reason}
    return {"today": fails > 0, "sweep_only": result.regressed,
            "sweep": fails > 0 or result.regressed, "undetermined": False, "gpu_today": gpu,
            "gpu_sweep": gpu + result.extra_s, "extra": result.extra,
            "message": result.verdict().message}


def baseline_run(url: str, cases: Sequence[tuple[str, int]], noise: float,
                 extra: dict[str, float], nights: tuple[float, float]) -> dict[str, Any]:
    """A fresh baseline on one night (its step factor ``nights[0]``), the run on another."""
    contexts = ",".join(str(x) for x in sorted({x for _, x in cases}))
    classes = ",".join(sorted({c for c, _ in cases}))
    with tempfile.TemporaryDirectory() as tmp:
        opts = {"endpoint": url, "baseline_dir": tmp, "contexts": contexts,
                "text_classes": classes, "deployment": "check"}
        faults(url, noise, {}, nights[0])
        writer = RunState(resolve({**opts, "update_baselines": "true"}, {}, {}),
                          load_text_classes())
        try:
            for case in writer.cases:  # the whole plan: a baseline is written complete
                writer.measure(case, writer.tolerances_for(case, {}))
            lines = writer.update_baseline(clean=True)
            assert "wrote baseline" in lines[0], lines
        finally:
            writer.close_session()
        faults(url, noise, extra, nights[1])
        state = RunState(resolve(opts, {}, {}), load_text_classes())
        try:
            return {**judged(state, cases), "nights": list(nights)}
        finally:
            state.close_session()


def ab_run(cand: str, prod: str, cases: Sequence[tuple[str, int]]) -> dict[str, Any]:
    state = RunState(resolve({"endpoint": cand, "compare_endpoint": prod}, {}, {}),
                     load_text_classes())
    try:
        return judged(state, cases)
    finally:
        state.close_session()


def summarise(mode: str, subset: str, name: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(runs)
    row = {"mode": mode, "subset": subset, "scenario": name, "runs": n}
    for key in ("today", "sweep_only", "sweep", "undetermined"):
        row[key] = sum(r.get(key, False) for r in runs)
    for key in ("gpu_today", "gpu_sweep", "extra"):
        row[key] = sum(r[key] for r in runs) / n
    row["messages"] = [r["message"] for r in runs]
    row["nights"] = [r.get("nights") for r in runs]
    offsets = ", ".join(f"{a:.3f}/{b:.3f}" for a, b in (r.get("nights") or (1, 1) for r in runs))
    print(f"{mode:<8} {subset:<6} {name:<11} today {row['today']}/{n}  sweep {row['sweep']}/{n}"
          f"  undetermined {row['undetermined']}/{n}  GPU {row['gpu_today']:.0f} -> "
          f"{row['gpu_sweep']:.0f} s  extra {row['extra']:.1f}  nights {offsets}", flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--time-scale", type=float, default=0.05)
    parser.add_argument("--noise", type=float, default=0.03)
    parser.add_argument("--night", type=float, default=0.03,
                        help="night-to-night σ per case (0: baseline and run on one night)")
    parser.add_argument("--common-share", type=float, default=0.5,
                        help="share of the night variance common to every case (the offset)")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--subsets", default="sweep,smoke,ab",
                        help="which of sweep, smoke (baseline mode) and ab to run")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    args = parser.parse_args()
    started, rows = time.perf_counter(), []
    chosen = {k: SCENARIOS[k] for k in args.scenarios.split(",")}
    rng = np.random.default_rng(args.seed)
    sd = args.night * math.sqrt(args.common_share)
    with SimProcess("kimi-k26-ddtree", args.time_scale, seed=1) as sim:
        for subset, cases in (("sweep", SWEEP), ("smoke", SMOKE)):
            if subset not in args.subsets:
                continue
            for name, extra in chosen.items():
                runs = [baseline_run(sim.url, cases, args.noise, extra,
                                     (math.exp(sd * rng.standard_normal()),
                                      math.exp(sd * rng.standard_normal())))
                        for _ in range(args.runs)]
                rows.append(summarise("baseline", subset, name, runs))
    if "ab" not in args.subsets:
        return _write(args, rows, started)
    with SimProcess("kimi-k26-ddtree", args.time_scale, seed=2) as prod, \
            SimProcess("kimi-k26-ddtree", args.time_scale, seed=3) as cand:
        for name, extra in chosen.items():
            faults(prod.url, args.noise, {})
            faults(cand.url, args.noise, extra)
            runs = [ab_run(cand.url, prod.url, SMOKE) for _ in range(args.runs)]
            rows.append(summarise("A/B", "smoke", name, runs))
    _write(args, rows, started)


def _write(args: argparse.Namespace, rows: list[dict[str, Any]], started: float) -> None:
    print(f"wall {time.perf_counter() - started:.0f} s")
    RESULTS.mkdir(exist_ok=True)
    name = f"sweep_sim_check_{args.subsets.replace(',', '_')}_night{args.night:g}.json"
    (RESULTS / name).write_text(json.dumps({"args": vars(args), "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
