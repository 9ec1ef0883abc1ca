"""The information bound of a same-night deploy gate: the fewest GPU seconds any fixed design
needs to reach 95 % power on a 5 % step-time rise and on a 5 % tok/s drop with at most 1 % false
alarms at a 2 % change, for the gate's subset and the box's noises, beside what the gate spends.

The noises and the physics are benchmarks/sweep_power.py's (its ``Box``, ``physics`` and the
calibrated residuals), at time scale 1. A same-night comparison cancels the run terms, so what
is left per request is (log scale)::

    step:   σ² = σ_request² + σ_residual² + σ_step² / steps(L)     (per request, per step)
    commit: σ² = σ_commit²                                          (per request)

Two sides of n requests each estimate a change with standard error σ·√(2/n) at best (the mean
of Gaussian log figures: no estimator does better, by the Cramér–Rao bound; the suite's medians
cost π/2 as many requests). Telling a 5 % change from a 2 % one at α = 1 % and β = 5 % needs
``(z₀.₉₉ + z₀.₉₅) · σ·√(2/n) ≤ log 1.05 − log 1.02``, so n ≥ 2σ²·((z₀.₉₉ + z₀.₉₅)/Δ)², and the
design costs 2n requests of c(case, L) seconds each: prefill plus (L − 1)/commit verify steps.

- **Step time.** The request noise does not shrink with the decode length L, the per-step part
  does, as 1/√steps: a 16-token decode measures one verify pass as well as a 600-token one, at a
  fraction of its cost. The bound is taken at the longest context of the subset (3333, where a
  slower attention path shows), at the shortest decode that still takes ``MIN_STEPS`` verify
  steps (padding commits 7.6 tokens a step, so it needs a longer decode than reasoning's 2.9;
  the cheaper of the two is taken). The table also shows the 13-token case, which sees a rise
  of the fixed cost alone.
- **Acceptance.** The per-request spread of avg commit is 0.17 %: the statistics need less than
  one request a side, so the bound is one request a side at the full output length (acceptance
  along the output is what the incident's 200-token sample missed) on the reasoning class (real
  traffic; a drop on that class alone must be seen there). Exact acceptance settles it with
  the same request.

A design meets both with the two parts' requests (the long acceptance request also measures a
step): its cost is at most their sum and at least the larger part, the bound printed.

    python benchmarks/gate_bound.py [--request-noise 0.03] [--gate-gpu-s 590]

``--gate-gpu-s``: the gate's measured cost to compare with (both phases; default the project's
model, ``sweep_power.py --configs "same-night gate 3%"``, no change: 590 GPU s, issue 52).
"""

from __future__ import annotations

import argparse
import math
from statistics import NormalDist

from sweep_power import COMMIT_SD, STEP_SD, TOKENS, Box, physics

ALPHA, BETA = 0.01, 0.05
BIG, SMALL = 0.05, 0.02
LENGTHS = (16, 32, 64, 128, 200, 600)
# The fewest verify steps a request must take for its step time to be one: a 16-token padding
# request is two steps, whose commits are whole tokens and whose first step shares the prefill's
# scheduling; the bound takes the cheapest length with at least this many.
MIN_STEPS = 16


def requests_per_side(sigma: float) -> float:
    """n a side to tell a BIG change from a SMALL one at ALPHA and BETA, σ per request."""
    z = NormalDist().inv_cdf
    need = (z(1 - ALPHA) + z(1 - BETA)) / (math.log(1 + BIG) - math.log(1 + SMALL))
    return 2.0 * sigma**2 * need**2


def cost_s(text_class: str, context: int, length: int) -> float:
    """GPU seconds of one request of ``length`` output tokens (prefill and verify steps)."""
    ph = physics(text_class, context)
    return ph.prefill_s + (length - 1) / ph.commit * ph.step_ms / 1000.0


def step_sigma(box: Box, text_class: str, context: int, length: int) -> float:
    steps = (length - 1) / physics(text_class, context).commit
    return math.sqrt(box.request**2 + STEP_SD**2 + box.step_noise**2 / steps)


def step_bound(box: Box, text_class: str, context: int, length: int) -> tuple[float, float]:
    """(requests both sides, GPU seconds) of the step-time part at ``length`` tokens."""
    n = math.ceil(requests_per_side(step_sigma(box, text_class, context, length)))
    return 2 * n, 2 * n * cost_s(text_class, context, length)


def shortest(text_class: str, context: int) -> int:
    """The shortest length of LENGTHS whose requests take at least MIN_STEPS verify steps."""
    commit = physics(text_class, context).commit
    return next((n for n in LENGTHS if (n - 1) / commit >= MIN_STEPS), LENGTHS[-1])


def acceptance_bound(box: Box) -> tuple[float, float]:
    """(requests, GPU seconds) of the acceptance part: at least one full-length request a
    side on the reasoning class at the subset's longest context."""
    n = max(1, math.ceil(requests_per_side(box.commit_sd)))
    return 2 * n, 2 * n * cost_s("reasoning", 3333, TOKENS)


def bound_s(box: Box) -> float:
    """The bound: the larger of the step-time part (the cheaper class at 3333 tokens, at its
    shortest length of at least MIN_STEPS verify steps) and the acceptance part."""
    step_s = min(step_bound(box, *case, shortest(*case))[1]
                 for case in (("padding", 3333), ("reasoning", 3333)))
    return max(step_s, acceptance_bound(box)[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--request-noise", type=float, default=0.03)
    parser.add_argument("--step-noise", type=float, default=0.01)
    parser.add_argument("--commit-sd", type=float, default=COMMIT_SD)
    parser.add_argument("--gate-gpu-s", type=float, default=590.0)
    args = parser.parse_args()
    box = Box(args.request_noise, args.step_noise, args.commit_sd)
    print(f"per-request noise {box.request:.1%}, per step {box.step_noise:.1%}; 95 % power at "
          f"{BIG:.0%}, {ALPHA:.0%} false alarms at {SMALL:.0%}; both sides, time scale 1")
    print("step time, by decode length (requests, GPU s):")
    for case in (("padding", 3333), ("reasoning", 3333), ("padding", 13)):
        cells = [f"{length}: {n:.0f} req {s:.0f} s"
                 for length in LENGTHS for n, s in [step_bound(box, *case, length)]]
        print(f"  {case[0]}-ctx{case[1]:<5} " + "; ".join(cells))
    parts = {case: step_bound(box, *case, shortest(*case))
             for case in (("padding", 3333), ("reasoning", 3333))}
    case = min(parts, key=lambda c: parts[c][1])
    step_n, step_s = parts[case]
    print(f"step time at 3333 tokens with at least {MIN_STEPS} verify steps a request: "
          f"{case[0]} at {shortest(*case)} tokens, {step_n:.0f} requests, {step_s:.0f} GPU s")
    acc_n, acc_s = acceptance_bound(box)
    print(f"acceptance: {acc_n:.0f} requests of {TOKENS} tokens on reasoning-ctx3333, "
          f"{acc_s:.0f} GPU s")
    low, high = max(step_s, acc_s), step_s + acc_s
    print(f"bound: {low:.0f} GPU s (a design meeting both: at most {high:.0f} s, "
          f"{step_n + acc_n:.0f} requests); the gate spends {args.gate_gpu_s:.0f} s: "
          f"{args.gate_gpu_s / low:.1f}× the bound, {args.gate_gpu_s / high:.1f}× that design")


if __name__ == "__main__":
    main()
