"""The sweep-level test on real simulator runs, beside today's per-case rule.

A few runs through the suite's own path (RunState: measure, judge_case, then
sweeprun.judge with its top-ups) against simulator processes with per-request step noise
(``request_noise``). Baseline mode: a baseline written by --update-baselines (5 repeats)
into a temporary directory, then a run with the injected fault judged against it. A/B mode:
two simulators, the candidate with the fault. Scenarios: none, step +5 % (``step_time_mult``
1.05), acceptance −5 % (``acceptance_mult`` 0.95). CPU-heavy: keep ``--runs`` small.

    python benchmarks/sweep_sim_check.py [--runs 2] [--time-scale 0.05] [--noise 0.03]

Writes benchmarks/results/sweep_sim_check.json.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from specperf.baselines.store import CaseBaseline
from specperf.judge.verdict import NotJudged
from specperf.plan.workload import Case, load_text_classes
from specperf.plugin import sweeprun
from specperf.plugin.runstate import RunState
from specperf.servers.simulated import SimProcess
from specperf.settings.config import resolve

RESULTS = Path(__file__).resolve().parent / "results"
SWEEP = [("padding", x) for x in (13, 1663, 3333, 5553)] + \
    [("reasoning", x) for x in (13, 1663, 3333, 5553)]
SMOKE = [("reasoning", 3333), ("padding", 3333), ("padding", 13)]
SCENARIOS = {"none": {}, "step +5%": {"step_time_mult": 1.05},
             "commit -5%": {"acceptance_mult": 0.95}}


def faults(url: str, noise: float, extra: dict[str, float]) -> None:
    body = {"request_noise": noise, "step_time_mult": 1.0, "acceptance_mult": 1.0, **extra}
    httpx.post(f"{url}/_sim/faults", json=body, timeout=30, trust_env=False).raise_for_status()


def judged(state: RunState, cases: Sequence[tuple[str, int]]) -> dict[str, Any]:
    """Today's per-case verdicts and the sweep test on the same requests."""
    chosen = [Case(c, x, 600) for c, x in cases]
    fails, gpu = 0, 0.0
    for case in chosen:
        measured = state.measure(case, state.tolerances_for(case, {}))
        base = state.baseline_case(case)
        assert isinstance(base, CaseBaseline), base
        fails += state.judge(measured, base, {})[0].status == "fail"
        gpu += sum(s.wall_s for s in measured.samples)
        if state.comparison is not None:
            gpu += sum(s.wall_s for s in state.comparison.references[case.id].samples)
    result = sweeprun.judge(state, chosen, "sweep")
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
                 extra: dict[str, float]) -> dict[str, Any]:
    contexts = ",".join(str(x) for x in sorted({x for _, x in cases}))
    classes = ",".join(sorted({c for c, _ in cases}))
    with tempfile.TemporaryDirectory() as tmp:
        opts = {"endpoint": url, "baseline_dir": tmp, "contexts": contexts,
                "text_classes": classes, "deployment": "check"}
        faults(url, noise, {})
        writer = RunState(resolve({**opts, "update_baselines": "true", "repeats": "5",
                                   "max_repeats": "8"}, {}, {}), load_text_classes())
        try:
            for case in writer.cases:  # the whole plan: a baseline is written complete
                writer.measure(case, writer.tolerances_for(case, {}))
            lines = writer.update_baseline(clean=True)
            assert "wrote baseline" in lines[0], lines
        finally:
            writer.close_session()
        faults(url, noise, extra)
        state = RunState(resolve(opts, {}, {}), load_text_classes())
        try:
            return judged(state, cases)
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
    print(f"{mode:<8} {subset:<6} {name:<11} today {row['today']}/{n}  sweep {row['sweep']}/{n}"
          f"  undetermined {row['undetermined']}/{n}  GPU {row['gpu_today']:.0f} -> "
          f"{row['gpu_sweep']:.0f} s  extra {row['extra']:.1f}",
          flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--time-scale", type=float, default=0.05)
    parser.add_argument("--noise", type=float, default=0.03)
    parser.add_argument("--subsets", default="sweep,smoke,ab",
                        help="which of sweep, smoke (baseline mode) and ab to run")
    args = parser.parse_args()
    started, rows = time.perf_counter(), []
    with SimProcess("kimi-k26-ddtree", args.time_scale, seed=1) as sim:
        for subset, cases in (("sweep", SWEEP), ("smoke", SMOKE)):
            if subset not in args.subsets:
                continue
            for name, extra in SCENARIOS.items():
                runs = [baseline_run(sim.url, cases, args.noise, extra) for _ in range(args.runs)]
                rows.append(summarise("baseline", subset, name, runs))
    if "ab" not in args.subsets:
        return _write(args, rows, started)
    with SimProcess("kimi-k26-ddtree", args.time_scale, seed=2) as prod, \
            SimProcess("kimi-k26-ddtree", args.time_scale, seed=3) as cand:
        for name, extra in SCENARIOS.items():
            faults(prod.url, args.noise, {})
            faults(cand.url, args.noise, extra)
            runs = [ab_run(cand.url, prod.url, SMOKE) for _ in range(args.runs)]
            rows.append(summarise("A/B", "smoke", name, runs))
    _write(args, rows, started)


def _write(args: argparse.Namespace, rows: list[dict[str, Any]], started: float) -> None:
    print(f"wall {time.perf_counter() - started:.0f} s")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"sweep_sim_check_{args.subsets.replace(',', '_')}.json").write_text(json.dumps(
        {"runs": args.runs, "time_scale": args.time_scale, "noise": args.noise, "rows": rows},
        indent=2) + "\n")


if __name__ == "__main__":
    main()
