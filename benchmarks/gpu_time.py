"""GPU time per verdict at the incident's physics: what a sweep and the smoke subset cost.

Runs the suite against the simulator (incident profile) three times, like a deployment does:

1. a baseline run (decide_repeats without a baseline, as --update-baselines);
2. a clean run judged against it (adaptive repeats: decide_repeats with the baseline);
3. a run with an injected step-time regression (+20 %, ``step_time_mult``), judged the same
   way, so confirmation repeats show.

Server time is the simulator's own ground truth per request (prefill + the sum of its step
durations, /_sim/truth), in simulated milliseconds, i.e. at time scale 1: what the real box
would spend, free of this machine's wall-clock noise. Warm-ups count (they occupy the GPU);
probe and /tokenize calls are negligible and not counted. Fixed-repeat strategies are priced
from the same per-request times; adaptive repeats under per-request noise come from
benchmarks/results/detection_power.json when it exists.

    python benchmarks/gpu_time.py [--time-scale 0.05]

Smoke subset: the cases of perf_tests/test_smoke.py (reasoning and padding at 3333,
padding at 13). Writes benchmarks/results/gpu_time.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

from specperf import (
    DEFAULT_TOLERANCES,
    Case,
    CaseBaseline,
    PerfSession,
    RepeatDecision,
    decide_repeats,
    judge_case,
    resolve,
)

RESULTS = Path(__file__).resolve().parent / "results"
SMOKE = ("reasoning-ctx3333", "padding-ctx3333", "padding-ctx13")


def server_ms(url: str, count: int) -> list[float]:
    """Simulated ms (time scale 1) of the last ``count`` foreground requests."""
    data = httpx.get(f"{url}/_sim/truth", timeout=30, trust_env=False).json()
    mine = [r for r in data["requests"] if not r["background"]][-count:]
    return [r["prefill_ms"] + sum(r["step_ms"]) for r in mine]


def one_pass(session: PerfSession, cases: Sequence[Case],
             bases: Mapping[str, CaseBaseline] | None) -> dict[str, Any]:
    """Measure every case; per case: repeats, per-request server ms, verdict."""
    s = session.settings
    out: dict[str, Any] = {}
    for case in cases:
        base = bases.get(case.id) if bases else None

        def decide(values: Mapping[str, Sequence[float]],
                   b: CaseBaseline | None = base) -> RepeatDecision:
            return decide_repeats(values, b, DEFAULT_TOLERANCES, min_repeats=s.repeats,
                                  max_repeats=s.max_repeats)

        m = session.measure(case, decide)
        times = server_ms(session.url, len(m.samples))
        status = judge_case(case.id, m.summaries(), base, DEFAULT_TOLERANCES).status \
            if base else "baseline"
        out[case.id] = {"repeats": len(m.measured), "warmup": len(m.samples) - len(m.measured),
                        "request_ms": statistics.fmean(times[-len(m.measured):]),
                        "server_ms": sum(times), "status": status,
                        "summaries": m.summaries()}
    return out


def run(time_scale: float) -> dict[str, Any]:
    settings = resolve({"sim_time_scale": str(time_scale)}, {}, {})
    cases = [Case(tc, ctx, settings.output_tokens) for tc in settings.text_classes
             for ctx in settings.contexts]
    session = PerfSession(settings)
    try:
        session.start()
        baseline = one_pass(session, cases, None)
        bases = {cid: CaseBaseline(c.text_class, c.context, c.output_tokens,
                                   baseline[cid]["summaries"], {})
                 for cid, c in ((c.id, c) for c in cases)}
        clean = one_pass(session, cases, bases)
        httpx.post(f"{session.url}/_sim/faults", json={"step_time_mult": 1.2}, timeout=30,
                   trust_env=False).raise_for_status()
        regressed = one_pass(session, cases, bases)
    finally:
        session.close()
    for p in (baseline, clean, regressed):
        for row in p.values():
            row.pop("summaries")
    return {"time_scale": time_scale, "warmup": settings.warmup, "repeats": settings.repeats,
            "max_repeats": settings.max_repeats, "baseline": baseline, "clean": clean,
            "regressed": regressed}


def strategies(result: dict[str, Any], noise_repeats: Mapping[str, float]
               ) -> list[dict[str, Any]]:
    """GPU seconds of a full sweep and of the smoke subset under each repeat strategy."""
    per_request = {cid: r["request_ms"] for cid, r in result["clean"].items()}
    warm = result["warmup"]

    def cost(repeats: Mapping[str, float], ids: Sequence[str]) -> float:
        return sum((warm + repeats[c]) * per_request[c] for c in ids) / 1000.0

    def measured(p: str) -> dict[str, float]:
        return {c: float(r["repeats"]) for c, r in result[p].items()}

    rows = [("fixed 3 (the minimum, no adaptivity)", {c: 3.0 for c in per_request}),
            (f"fixed {result['max_repeats']} (the bound everywhere)",
             {c: float(result["max_repeats"]) for c in per_request}),
            ("adaptive, clean run (simulator, ~0.1% noise)", measured("clean")),
            ("adaptive, step +20% (confirmation)", measured("regressed"))]
    rows += [(f"adaptive, clean, {label}", {c: reps for c in per_request})
             for label, reps in noise_repeats.items()]
    return [{"strategy": name, "sweep_s": cost(reps, list(per_request)),
             "smoke_s": cost(reps, SMOKE), "sweep_repeats": sum(reps.values()),
             "smoke_repeats": sum(reps[c] for c in SMOKE)} for name, reps in rows]


def noise_repeats() -> dict[str, float]:
    """Mean repeats of a clean case under per-request noise, from detection_power.json."""
    path = RESULTS / "detection_power.json"
    if not path.exists():
        return {}
    rows = json.loads(path.read_text())["rows"]
    return {f"{r['sigma']:.0%} request noise (model)": r["suite (default)"]["repeats"]
            for r in rows if r["kind"] == "none" and not r.get("outliers")}


def print_tables(result: dict[str, Any], table: list[dict[str, Any]]) -> None:
    print(f"per case at the incident's physics (time scale 1, simulated server time; "
          f"measured at {result['time_scale']:g})")
    print(f"{'case':<18} {'s/request':>9} {'base n':>6} {'clean n':>7} {'+20% n':>6} "
          f"{'+20% verdict':>12}")
    for cid, r in result["clean"].items():
        print(f"{cid:<18} {r['request_ms'] / 1000:9.2f} {result['baseline'][cid]['repeats']:6d} "
              f"{r['repeats']:7d} {result['regressed'][cid]['repeats']:6d} "
              f"{result['regressed'][cid]['status']:>12}")
    print(f"\nGPU time per verdict ({result['warmup']} warm-up per case included)")
    print(f"{'strategy':<46} {'sweep s':>8} {'repeats':>7} {'smoke s':>8} {'repeats':>7}")
    for row in table:
        print(f"{row['strategy']:<46} {row['sweep_s']:8.1f} {row['sweep_repeats']:7.1f} "
              f"{row['smoke_s']:8.1f} {row['smoke_repeats']:7.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--time-scale", type=float, default=0.05)
    args = parser.parse_args()
    result = run(args.time_scale)
    table = strategies(result, noise_repeats())
    print_tables(result, table)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "gpu_time.json").write_text(json.dumps({**result, "strategies": table},
                                                      indent=2) + "\n")


if __name__ == "__main__":
    main()
