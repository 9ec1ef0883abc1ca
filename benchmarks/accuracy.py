"""How close the suite's figures are to the simulator's ground truth (/_sim/truth).

For each case the suite measures as usual (PerfSession, exactly what the pytest plugin
runs); the truth of the same requests comes from the simulator: step_ms = mean of its exact
step durations, avg_commit = (N - 1) / steps. Errors are of the per-case medians.

    python benchmarks/accuracy.py [--profile alt-eagle3] [--time-scale 0.05] [--repeats 3]

Also reports the sweep's wall time and its ratio to the summed server-side request time
(e2e_latency): how much of the GPU's time the suite wastes on itself.
Writes benchmarks/results/accuracy-<profile>.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import httpx

from specperf.config import resolve
from specperf.session import PerfSession
from specperf.workload import Case

RESULTS = Path(__file__).resolve().parent / "results"


def truth_of(url: str, count: int) -> list[dict[str, Any]]:
    """The last ``count`` foreground requests the simulator served."""
    data = httpx.get(f"{url}/_sim/truth", timeout=30).json()
    mine = [r for r in data["requests"] if not r["background"]]
    return mine[-count:]


def true_figures(requests: list[dict[str, Any]]) -> tuple[float, float]:
    steps = [statistics.fmean(r["step_ms"]) for r in requests]
    commits = [(r["completion_tokens"] - 1) / len(r["step_ms"]) for r in requests]
    return statistics.median(steps), statistics.median(commits)


def run(profile: str, time_scale: float, repeats: int, contexts: str) -> dict[str, Any]:
    settings = resolve({"sim_profile": profile, "sim_time_scale": str(time_scale),
                        "repeats": str(repeats), "max_repeats": str(3 * repeats),
                        "contexts": contexts}, {}, {})
    session = PerfSession(settings)
    started = time.perf_counter()
    rows = []
    server_s = 0.0
    try:
        session.start()
        for text_class in settings.text_classes:
            for context in settings.contexts:
                case = Case(text_class, context, settings.output_tokens)
                m = session.measure(case)
                server_s += sum(s.raw["e2e_s"] for s in m.samples)
                truth = truth_of(session.url, len(m.samples))[settings.warmup:]
                step_true, commit_true = true_figures(truth)
                step = m.summary("step_ms")
                commit = m.summary("avg_commit")
                assert step is not None and commit is not None
                rows.append({"case": case.id, "step_ms": step.median, "step_true": step_true,
                             "step_err": step.median / step_true - 1,
                             "avg_commit": commit.median, "commit_true": commit_true,
                             "commit_err": commit.median / commit_true - 1})
    finally:
        session.close()
    wall = time.perf_counter() - started
    return {"profile": profile, "time_scale": time_scale, "repeats": repeats, "rows": rows,
            "wall_s": wall, "server_s": server_s, "ratio": wall / server_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="alt-eagle3")
    parser.add_argument("--time-scale", type=float, default=0.05)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--contexts", default="13,1663,3333,5553")
    args = parser.parse_args()
    result = run(args.profile, args.time_scale, args.repeats, args.contexts)
    print(f"profile {result['profile']}, time scale {result['time_scale']:g}, "
          f"{result['repeats']} repeats + 1 warm-up per case")
    print(f"{'case':<20} {'step ms':>8} {'truth':>8} {'err':>7} {'commit':>7} {'truth':>7} "
          f"{'err':>7}")
    for r in result["rows"]:
        print(f"{r['case']:<20} {r['step_ms']:8.2f} {r['step_true']:8.2f} "
              f"{100 * r['step_err']:+6.2f}% {r['avg_commit']:7.3f} {r['commit_true']:7.3f} "
              f"{100 * r['commit_err']:+6.2f}%")
    worst_step = max(abs(r["step_err"]) for r in result["rows"])
    worst_commit = max(abs(r["commit_err"]) for r in result["rows"])
    print(f"worst |error|: step {100 * worst_step:.2f}%, avg commit {100 * worst_commit:.2f}%")
    print(f"sweep wall {result['wall_s']:.1f} s vs server-side request time "
          f"{result['server_s']:.1f} s: ratio {result['ratio']:.3f}")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"accuracy-{args.profile}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
