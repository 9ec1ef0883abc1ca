"""How close the suite's figures are to the simulator's ground truth (/_sim/truth).

Profiles are drawn at random (a, b, acceptance knots, per-step noise 1-5 %, prefill cost) and
written to temporary TOML files. For each, the suite measures the default sweep as usual
(PerfSession, exactly what the pytest plugin runs); the truth of the same requests comes from
the simulator, per request:

- step_ms = mean of its step durations;
- avg_commit = (N - 1) / steps;
- decode_tok_s = (N - 1) / (sum(step_ms) / 1000);

then the median over the case's measured repeats, as the suite does. The fit (a, b) is least
squares of the truth's per-case step_ms against context + output/2, the suite's own x.

The step count is exact, so every step_ms error is the simulator's wall-clock split between
first_token_latency and decode: it sleeps to deadlines and CPU contention shifts when the first
token and the last step land. The "split" columns give that shift in wall milliseconds; it does
not shrink with the time scale, so its relative size does (use 0.1-0.2 on a busy machine).

    python benchmarks/accuracy.py [--profiles 6] [--seed 1] [--time-scale 0.1] [--repeats 3]

Writes benchmarks/results/accuracy.json. Goal: median |error| <= 1 %, worst <= 3 %.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from specperf import Case, PerfSession, fit_context, resolve

RESULTS = Path(__file__).resolve().parent / "results"
FIGURES = ("step_ms", "avg_commit", "decode_tok_s")
GOAL_MEDIAN, GOAL_WORST = 0.01, 0.03

PROFILE_TEMPLATE = """\
name = "{name}"
seed = {seed}

[model]
model_path = "specperf-sim/random-{name}"
served_model_name = "random"

[server]
speculative_algorithm = "DDTREE"
speculative_draft_model_path = "specperf-sim/random-drafter"
tp_size = 8
context_length = 65536

[physics]
a_ms = {a:.3f}
b_ms_per_token = {b:.6f}
c_ms = 2.0
noise = {noise:.4f}
prefill_ms = {prefill:.2f}
prefill_ms_per_token = {prefill_per_token:.4f}
window = 2048
max_commit = 16
commit_sd = {commit_sd:.2f}
rep_floor = 0.2

[physics.m_free]
n = [0, 2048]
mean = [{free0:.3f}, {free1:.3f}]

[physics.m_rep]
n = [0, 1600, 2048]
mean = [{rep0:.3f}, {rep1:.3f}, {rep2:.3f}]
"""


def random_profile(rng: random.Random, index: int) -> dict[str, Any]:
    """Physics drawn from ranges around real deployments (dense 70B to the incident's MoE)."""
    free0 = rng.uniform(3.0, 6.0)
    rep0 = rng.uniform(4.5, 6.0)
    return {
        "name": f"random-{index}", "seed": index, "a": rng.uniform(10.0, 45.0),
        "b": rng.uniform(0.004, 0.025), "noise": rng.uniform(0.01, 0.05),
        "prefill": rng.uniform(0.0, 30.0), "prefill_per_token": rng.uniform(0.05, 0.2),
        "commit_sd": rng.uniform(0.6, 1.2), "free0": free0,
        "free1": rng.uniform(2.0, min(free0, 4.0)), "rep0": rep0,
        "rep1": rng.uniform(rep0, 7.0), "rep2": rng.uniform(7.0, 8.5),
    }


def truth_of(url: str, count: int) -> list[dict[str, Any]]:
    """The last ``count`` foreground requests the simulator served."""
    data = httpx.get(f"{url}/_sim/truth", timeout=30, trust_env=False).json()
    mine = [r for r in data["requests"] if not r["background"]]
    return mine[-count:]


def true_figures(requests: list[dict[str, Any]]) -> dict[str, float]:
    """Per-request truth, then the median over requests (as the suite summarises)."""
    per = {"step_ms": [], "avg_commit": [], "decode_tok_s": []}  # type: dict[str, list[float]]
    for r in requests:
        n, steps = r["completion_tokens"], r["step_ms"]
        per["step_ms"].append(statistics.fmean(steps))
        per["avg_commit"].append((n - 1) / len(steps))
        per["decode_tok_s"].append((n - 1) / (sum(steps) / 1000.0))
    return {k: statistics.median(v) for k, v in per.items()}


def split_shift_ms(measured: Any, truth: list[dict[str, Any]], scale: float) -> list[float]:
    """Per request: measured decode wall time minus the truth's, in wall milliseconds."""
    out = []
    for sample, r in zip(measured, truth, strict=True):
        if sample.decode_s is not None:
            out.append(1000.0 * scale * (sample.decode_s - sum(r["step_ms"]) / 1000.0))
    return out


def measure_profile(path: Path, time_scale: float, repeats: int, contexts: str
                    ) -> dict[str, Any]:
    settings = resolve({"sim_profile": str(path), "sim_time_scale": str(time_scale),
                        "repeats": str(repeats), "max_repeats": str(3 * repeats),
                        "contexts": contexts}, {}, {})
    session = PerfSession(settings)
    rows, shifts = [], []
    try:
        session.start()
        for text_class in settings.text_classes:
            for context in settings.contexts:
                case = Case(text_class, context, settings.output_tokens)
                m = session.measure(case)
                truth = truth_of(session.url, len(m.samples))[settings.warmup:]
                shifts += split_shift_ms(m.measured, truth, time_scale)
                rows.append(_row(case, m, truth))
    finally:
        session.close()
    return {"rows": rows, "fits": _fits(rows, settings.text_classes), "split_ms": shifts}


def _row(case: Case, m: Any, truth: list[dict[str, Any]]) -> dict[str, Any]:
    true = true_figures(truth)
    row: dict[str, Any] = {"case": case.id, "text_class": case.text_class,
                           "x": m.mean_context}
    for fig in FIGURES:
        s = m.summary(fig)
        assert s is not None, f"{case.id}: no {fig}"
        row[fig] = s.median
        row[f"{fig}_true"] = true[fig]
        row[f"{fig}_err"] = s.median / true[fig] - 1.0
    return row


def _fits(rows: list[dict[str, Any]], classes: tuple[str, ...]) -> list[dict[str, Any]]:
    out = []
    for name in classes:
        mine = [r for r in rows if r["text_class"] == name]
        suite = fit_context([(r["x"], r["step_ms"]) for r in mine])
        true = fit_context([(r["x"], r["step_ms_true"]) for r in mine])
        if suite is None or true is None:
            continue
        out.append({"text_class": name, "a": suite.a_ms, "a_true": true.a_ms,
                    "a_err": suite.a_ms / true.a_ms - 1.0, "b": suite.b_ms_per_token,
                    "b_true": true.b_ms_per_token,
                    "b_err": suite.b_ms_per_token / true.b_ms_per_token - 1.0})
    return out


def summarise(profiles: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Median and worst |relative error| of each figure over every case (or fit) drawn."""
    errors: dict[str, list[float]] = {f: [] for f in (*FIGURES, "fit_a", "fit_b")}
    for p in profiles:
        for r in p["rows"]:
            for fig in FIGURES:
                errors[fig].append(abs(r[f"{fig}_err"]))
        for f in p["fits"]:
            errors["fit_a"].append(abs(f["a_err"]))
            errors["fit_b"].append(abs(f["b_err"]))
    return {k: {"n": len(v), "median": float(np.median(v)), "worst": float(max(v))}
            for k, v in errors.items() if v}


def run(count: int, seed: int, time_scale: float, repeats: int, contexts: str
        ) -> dict[str, Any]:
    rng = random.Random(seed)
    profiles = []
    with tempfile.TemporaryDirectory(prefix="specperf-accuracy-") as tmp:
        for i in range(count):
            params = random_profile(rng, seed * 1000 + i)
            path = Path(tmp) / f"{params['name']}.toml"
            path.write_text(PROFILE_TEMPLATE.format(**params), encoding="utf-8")
            result = measure_profile(path, time_scale, repeats, contexts)
            profiles.append({"params": params, **result})
            print(f"  {params['name']}: a={params['a']:.1f} ms, b={1000 * params['b']:.1f} "
                  f"ms/1k, noise {100 * params['noise']:.1f}%: worst step error "
                  f"{100 * max(abs(r['step_ms_err']) for r in result['rows']):.2f}%",
                  flush=True)
    shifts = [abs(s) for p in profiles for s in p["split_ms"]]
    return {"seed": seed, "time_scale": time_scale, "repeats": repeats, "contexts": contexts,
            "profiles": profiles, "summary": summarise(profiles),
            "split_ms": {"median": float(np.median(shifts)), "p95": float(np.percentile(
                shifts, 95)), "worst": float(max(shifts))}}


def print_table(result: dict[str, Any]) -> None:
    s = result["summary"]
    print(f"\n{len(result['profiles'])} random profiles, time scale {result['time_scale']:g}, "
          f"{result['repeats']} repeats + 1 warm-up per case, contexts {result['contexts']}")
    print(f"{'figure':<14} {'n':>4} {'median |err|':>13} {'worst |err|':>12}  goal")
    for name, v in s.items():
        ok = v["median"] <= GOAL_MEDIAN and v["worst"] <= GOAL_WORST
        print(f"{name:<14} {v['n']:4d} {100 * v['median']:12.2f}% {100 * v['worst']:11.2f}%  "
              f"{'met' if ok else 'MISSED'}")
    sp = result["split_ms"]
    print(f"wall-clock split shift (measured decode - true, wall ms per request): median "
          f"{sp['median']:.2f}, p95 {sp['p95']:.2f}, worst {sp['worst']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profiles", type=int, default=6)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--time-scale", type=float, default=0.1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--contexts", default="13,1663,3333,5553")
    args = parser.parse_args()
    result = run(args.profiles, args.seed, args.time_scale, args.repeats, args.contexts)
    print_table(result)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "accuracy.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
