"""How often `specperf bisect` names the right culprit, and what it costs: many simulated
deploy histories, each bisected by the tool's own search and classification code
(``specperf.bisect.search``, ``specperf.bisect.classify``) against a modelled box.

The model (per version, per case, per request), the incident's physics as
benchmarks/sweep_power.py takes them: step time ``a + b · (context + output/2)`` (a 27.25 ms,
b 17.72 ms per 1k tokens), avg commit 7.85 on the padding text and 2.9 on reasoning, prefill
0.15 ms per prompt token. Each request draws

    step   = S · m_step · max(0.2, 1 + σ·z) · (1 + σ_s/√steps · z')     σ: per request (3 %)
    commit = (C + Δ_commit) · (1 + c·z'')                                c: per request (1 %)
    ttft   = P · m_prefill · (1 + σ·z''')
    GPU s  = ttft + (N − 1)/commit · step

The same night throughout (a bisect measures every version tonight on one box), so no run
term. Histories (``--versions``, 32 by default; the good end first, the bad end last):

- **step**: step time +5 % from a culprit drawn uniformly among versions 1 … n−1;
- **acceptance**: avg commit −0.2 tokens per step from a uniformly drawn culprit;
- **two**: both, at two distinct drawn versions (each factor must name its own);
- **none**: nothing changes (the bisect must say "not reproduced");
- **step+skips**: the step history with each middle version failing to deploy with
  probability ``--fail-rate`` (default 0.1). When skipped versions sit right before the
  culprit (or are the culprit), no bisect can tell which is first bad: the answer is right
  when it names the range of the skipped versions and the first bad after them and the
  culprit is in it, as ``git bisect`` answers; ``exact`` counts only a culprit named alone.

A bisect is right when its status is what the history calls for and every bisected factor
is exactly a changed one, named at its culprit. Rates carry 95 % Wilson intervals.

    python benchmarks/bisect_power.py --trials 500 --seed 20261203
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specperf.bisect.deploylog import Version
from specperf.bisect.search import DeployFailed, Measured, Outcome, Plan, Search

RESULTS = Path(__file__).resolve().parent / "results"
A_MS, B_MS_PER_K, PREFILL_MS_PER_TOKEN = 27.25, 17.72, 0.15
COMMIT = {"padding": 7.85, "reasoning": 2.9}
CONTEXTS = (1663, 3333)
SCENARIOS = ("step", "acceptance", "two", "none", "step+skips")


@dataclass(frozen=True)
class Truth:
    """One version's real effect on the box."""

    step_mult: float = 1.0
    commit_delta: float = 0.0
    prefill_mult: float = 1.0
    fails: bool = False


class ModelLab:
    """A box whose measurements follow the module docstring's model."""

    def __init__(self, truths: list[Truth], rng: random.Random, args: argparse.Namespace
                 ) -> None:
        self.truths, self.rng, self.args = truths, rng, args
        self.cases = [(c, ctx) for c in COMMIT for ctx in CONTEXTS]

    def deploy(self, version: Version) -> None:
        if self.truths[version.index].fails:
            raise DeployFailed("the deploy command exited 1")

    def _request(self, truth: Truth, text: str, context: int) -> dict[str, float]:
        a = self.args
        n = a.output_tokens
        step = (A_MS + B_MS_PER_K * (context + n / 2) / 1000) * truth.step_mult
        commit = (COMMIT[text] + truth.commit_delta) * (1 + a.commit_sd * self.rng.gauss(0, 1))
        steps = max(1.0, (n - 1) / commit)
        step *= max(0.2, 1 + a.request_noise * self.rng.gauss(0, 1))
        step *= 1 + a.step_noise / math.sqrt(steps) * self.rng.gauss(0, 1)
        ttft = PREFILL_MS_PER_TOKEN * context * truth.prefill_mult
        ttft *= max(0.2, 1 + a.request_noise * self.rng.gauss(0, 1))
        return {"step_ms": step, "avg_commit": commit, "ttft_ms": ttft,
                "gpu_s": (ttft + steps * step) / 1000}

    def measure(self, version: Version, repeats: int) -> Measured:
        truth = self.truths[version.index]
        figures: dict[str, dict[str, list[float]]] = {}
        gpu_s = 0.0
        for text, context in self.cases:
            rows = [self._request(truth, text, context) for _ in range(repeats + 1)]
            gpu_s += sum(r["gpu_s"] for r in rows)  # the first is the warm-up: paid, unused
            figures[f"{text}-ctx{context}"] = {
                m: [r[m] for r in rows[1:]] for m in ("step_ms", "avg_commit", "ttft_ms")}
        return Measured(figures, gpu_s)


def history(kind: str, n: int, rng: random.Random, args: argparse.Namespace
            ) -> tuple[list[Truth], dict[str, int]]:
    """The truths of ``n`` versions and each changed factor's culprit index."""
    culprits: dict[str, int] = {}
    if kind in ("step", "step+skips", "two"):
        culprits["step time"] = rng.randint(1, n - 1)
    if kind in ("acceptance", "two"):
        while True:
            at = rng.randint(1, n - 1)
            if at != culprits.get("step time"):
                break
        culprits["acceptance"] = at
    fail = args.fail_rate if kind == "step+skips" else 0.0
    truths = []
    for i in range(n):
        truths.append(Truth(
            step_mult=1 + args.step_rise if i >= culprits.get("step time", n) else 1.0,
            commit_delta=-args.commit_drop if i >= culprits.get("acceptance", n) else 0.0,
            fails=0 < i < n - 1 and rng.random() < fail))
    return truths, culprits


def right(outcome: Outcome, culprits: dict[str, int], names: list[str]) -> bool:
    """The bisect said what the history calls for (module docstring)."""
    if not culprits:
        return outcome.status == "not-reproduced"
    if {r.factor.name for r in outcome.factors} != set(culprits):
        return False
    for r in outcome.factors:
        want = names[culprits[r.factor.name]]
        if r.status == "found" and r.first_bad == want:
            continue
        if r.status == "undecided" and want in r.candidates and "skipped" in r.reason:
            continue  # bracketed by skipped versions, as git bisect answers
        return False
    return True


def one(kind: str, rng: random.Random, args: argparse.Namespace) -> dict[str, Any]:
    truths, culprits = history(kind, args.versions, rng, args)
    names = [f"v{i:02d}" for i in range(args.versions)]
    versions = [Version(i, name) for i, name in enumerate(names)]
    plan = Plan(repeats=args.repeats, end_repeats=4 * args.repeats,
                max_repeats=8 * args.repeats)
    outcome = Search(ModelLab(truths, rng, args), versions, versions[0], versions[-1],
                     plan).run()
    exact = outcome.status == ("found" if culprits else "not-reproduced") \
        and right(outcome, culprits, names)
    return {"right": right(outcome, culprits, names), "exact": exact, "gpu_s": outcome.gpu_s,
            "measured": sum(1 for v in outcome.versions if v.repeats),
            "deploys": outcome.deploys, "status": outcome.status}


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson score interval of a binomial share k/n."""
    p, d = k / n, 1 + z * z / n
    mid, half = (p + z * z / (2 * n)) / d, z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (max(mid - half, 0.0), min(mid + half, 1.0))


def scenario(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(f"{args.seed}-{kind}")
    runs = [one(kind, rng, args) for _ in range(args.trials)]
    k = sum(r["right"] for r in runs)
    e = sum(r["exact"] for r in runs)
    return {"scenario": kind, "trials": args.trials, "right": k, "rate": k / args.trials,
            "ci95": wilson(k, args.trials), "exact": e, "exact_ci95": wilson(e, args.trials),
            "versions_measured_mean": statistics.fmean(r["measured"] for r in runs),
            "deploys_mean": statistics.fmean(r["deploys"] for r in runs),
            "gpu_s_mean": statistics.fmean(r["gpu_s"] for r in runs),
            "gpu_s_p90": sorted(r["gpu_s"] for r in runs)[int(0.9 * (args.trials - 1))],
            "statuses": {s: sum(r["status"] == s for r in runs)
                         for s in ("found", "not-reproduced", "undecided")}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=500)
    parser.add_argument("--seed", default="0")
    parser.add_argument("--versions", type=int, default=32)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--repeats", type=int, default=3, help="as `specperf bisect --repeats`")
    parser.add_argument("--output-tokens", type=int, default=128)
    parser.add_argument("--request-noise", type=float, default=0.03)
    parser.add_argument("--step-noise", type=float, default=0.01)
    parser.add_argument("--commit-sd", type=float, default=0.01)
    parser.add_argument("--step-rise", type=float, default=0.05)
    parser.add_argument("--commit-drop", type=float, default=0.2)
    parser.add_argument("--fail-rate", type=float, default=0.1)
    parser.add_argument("--out", type=Path, default=None, help="also write the rows as JSON")
    args = parser.parse_args()
    rows = [scenario(kind, args) for kind in args.scenarios.split(",")]
    bound = math.ceil(math.log2(args.versions)) + 2
    print(f"{args.trials} bisects per history, {args.versions} versions, seed {args.seed}; "
          f"versions measured bound ⌈log2 {args.versions}⌉ + 2 = {bound}")
    for r in rows:
        low, high = r["ci95"]
        print(f"  {r['scenario']:<11} right {r['right']}/{r['trials']} = {100 * r['rate']:.1f} % "
              f"(95 % Wilson {100 * low:.1f} … {100 * high:.1f} %; exact {r['exact']}); "
              f"versions measured "
              f"{r['versions_measured_mean']:.2f}, deploys {r['deploys_mean']:.2f}, GPU "
              f"{r['gpu_s_mean']:.0f} s (p90 {r['gpu_s_p90']:.0f} s); {r['statuses']}")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"args": vars(args) | {"out": str(args.out)},
                                        "rows": rows}, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
