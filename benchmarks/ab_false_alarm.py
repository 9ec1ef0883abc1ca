"""A/B mode's false alarms and its power, against pairs of simulators.

Identical profiles with per-request step-time noise (``request_noise``, the noise that
survives averaging over a request's steps) must pass every time; a candidate whose steps
are 12% slower must fail on step time. Each run is the smoke subset, judged exactly as the
plugin judges it (RunState: interleaved pairs, adaptive repeats, judge_case).

    python benchmarks/ab_false_alarm.py [--runs 20] [--noise 0.03] [--time-scale 0.05]

Writes benchmarks/results/ab_false_alarm.json.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import httpx

from specperf import (
    Case,
    NotJudged,
    RunState,
    SimProcess,
    SpecperfError,
    load_text_classes,
    resolve,
)

RESULTS = Path(__file__).resolve().parent / "results"
SMOKE = (("reasoning", 3333), ("padding", 3333), ("padding", 13))


def one_run(candidate: str, production: str, output_tokens: int) -> dict[str, Any]:
    settings = resolve({"endpoint": candidate, "compare_endpoint": production,
                        "output_tokens": str(output_tokens)}, {}, {})
    state = RunState(settings, load_text_classes(), {})
    verdicts, repeats = [], []
    try:
        for text_class, context in SMOKE:
            case = Case(text_class, context, output_tokens)
            tolerances = state.tolerances_for(case, {})
            try:
                measured = state.measure(case, tolerances)
            except SpecperfError as exc:
                verdicts.append({"case": case.id, "status": "error", "message": str(exc)})
                continue
            base = state.baseline_case(case)
            assert not isinstance(base, NotJudged)
            verdict = state.judging.judge(measured, base, {})[0]
            repeats.append(len(measured.measured))
            verdicts.append({"case": case.id, "status": verdict.status,
                             "message": verdict.message})
    finally:
        state.close_session()
    return {"verdicts": verdicts, "repeats": repeats,
            "failed": any(v["status"] == "fail" for v in verdicts),
            "errored": any(v["status"] == "error" for v in verdicts)}


def scenario(runs: int, noise: float, scale: float, step_mult: float,
             output_tokens: int) -> dict[str, Any]:
    with SimProcess("kimi-k26-ddtree", scale, seed=1) as prod, \
            SimProcess("kimi-k26-ddtree", scale, seed=2) as cand:
        for sim, mult in ((prod, 1.0), (cand, step_mult)):
            httpx.post(f"{sim.url}/_sim/faults", json={"request_noise": noise,
                                                      "step_time_mult": mult}).raise_for_status()
        results = [one_run(cand.url, prod.url, output_tokens) for _ in range(runs)]
    failed = sum(r["failed"] for r in results)
    errored = sum(r["errored"] for r in results)
    reps = [n for r in results for n in r["repeats"]]
    return {"runs": runs, "noise": noise, "step_time_mult": step_mult, "failed": failed,
            "errored": errored, "passed": runs - failed - errored,
            "mean_repeats": sum(reps) / max(len(reps), 1), "results": results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--noise", type=float, default=0.03)
    parser.add_argument("--time-scale", type=float, default=0.05)
    parser.add_argument("--output-tokens", type=int, default=600)
    args = parser.parse_args()
    started = time.perf_counter()
    out = {"same": scenario(args.runs, args.noise, args.time_scale, 1.0, args.output_tokens),
           "slower": scenario(max(3, args.runs // 4), args.noise, args.time_scale, 1.12,
                              args.output_tokens)}
    print(f"A/B, smoke subset, per-request step noise {args.noise:.0%}, time scale "
          f"{args.time_scale:g}, {args.output_tokens} output tokens")
    print(f"{'scenario':<22} {'runs':>5} {'passed':>7} {'failed':>7} {'errored':>8} "
          f"{'repeats/case':>13}")
    for name, label in (("same", "identical profiles"), ("slower", "candidate steps +12%")):
        r = out[name]
        print(f"{label:<22} {r['runs']:>5} {r['passed']:>7} {r['failed']:>7} "
              f"{r['errored']:>8} {r['mean_repeats']:>13.1f}")
    print(f"wall {time.perf_counter() - started:.0f} s")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "ab_false_alarm.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
