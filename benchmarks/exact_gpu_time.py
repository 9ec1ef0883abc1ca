"""GPU time of a sweep with exact acceptance vs today's statistics, at the same step-time power.

Against one simulator process (incident profile), through the run machinery itself
(:class:`specperf.plugin.runstate.RunState`, adaptive repeats and verdicts as in pytest):

1. a baseline run (--update-baselines: 5 repeats per case), with reproducible prompts;
2. per scenario, two judged sweeps: **exact** (the baseline's prompts, /flush_cache before
   each request, per-prompt verify steps compared) and **today** (random nonces: the same
   run with the prompt plan forced to random, so acceptance is judged by statistics only).

Step time is judged by the same rules in both modes (decide_repeats on tok/s, decode tok/s
and step time; only avg commit leaves the repeat rule when it is settled exactly), so the
step-time power is the same: the ``step +12 %`` scenario shows it. GPU time is the
simulator's ground truth (prefill + steps per foreground request, /_sim/truth) at time
scale 1, warm-ups included.

    python benchmarks/exact_gpu_time.py [--time-scale 0.05] [--repeats 3]

Writes benchmarks/results/exact_gpu_time.json.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import httpx

from specperf import (
    NotJudged,
    PromptPlan,
    RunState,
    SimProcess,
    SpecperfError,
    load_text_classes,
    resolve,
)

RESULTS = Path(__file__).resolve().parent / "results"
SCENARIOS = {"clean": {}, "acceptance -3 %": {"acceptance_mult": 0.97},
             "acceptance -8 %": {"acceptance_mult": 0.92},
             "step +12 %": {"step_time_mult": 1.12}}


def gpu_ms(url: str, since: int) -> tuple[float, int]:
    """Simulated ms and count of the foreground requests after the first ``since``."""
    data = httpx.get(f"{url}/_sim/truth", timeout=30, trust_env=False).json()
    mine = [r for r in data["requests"] if not r["background"]][since:]
    return sum(r["prefill_ms"] + sum(r["step_ms"]) for r in mine), len(mine)


def foreground(url: str) -> int:
    data = httpx.get(f"{url}/_sim/truth", timeout=30, trust_env=False).json()
    return sum(1 for r in data["requests"] if not r["background"])


def sweep(url: str, base_dir: Path, repeats: int, *, update: bool = False,
          exact: bool = True) -> dict[str, Any]:
    """One sweep through RunState; verdicts, GPU ms and requests."""
    cli = {"endpoint": url, "baseline_dir": str(base_dir), "deployment": "bench",
           "repeats": str(repeats), "update_baselines": update}
    settings = resolve(cli, {}, {})
    state = RunState(settings, load_text_classes())
    start = foreground(url)
    statuses: dict[str, str] = {}
    exacts: dict[str, str] = {}
    try:
        if not exact:
            state.started_session()
            state.prompts.plan = PromptPlan()  # today's random nonces: statistics only
        for case in state.cases:
            try:
                measured = state.measure(case, state.tolerances_for(case, {}))
            except SpecperfError as exc:
                statuses[case.id] = f"error: {exc}"
                continue
            entry = state.baseline_case(case)
            if isinstance(entry, NotJudged):
                continue
            verdict = state.judging.judge(measured, entry, {})[0]
            statuses[case.id] = verdict.status
            exacts[case.id] = (verdict.exact or {}).get("status", "")
        if update:
            state.update_baseline(clean=True)
    finally:
        state.close_session()
    ms, count = gpu_ms(url, start)
    return {"gpu_s": ms / 1000.0, "requests": count, "verdicts": statuses, "exact": exacts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-scale", type=float, default=0.05)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    out: dict[str, Any] = {"time_scale": args.time_scale, "repeats": args.repeats}
    with tempfile.TemporaryDirectory() as tmp, SimProcess("kimi-k26-ddtree",
                                                         args.time_scale) as sim:
        base = Path(tmp)
        out["baseline"] = sweep(sim.url, base, args.repeats, update=True)
        for name, faults in SCENARIOS.items():
            httpx.post(f"{sim.url}/_sim/reset", trust_env=False).raise_for_status()
            httpx.post(f"{sim.url}/_sim/faults", json=faults, trust_env=False)
            out[name] = {mode: sweep(sim.url, base, args.repeats, exact=mode == "exact")
                         for mode in ("exact", "today")}
            for mode, got in out[name].items():
                failed = sum(1 for v in got["verdicts"].values() if v == "fail")
                print(f"{name:16s} {mode:6s} GPU {got['gpu_s']:7.1f} s  requests "
                      f"{got['requests']:3d}  failed {failed}/{len(got['verdicts'])}", flush=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "exact_gpu_time.json").write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
