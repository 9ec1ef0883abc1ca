"""The sweep-level test against today's per-case rule: detection, false alarms, GPU time.

Model (the calibrated one of benchmarks/detection_power.py, extended to every case of a
sweep). Per case, the incident physics of the default simulator profile: step time
``a + b · (context + output/2)`` (a 27.25 ms, b 17.72 ms per 1k tokens), avg commit from
the §4 cost table, prefill 0.15 ms per prompt token. A synthetic request has::

    step   = S · (1 + r_step) · max(0.2, 1 + σ·z) · (1 + 0.009·z')   (σ: per-request noise)
    commit = C · (1 − r_acc) · (1 + c·z'')                               (c: 0.17 %, calibrated)
    wall   = prefill + (N − 1)/commit · step,  tok_s = N / wall,  decode = commit / step

Every rule sees the same samples of one trial:

- **today**: the baseline as --update-baselines writes it (``--baseline-repeats`` 5, more
  while unstable); each case's repeats until ``decide_repeats`` stops (3–8), then
  ``judge_case``; the sweep alarms when any case fails.
- **sweep test**: the same per-case rule and verdicts, plus :func:`specperf.judge.sweep.judge_sweep`
  on the same requests, with sequential top-ups (``sweeprun.budget``: 4 per case, at least
  32 per sweep) against the baseline's stored requests; the sweep alarms
  when any case or the sweep test fails. "sweep test only" is its own alarm rate.
- **A/B**: both arms per case interleaved (``compare.pair_decider``), the per-case verdict
  against production's medians, the sweep test on the pairs (a top-up is a pair).

GPU seconds count every request at the incident's physics (time scale 1), warm-ups and both
arms of an A/B pair included; the baseline run is not counted (it is paid once).

    python benchmarks/sweep_power.py [--trials 2000] [--seed 1] [--only smoke]
        [--baseline-repeats N] [--medians-only] [--top-ups-per-case N] [--min-top-ups N]

``--medians-only`` judges against a baseline file written before baselines kept their
requests; ``--min-top-ups 0`` drops the budget floor (the per-case budget only).

Writes benchmarks/results/sweep_power.json.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from specperf.baselines.store import CaseBaseline
from specperf.core.limits import DEFAULT_TOLERANCES
from specperf.core.stats import summarize
from specperf.judge.ab import pair_decider
from specperf.judge.sweep import CaseData, judge_sweep
from specperf.judge.verdict import judge_case
from specperf.measure.repeats import decide_repeats
from specperf.plan.workload import Case
from specperf.plugin import sweeprun
from specperf.plugin.sweeprun import budget
from specperf.settings.config import Settings

RESULTS = Path(__file__).resolve().parent / "results"
A_MS, B_MS, PREFILL_MS_PER_TOKEN, TOKENS = 27.25, 0.01772, 0.15, 600
# GPU seconds per request at the incident's physics (docs/benchmarks.md §4).
GPU_S = {("padding", 13): 4.16, ("padding", 1663): 5.38, ("padding", 3333): 7.45,
         ("padding", 5553): 10.83, ("reasoning", 13): 4.18, ("reasoning", 1663): 12.62,
         ("reasoning", 3333): 19.51, ("reasoning", 5553): 27.93}
SWEEP = tuple(GPU_S)
SMOKE = (("reasoning", 3333), ("padding", 3333), ("padding", 13))
STEP_SD, COMMIT_SD = 0.009, 0.0017  # calibrated residual per-request spread (§3)
METRICS = ("tok_s", "decode_tok_s", "step_ms", "avg_commit")
MIN_R, MAX_R, WARMUP = 3, 8, 1
BASE_DEFAULT = Settings().baseline_repeats
BASE_R = [BASE_DEFAULT]  # --baseline-repeats (the setting's default)
TOP_UPS_PER_CASE = [4]  # the sweep test's budget of extra requests, per case of the sweep
# (and at least sweeprun.MIN_TOP_UPS per sweep, as sweeprun.budget takes it)
STORE_VALUES = [True]  # the baseline keeps per-request values (False: medians only, as before)
# The sweep test's error rates and sizes (judge_sweep's keywords; defaults: judge/sweep.py).
SWEEP_KW: dict[str, float] = {}


@dataclass(frozen=True)
class Physics:
    case: Case
    step_ms: float
    commit: float
    prefill_s: float


def physics(text_class: str, context: int) -> Physics:
    """The case's step and commit, the commit solved from its §4 cost per request."""
    step = A_MS + B_MS * (context + TOKENS / 2)
    prefill = PREFILL_MS_PER_TOKEN * context / 1000
    steps = (GPU_S[(text_class, context)] - prefill) / (step / 1000)
    return Physics(Case(text_class, context, TOKENS), step, (TOKENS - 1) / steps, prefill)


@dataclass(frozen=True)
class Condition:
    sigma: float
    step: float = 0.0  # relative rise of step time
    acc: float = 0.0  # relative fall of avg commit
    commit_sd: float = COMMIT_SD


class Stream:
    """Endless synthetic requests of one case under one condition."""

    def __init__(self, ph: Physics, cond: Condition, rng: np.random.Generator) -> None:
        self.ph, self.cond, self.rng = ph, cond, rng

    def __iter__(self) -> Iterator[dict[str, float]]:
        return self

    def __next__(self) -> dict[str, float]:
        ph, c, z = self.ph, self.cond, self.rng.standard_normal(3)
        step = ph.step_ms * (1 + c.step) * max(0.2, 1 + c.sigma * z[0]) * (1 + STEP_SD * z[1])
        commit = ph.commit * (1 - c.acc) * (1 + c.commit_sd * z[2])
        wall = ph.prefill_s + (TOKENS - 1) / commit * step / 1000
        return {"tok_s": TOKENS / wall, "decode_tok_s": 1000 * commit / step, "step_ms": step,
                "avg_commit": commit, "wall_s": wall}


def values(samples: Sequence[dict[str, float]]) -> dict[str, list[float]]:
    return {m: [s[m] for s in samples] for m in METRICS}


def take(stream: Stream, decide: Callable[[dict[str, list[float]]], str], first: int,
         bound: int) -> list[dict[str, float]]:
    """Measurer.measure's loop: ``first`` requests, then until ``decide`` stops (bounded)."""
    got = [next(stream) for _ in range(first)]
    while len(got) < bound and decide(values(got)) == "more":
        got.append(next(stream))
    return got


def baseline(stream: Stream, case: Case) -> CaseBaseline:
    got = take(stream, lambda v: decide_repeats(v, None, DEFAULT_TOLERANCES, min_repeats=BASE_R[0],
                                                max_repeats=max(MAX_R, BASE_R[0])).action,
               BASE_R[0], max(MAX_R, BASE_R[0]))
    vals = values(got)
    return CaseBaseline(case.text_class, case.context, TOKENS,
                        {m: summarize(v) for m, v in vals.items()}, {},
                        values=vals if STORE_VALUES[0] else {})


def baseline_trial(cases: Sequence[Physics], cond: Condition, seed: int,
                   budget: int, repeats: int) -> dict[str, Any]:
    """One sweep against a stored baseline: today's rule and the sweep test, same requests."""
    data, fails, gpu, requests = [], 0, 0.0, 0
    for i, ph in enumerate(cases):
        before = Stream(ph, Condition(cond.sigma, commit_sd=cond.commit_sd),
                        np.random.default_rng([seed, i, 0]))
        now = Stream(ph, cond, np.random.default_rng([seed, i, 1]))
        base = baseline(before, ph.case)
        got = take(now, lambda v, b=base: decide_repeats(  # type: ignore[misc]
            v, b, DEFAULT_TOLERANCES, min_repeats=repeats, max_repeats=MAX_R).action,
            repeats, MAX_R)
        summaries = {m: summarize(v) for m, v in values(got).items()}
        fails += judge_case(ph.case.id, summaries, base, DEFAULT_TOLERANCES).status == "fail"
        cost = sum(s["wall_s"] for s in got) / len(got)
        gpu += (WARMUP + len(got)) * cost
        requests += WARMUP + len(got)
        data.append((CaseData(ph.case, values(got), dict(base.metrics), None, cost,
                              base_requests=dict(base.values) or None), now))
    return _conclude(data, fails, gpu, budget, requests)


def ab_trial(cases: Sequence[Physics], cond: Condition, seed: int, budget: int,
             repeats: int) -> dict[str, Any]:
    """One A/B sweep: interleaved pairs per case, production as the reference."""
    data, fails, gpu, requests = [], 0, 0.0, 0
    decide = pair_decider(DEFAULT_TOLERANCES, repeats, MAX_R)
    for i, ph in enumerate(cases):
        prod = Stream(ph, Condition(cond.sigma, commit_sd=cond.commit_sd),
                      np.random.default_rng([seed, i, 0]))
        cand = Stream(ph, cond, np.random.default_rng([seed, i, 1]))
        a, b = [next(cand) for _ in range(repeats)], [next(prod) for _ in range(repeats)]
        while len(a) < MAX_R and decide(values(a), values(b)).action == "more":
            a.append(next(cand))
            b.append(next(prod))
        base = CaseBaseline(ph.case.text_class, ph.case.context, TOKENS,
                            {m: summarize(v) for m, v in values(b).items()}, {})
        summaries = {m: summarize(v) for m, v in values(a).items()}
        fails += judge_case(ph.case.id, summaries, base, DEFAULT_TOLERANCES).status == "fail"
        cost = sum(s["wall_s"] for s in a + b) / len(a)
        gpu += (WARMUP + len(a)) * cost
        requests += 2 * (WARMUP + len(a))
        data.append((CaseData(ph.case, values(a), dict(base.metrics), values(b), cost),
                     _Pair(cand, prod)))
    return _conclude(data, fails, gpu, budget, requests)


class _Pair:
    def __init__(self, cand: Stream, prod: Stream) -> None:
        self.cand, self.prod = cand, prod


def _conclude(data: list[tuple[CaseData, Any]], fails: int, gpu: float,
              budget: int, requests: int) -> dict[str, Any]:
    sources = {d.case.id: src for d, src in data}

    def more(d: CaseData) -> None:
        src = sources[d.case.id]
        if isinstance(src, _Pair):
            _extend(d.run, next(src.cand))
            _extend(d.base_values or {}, next(src.prod))
        else:
            _extend(d.run, next(src))

    result = judge_sweep([d for d, _ in data], "sweep", more, budget, **SWEEP_KW)
    paired = any(d.base_values is not None for d, _ in data)
    return {"today": fails > 0, "sweep_only": result.regressed,
            "sweep": fails > 0 or result.regressed, "gpu_today": gpu,
            "noted": result.verdict().status == "noted",
            "gpu_sweep": gpu + result.extra_s, "extra": result.extra,
            "requests": requests + result.extra * (2 if paired else 1),
            "power": {r.estimate.factor.key: r.power for r in result.results}}


def _extend(target: dict[str, list[float]], sample: dict[str, float]) -> None:
    for m in METRICS:
        target[m].append(sample[m])


MODES = {"baseline": baseline_trial, "A/B": ab_trial}
SCENARIOS = (("none", Condition(0.03)), ("step +5%", Condition(0.03, step=0.05)),
             ("commit -5%", Condition(0.03, acc=0.05)), ("step +2%", Condition(0.03, step=0.02)),
             ("commit -2%", Condition(0.03, acc=0.02)))


def row(mode: str, subset: str, repeats: int, name: str, cond: Condition, trials: int,
        seed: int) -> dict[str, Any]:
    cases = [physics(*c) for c in (SWEEP if subset == "sweep" else SMOKE)]
    fn = MODES[mode]
    runs = [fn(cases, cond, seed * 10**6 + t, budget(len(cases), TOP_UPS_PER_CASE[0]), repeats)
            for t in range(trials)]
    out: dict[str, Any] = {"mode": mode, "subset": subset, "repeats": repeats,
                           "scenario": name, "sigma": cond.sigma, "commit_sd": cond.commit_sd,
                           "trials": trials}
    for key in ("today", "sweep_only", "sweep"):
        out[key] = float(np.mean([r[key] for r in runs]))
    for key in ("noted", "gpu_today", "gpu_sweep", "extra", "requests"):
        out[key] = float(np.mean([r[key] for r in runs]))
    powers: dict[str, list[float]] = {}
    for r in runs:
        for k, v in r["power"].items():
            powers.setdefault(k, []).append(v)
    out["power"] = {k: float(np.mean(v)) for k, v in powers.items()}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--baseline-repeats", type=int, default=BASE_DEFAULT)
    parser.add_argument("--commit-sd", type=float, default=COMMIT_SD,
                        help="per-request spread of avg commit (0.0017 calibrated)")
    parser.add_argument("--medians-only", action="store_true",
                        help="baselines without per-request values (files written before)")
    parser.add_argument("--top-ups-per-case", type=int, default=sweeprun.TOP_UPS_PER_CASE)
    parser.add_argument("--min-top-ups", type=int, default=sweeprun.MIN_TOP_UPS,
                        help="the sweep's budget floor (0: per case only, as before)")
    for name in ("alpha", "beta", "tolerance", "effect"):
        parser.add_argument(f"--sweep-{name}", type=float, default=None,
                            help=f"the sweep test's {name} (default: judge/sweep.py's)")
    parser.add_argument("--only", choices=("smoke", "sweep"),
                        help="only the baseline smoke rows, or only the 8-case baseline rows")
    args = parser.parse_args()
    started = time.perf_counter()
    BASE_R[0] = args.baseline_repeats
    STORE_VALUES[0] = not args.medians_only
    TOP_UPS_PER_CASE[0] = args.top_ups_per_case
    sweeprun.MIN_TOP_UPS = args.min_top_ups
    SWEEP_KW.update({k: v for k in ("alpha", "beta", "tolerance", "effect")
                     if (v := getattr(args, f"sweep_{k}")) is not None})
    rows = []
    print(f"{'mode':<8} {'subset':<6} {'rep':>3} {'scenario':<11} {'today':>6} {'sweep':>6} "
          f"{'s.only':>6} {'noted':>6} {'GPU today':>9} {'GPU new':>8} {'extra':>5} "
          f"{'req':>5}  power")
    plan = [("baseline", "sweep", 3), ("baseline", "smoke", 3), ("A/B", "smoke", 3),
            ("A/B", "sweep", 3), ("baseline", "sweep", 2)]
    chosen = {None: plan, "smoke": plan[1:2], "sweep": plan[0:1]}[args.only]
    for mode, subset, repeats in chosen:
        for name, cond in SCENARIOS:
            cond = Condition(cond.sigma, cond.step, cond.acc, args.commit_sd)
            r = row(mode, subset, repeats, name, cond, args.trials, args.seed)
            rows.append(r)
            power = " ".join(f"{k} {v:.3f}" for k, v in r["power"].items())
            print(f"{mode:<8} {subset:<6} {repeats:>3} {name:<11} {r['today']:6.3f} "
                  f"{r['sweep']:6.3f} {r['sweep_only']:6.3f} {r['noted']:6.3f} "
                  f"{r['gpu_today']:9.0f} {r['gpu_sweep']:8.0f} {r['extra']:5.2f} "
                  f"{r['requests']:5.1f}  {power}", flush=True)
    print(f"wall {time.perf_counter() - started:.0f} s")
    RESULTS.mkdir(exist_ok=True)
    name = "sweep_power" + ("" if args.commit_sd == COMMIT_SD else f"_commit{args.commit_sd:g}") \
        + ("" if args.baseline_repeats == BASE_DEFAULT else f"_base{args.baseline_repeats}") \
        + ("_medians" if args.medians_only else "") \
        + ("" if args.only is None else f"_{args.only}") \
        + ("" if (args.top_ups_per_case, args.min_top_ups) == (sweeprun.TOP_UPS_PER_CASE,
                                                           sweeprun.MIN_TOP_UPS)
           else f"_topups{args.top_ups_per_case}-{args.min_top_ups}") + ".json"
    (RESULTS / name).write_text(json.dumps({"trials": args.trials, "rows": rows},
                                           indent=2) + "\n")


if __name__ == "__main__":
    main()
