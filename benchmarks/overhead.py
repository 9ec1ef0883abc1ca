"""What the suite costs on top of what it measures: client CPU per request, and sweep wall time.

1. **Client cost per request**: the simulator at a tiny time scale, 600-token non-streaming
   requests (the suite has no streaming path), one warm session. Per request: the client
   process's CPU time (time.process_time, so the simulator's own CPU and other load on the
   machine do not count) and wall time outside the server (client wall minus the server's
   e2e_latency). Then each piece of a request alone: prompt building (/tokenize of the
   nonce), a /metrics scrape and parse (the guard takes two per request), the generation
   POST and its parsing. Median of ``--rounds`` rounds.
2. **Sweep ratio**: the default sweep (incident profile, default time scale, 3 repeats + 1
   warm-up, 2 classes x 4 contexts) end to end, wall time divided by the summed server-side
   request time (e2e_latency), with start-up (simulator launch, probe) shown apart. The
   fixed costs do not scale with the time scale; the ratio at time scale 1 (the real box)
   is extrapolated as 1 + overhead / (server time / scale).
3. With pyinstrument installed (``pip install pyinstrument``; not a project dependency),
   a profile of the per-request loop is written beside the JSON.

    python benchmarks/overhead.py [--requests 40] [--rounds 3] [--time-scale 0.002]

Writes benchmarks/results/overhead.json (and overhead-profile.txt). Goals: <= 0.5 ms client
CPU per request; sweep ratio <= 1.05.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from specperf import Case, PerfSession, parse_metrics, resolve

RESULTS = Path(__file__).resolve().parent / "results"
CASES = (("padding", 13), ("reasoning", 3333))
GOAL_CPU_MS, GOAL_RATIO = 0.5, 1.05


def session_for(time_scale: float, **extra: str) -> PerfSession:
    settings = resolve({"sim_time_scale": str(time_scale), **extra}, {}, {})
    return PerfSession(settings)


def cpu_ms(fn: Callable[[], object], count: int) -> tuple[float, float]:
    """CPU and wall milliseconds per call of ``fn`` over ``count`` calls."""
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for _ in range(count):
        fn()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return 1000.0 * cpu / count, 1000.0 * wall / count


def per_request(session: PerfSession, case: Case, count: int) -> dict[str, float]:
    """One measured request, as the suite takes it, end to end."""
    measurer = session.measurer
    assert measurer is not None
    samples = []

    def one() -> None:
        samples.append(measurer.sample(case, len(samples), warmup=False))

    cpu, wall = cpu_ms(one, count)
    server = 1000.0 * statistics.fmean(s.raw["e2e_s"] for s in samples)
    client_wall = 1000.0 * statistics.fmean(s.raw["wall_s_unscaled"] for s in samples)
    return {"cpu_ms": cpu, "wall_ms": wall, "server_ms": server, "client_wall_ms": client_wall,
            "outside_server_ms": wall - server}


def pieces(session: PerfSession, case: Case, count: int) -> dict[str, float]:
    """CPU ms of each piece of a request on its own."""
    measurer, client = session.measurer, session.client
    assert measurer is not None and client is not None
    prompts = measurer.prompts

    def build() -> None:
        prompts.build(case, f"run {uuid.uuid4().hex[:12]}: ", want_ids=True)

    def scrape() -> None:
        parse_metrics(client.get_text("/metrics", timeout_s=30))

    text = client.get_text("/metrics", timeout_s=30)
    return {"prompt_build_ms": cpu_ms(build, count)[0],
            "metrics_scrape_ms": cpu_ms(scrape, count)[0],
            "metrics_parse_only_ms": cpu_ms(lambda: parse_metrics(text), count)[0],
            "metrics_bytes": len(text)}


def client_cost(time_scale: float, count: int, rounds: int) -> dict[str, Any]:
    session = session_for(time_scale)
    out: dict[str, Any] = {"time_scale": time_scale, "requests": count, "cases": {}}
    try:
        started = time.perf_counter()
        session.start()
        out["start_s"] = time.perf_counter() - started
        for text_class, context in CASES:
            case = Case(text_class, context, 600)
            per_request(session, case, 2)  # caches the body, warms the connection
            runs = [per_request(session, case, count) for _ in range(rounds)]
            row = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            row.update(pieces(session, case, count))
            out["cases"][case.id] = row
        out["cpu_shares"] = cpu_breakdown(session, Case(*CASES[1], 600), count)
        out["profile"] = profile_requests(session, Case(*CASES[1], 600), count)
    finally:
        session.close()
    return out


# (file suffix, function) -> label: where a request's client CPU goes, by cumulative time.
SPOTS = {
    ("measure.py", "_generate"): "generate (build + POST + parse)",
    ("workload.py", "build"): "  prompt build (/tokenize nonce)",
    ("client.py", "post_json"): "  HTTP POSTs (generate + tokenize)",
    ("routes.py", "parse"): "  response parse",
    ("measure.py", "_snapshot"): "/metrics scrapes",
    ("acceptance.py", "parse_metrics"): "  Prometheus text parse",
    ("measure.py", "_checks"): "output and cache guards",
    ("measure.py", "_validate"): "validation",
}


def cpu_breakdown(session: PerfSession, case: Case, count: int) -> dict[str, float]:
    """Share of a request's client CPU per spot (cProfile on process time; shares only,
    as the profiler inflates the absolute figures)."""
    profiler = cProfile.Profile(time.process_time)
    profiler.enable()
    per_request(session, case, count)
    profiler.disable()
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    total = max(ct for (_, _, name), (_, _, _, ct, _) in stats.items() if name == "one")
    out = {label: 0.0 for label in SPOTS.values()}
    for (path, _, name), (_, _, _, ct, _) in stats.items():
        for (suffix, fn), label in SPOTS.items():
            if name == fn and path.endswith(suffix):
                out[label] += ct / total
    return out


def profile_requests(session: PerfSession, case: Case, count: int) -> str | None:
    """A pyinstrument profile (wall time) of ``count`` requests, when pyinstrument is there."""
    try:
        from pyinstrument import Profiler
    except ImportError:
        return None
    profiler = Profiler(interval=0.0005)
    profiler.start()
    per_request(session, case, count)
    profiler.stop()
    text: str = profiler.output_text(unicode=False, color=False, show_all=False)
    (RESULTS / "overhead-profile.txt").write_text(text)
    return text


def sweep(time_scale: float) -> dict[str, Any]:
    """The default sweep end to end: wall vs summed server-side request time."""
    session = session_for(time_scale)
    server_s, requests = 0.0, 0
    t0 = time.perf_counter()
    try:
        session.start()
        t_start = time.perf_counter() - t0
        s = session.settings
        for text_class in s.text_classes:
            for context in s.contexts:
                m = session.measure(Case(text_class, context, s.output_tokens))
                server_s += sum(x.raw["e2e_s"] for x in m.samples)
                requests += len(m.samples)
    finally:
        session.close()
    wall = time.perf_counter() - t0
    overhead = wall - server_s
    return {"time_scale": time_scale, "requests": requests, "wall_s": wall,
            "start_s": t_start, "server_s": server_s, "ratio": wall / server_s,
            "ratio_after_start": (wall - t_start) / server_s,
            "overhead_per_request_ms": 1000.0 * (wall - t_start - server_s) / requests,
            "ratio_at_scale_1": 1.0 + overhead / (server_s / time_scale)}


def print_tables(cost: dict[str, Any], sweeps: list[dict[str, Any]]) -> None:
    print(f"client cost per 600-token non-streaming request (time scale "
          f"{cost['time_scale']:g}, median of rounds of {cost['requests']}; session start "
          f"{cost['start_s']:.2f} s)")
    print(f"{'case':<18} {'CPU ms':>7} {'wall-e2e ms':>11} {'prompt':>7} {'/metrics':>9} "
          f"{'parse':>6} {'bytes':>6}  goal <= {GOAL_CPU_MS} ms CPU")
    for cid, r in cost["cases"].items():
        print(f"{cid:<18} {r['cpu_ms']:7.2f} {r['outside_server_ms']:11.2f} "
              f"{r['prompt_build_ms']:7.2f} {r['metrics_scrape_ms']:9.2f} "
              f"{r['metrics_parse_only_ms']:6.2f} {r['metrics_bytes']:6d}  "
              f"{'met' if r['cpu_ms'] <= GOAL_CPU_MS else 'MISSED'}")
    print("\nwhere the client CPU of reasoning-ctx3333 goes (cProfile, process time)")
    for label, share in cost["cpu_shares"].items():
        print(f"  {label:<36} {100 * share:5.1f}%")
    print("\ndefault sweep (kimi-k26-ddtree, 2 classes x 4 contexts, 3 repeats + 1 warm-up)")
    print(f"{'scale':>6} {'requests':>8} {'wall s':>7} {'start s':>7} {'server s':>8} "
          f"{'ratio':>6} {'w/o start':>9} {'ms/request':>10} {'at scale 1':>10}")
    for s in sweeps:
        print(f"{s['time_scale']:6g} {s['requests']:8d} {s['wall_s']:7.2f} {s['start_s']:7.2f} "
              f"{s['server_s']:8.2f} {s['ratio']:6.3f} {s['ratio_after_start']:9.3f} "
              f"{s['overhead_per_request_ms']:10.1f} {s['ratio_at_scale_1']:10.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--time-scale", type=float, default=0.002)
    parser.add_argument("--sweep-scales", default="0.05,0.2")
    args = parser.parse_args()
    RESULTS.mkdir(exist_ok=True)
    cost = client_cost(args.time_scale, args.requests, args.rounds)
    sweeps = [sweep(float(x)) for x in args.sweep_scales.split(",") if x]
    print_tables(cost, sweeps)
    profile = cost.pop("profile", None)
    if profile:
        print("\npyinstrument profile of the per-request loop: "
              "benchmarks/results/overhead-profile.txt")
    (RESULTS / "overhead.json").write_text(
        json.dumps({"client": cost, "sweeps": sweeps}, indent=2) + "\n")


if __name__ == "__main__":
    main()
