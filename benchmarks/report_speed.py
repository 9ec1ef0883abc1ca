"""How long ``specperf report`` takes on a large run: a synthetic 1,000-case results file.

Builds the file with the suite's own dataclasses (10 text classes x 100 contexts, one
warm-up and three repeats per case, a baseline with fits and a verdict per case), writes
it, then times what ``specperf report results.json`` does: load and validate against the
schema, render the page with its three plots. Best of ``--rounds``.

    python benchmarks/report_speed.py [--cases 1000] [--rounds 3]

Writes benchmarks/results/report_speed.json. Target: < 5 s.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from specperf import (
    DEFAULT_TOLERANCES,
    Baseline,
    Case,
    Measurement,
    RunInfo,
    Sample,
    build_results,
    fit_context,
    judge_case,
    load_results,
    render_report,
    write_results,
)

TARGET_S = 5.0
OUTPUT = 600
RESULTS = Path(__file__).resolve().parent / "results" / "report_speed.json"


def _measurement(rng: random.Random, case: Case, commit: float) -> Measurement:
    step_ms = 30.0 + 0.018 * case.context
    samples = []
    for i in range(-1, 3):
        steps = round((OUTPUT - 1) / (commit * rng.uniform(0.97, 1.03)))
        decode_s = steps * step_ms * rng.uniform(0.98, 1.02) / 1000
        wall = decode_s + 0.05 + case.context * 2e-5
        samples.append(Sample(case.id, i, i < 0, case.context, OUTPUT, wall, steps, decode_s,
                              0.05, OUTPUT / steps, 0, "response", "length", 0,
                              {"e2e_s": wall, "wall_s_unscaled": wall, "histogram_sum": steps}))
    return Measurement(case, tuple(samples), "server-timings", "response")


def synthetic(n_cases: int, seed: int = 0) -> dict[str, Any]:
    """A results document of ``n_cases`` cases (10 classes), regressions in a tenth of them."""
    rng = random.Random(seed)
    classes = [f"class{i}" for i in range(10)]
    contexts = [13 + 50 * j for j in range(max(1, n_cases // len(classes)))]
    cases = [Case(c, x, OUTPUT) for c in classes for x in contexts][:n_cases]
    old = [_measurement(rng, c, 3.0 + classes.index(c.text_class) / 2) for c in cases]
    new = [_measurement(rng, c, (3.0 + classes.index(c.text_class) / 2)
                        * (0.7 if i % 10 == 0 else 1.0)) for i, c in enumerate(cases)]
    fits = {}
    for name in classes:
        pts = [(m.mean_context, s.median) for m in old if m.case.text_class == name
               and (s := m.summary("step_ms")) is not None]
        if (fit := fit_context(pts)) is not None:
            fits[name] = fit
    base = Baseline.from_run("bench", {"model": "m"}, old, fits, version=1, suite_version="0",
                             git_revision="0", provenance="benchmark", simulated=True)
    verdicts = [judge_case(m.case.id, m.summaries(), base.cases[m.case.id],
                           DEFAULT_TOLERANCES).to_dict() for m in new]
    run = RunInfo(f"bench-{seed}", "2026-01-01T00:00:00Z", 0.0, 0.0,
                          {"endpoint": None, "contexts": contexts, "text_classes": classes,
                           "output_tokens": OUTPUT, "repeats": 3}, "bench", "0")
    server = {"url": "http://127.0.0.1:1", "label": "SIMULATED", "simulated": True,
              "fingerprint": {"model": "m"}, "time_scale": 1.0, "notes": []}
    return build_results(run, server=server, measurements={m.case.id: m.to_dict() for m in new},
                         verdicts=verdicts, outcomes={}, errors={}, baseline=base)


def _time_once(path: Path) -> tuple[float, float, int]:
    start = time.perf_counter()
    doc = load_results(path)
    loaded = time.perf_counter()
    html = render_report(doc)
    return loaded - start, time.perf_counter() - loaded, len(html)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = write_results(synthetic(args.cases), Path(tmp))
        size = path.stat().st_size
        rounds = [_time_once(path) for _ in range(args.rounds)]
    load_s, render_s, html_bytes = min(rounds, key=lambda r: r[0] + r[1])
    total = load_s + render_s
    out = {"cases": args.cases, "results_bytes": size, "html_bytes": html_bytes,
           "load_and_validate_s": round(load_s, 3), "render_s": round(render_s, 3),
           "total_s": round(total, 3), "target_s": TARGET_S, "ok": total < TARGET_S,
           "rounds": args.rounds}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    print(f"{args.cases} cases ({size / 1e6:.1f} MB results.json): load+validate {load_s:.2f} s, "
          f"render {render_s:.2f} s, total {total:.2f} s (target < {TARGET_S:g} s) -> "
          f"{'OK' if out['ok'] else 'TOO SLOW'}; wrote {RESULTS}")
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
