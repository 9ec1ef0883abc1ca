"""The simulator's own CPU cost per decode step, so it never distorts what it simulates.

Runs the scheduler's hot path (``Scheduler.apply_step``: acceptance draw, token generation,
repetition window, metrics and decode-log observers) directly, without sleeping, for batches
of 1 and 8 requests at 5553 prompt tokens of the incident's repeated padding (the case that
commits the most tokens per step), and for varied prose. CPU time from time.process_time.

    python benchmarks/sim_cost.py [--steps 400]

Writes benchmarks/results/sim_cost.json. Target: < 0.2 ms CPU per step per request.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from specperf.sim.app import build_state
from specperf.sim.profile import load_profile
from specperf.sim.request import GenerationSpec

SENTENCE = "Distributed systems require careful reasoning about consistency and failure. "
CONTEXT = 5553
TARGET_MS = 0.2
RESULTS = Path(__file__).resolve().parent / "results" / "sim_cost.json"


async def cost(batch_size: int, steps: int, repeated: bool) -> dict[str, Any]:
    """CPU ms per step and per request-step for one batch size."""
    state = build_state(load_profile("kimi-k26-ddtree"), 1.0, 0, Path("/dev/null"))
    scheduler = state.scheduler
    varied = " ".join(f"w{i}x{i * 7919 % 104729}" for i in range(6000))
    text = SENTENCE * 700 if repeated else varied
    prompt = state.tokenizer.encode(text)[:CONTEXT]
    batch = []
    for _ in range(batch_size):
        spec = GenerationSpec(prompt_ids=prompt, max_new_tokens=steps * 17, ignore_eos=True)
        request = scheduler.submit(spec)
        scheduler.admit_running(request)
        batch.append(request)
    start = time.process_time()
    for _ in range(steps):
        scheduler.apply_step(batch, scheduler.step_duration(batch), 0.05)
    spent_ms = (time.process_time() - start) * 1000
    committed = sum(len(r.output_ids) for r in batch) / batch_size / steps
    return {"batch": batch_size, "text": "repeated" if repeated else "varied", "steps": steps,
            "ms_per_step": spent_ms / steps, "ms_per_request_step": spent_ms / steps / batch_size,
            "tokens_per_request_step": committed}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    args = parser.parse_args()
    rows = [asyncio.run(cost(b, args.steps, rep)) for rep in (True, False) for b in (1, 8)]
    for row in rows:
        print(f"batch {row['batch']} {row['text']:>8} at ctx {CONTEXT}: "
              f"{row['ms_per_step']:.4f} ms CPU/step, {row['ms_per_request_step']:.4f} ms per "
              f"request-step ({row['tokens_per_request_step']:.2f} tokens/step)")
    worst = max(r["ms_per_request_step"] for r in rows)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"context": CONTEXT, "target_ms": TARGET_MS, "rows": rows},
                                  indent=2, sort_keys=True) + "\n")
    verdict = "within" if worst < TARGET_MS else "OVER"
    print(f"worst {worst:.4f} ms per request-step, {verdict} the {TARGET_MS} ms target; "
          f"wrote {RESULTS}")
    return 0 if worst < TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
