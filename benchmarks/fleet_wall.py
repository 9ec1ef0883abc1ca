"""A fleet's wall time against its slowest endpoint: endpoints in parallel, not one after another.

Three simulators as real processes (``healthy``; ``regressed``, step time x1.3 through
``/_sim/faults``; ``stopped``, killed once it served the first request of the second case),
one baseline measured on ``healthy`` and filed under each deployment, then one
``pytest -n 3 --endpoints FILE`` session over the main job's cases; then the same scenario
(fresh simulators) measured serially, ``-n 0``, for the wall time one after another. From
each run's results.json: each endpoint's ``measure_s`` (its tests' setup + call + teardown
on its worker) and the session's wall time. Parallel means wall ≈ the slowest endpoint's time plus
xdist's start-up, far below the sum.

    python benchmarks/fleet_wall.py [--contexts 13,1663,3333] [--time-scale 0.5]

Writes benchmarks/results/fleet_wall.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from specperf import SimProcess

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results" / "fleet_wall.json"
NAMES = ("healthy", "regressed", "stopped")


def pytest_run(work: Path, args: list[str], contexts: str) -> list[str]:
    return [sys.executable, "-m", "pytest", str(ROOT / "perf_tests" / "test_context_scaling.py"),
            "-p", "no:cacheprovider", "-p", "no:randomly", "-q",
            "-m", "context_scaling", f"--contexts={contexts}", "--text-classes=reasoning",
            "--output-tokens=64", "--repeats=3", "--baseline-dir", str(work / "baselines"),
            "--report-dir", str(work / "reports"), *args]


def write_baselines(work: Path, url: str, contexts: str, env: dict[str, str]) -> None:
    cmd = pytest_run(work, ["--endpoint", url, "--deployment", "healthy",
                            "--update-baselines", "--baseline-repeats=3"], contexts)
    subprocess.run(cmd, cwd=work, env=env, check=True, capture_output=True, timeout=900)
    source = json.loads((work / "baselines" / "healthy" / "v1.json").read_text())
    for name in NAMES[1:]:
        (work / "baselines" / name).mkdir()
        (work / "baselines" / name / "v1.json").write_text(
            json.dumps({**source, "deployment": name}, indent=1, sort_keys=True))


def truth(url: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = httpx.get(f"{url}/_sim/truth", timeout=5).json()["requests"]
    return found


def stop_halfway(sim: SimProcess, run: subprocess.Popen[str], second: int,
                 seen: list[dict[str, Any]]) -> None:
    while run.poll() is None:
        requests = truth(sim.url)
        if any(r["prompt_tokens"] >= second for r in requests):
            seen.extend(requests)  # its ground truth dies with it
            sim.stop()
            return
        time.sleep(0.05)


def window(requests: list[dict[str, Any]], since: float) -> tuple[float, float]:
    """When the run's requests to one simulator began and ended (system-wide monotonic)."""
    mine = [r for r in requests if r["received_mono"] >= since and not r["background"]
            and r["finished_mono"] is not None]  # the stopped box's last one never finished
    return min(r["received_mono"] for r in mine), max(r["finished_mono"] for r in mine)


def measure(contexts: str, time_scale: float, workers: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="specperf-fleet-") as tmp:
        work = Path(tmp)
        env = {**os.environ, "SPECPERF_LOCK_DIR": str(work / "locks")}
        sims = {n: SimProcess("kimi-k26-ddtree", time_scale) for n in NAMES}
        try:
            urls = {n: sim.start() for n, sim in sims.items()}
            write_baselines(work, urls["healthy"], contexts, env)
            httpx.post(f"{urls['regressed']}/_sim/faults", json={"step_time_mult": 1.3})
            (work / "fleet.toml").write_text("".join(
                f'[[endpoint]]\nname = "{n}"\nurl = "{u}"\n\n' for n, u in urls.items()))
            cmd = pytest_run(work, ["-n", str(workers), "--endpoints",
                                    str(work / "fleet.toml")], contexts)
            start = time.monotonic()
            run = subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
            second = sorted(int(c) for c in contexts.split(","))[1]
            seen: list[dict[str, Any]] = []
            stopper = threading.Thread(target=stop_halfway,
                                       args=(sims["stopped"], run, second, seen))
            stopper.start()
            out, _ = run.communicate(timeout=1800)
            wall = time.monotonic() - start
            stopper.join()
            windows = {n: window(seen if n == "stopped" else truth(urls[n]), start)
                       for n in NAMES}
        finally:
            for sim in sims.values():
                sim.stop()
        run_dir = sorted((work / "reports").glob("2*"))[-1]
        doc = json.loads((run_dir / "results.json").read_text())
    each = {p["name"]: {"measure_s": p["measure_s"], "status": p["status"],
                        "counts": p["counts"]} for p in doc["endpoints"]}
    slowest = max(v["measure_s"] for v in each.values())
    total = sum(v["measure_s"] for v in each.values())
    # Ground truth from the simulators: when each box was busy with this run.
    spans = {n: end - begin for n, (begin, end) in windows.items()}
    measuring = max(e for _, e in windows.values()) - min(b for b, _ in windows.values())
    return {"contexts": contexts, "time_scale": time_scale, "workers": workers,
            "exit_code": run.returncode,
            "wall_s": wall, "session_s": doc["duration_s"], "endpoints": each,
            "slowest_endpoint_s": slowest, "sum_of_endpoints_s": total,
            "wall_over_slowest": wall / slowest, "sum_over_wall": total / wall,
            "server_windows_s": spans, "measuring_s": measuring,
            "measuring_over_slowest_window": measuring / max(spans.values()),
            "sum_windows_over_measuring": sum(spans.values()) / measuring,
            "tail": out.splitlines()[-8:]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contexts", default="13,1663,3333")
    parser.add_argument("--time-scale", type=float, default=0.5)
    args = parser.parse_args()
    runs = [measure(args.contexts, args.time_scale, workers) for workers in (3, 0)]
    RESULTS.parent.mkdir(exist_ok=True)
    summary = {"parallel": runs[0], "serial": runs[1],
               "parallel_over_serial_wall": runs[0]["wall_s"] / runs[1]["wall_s"]}
    RESULTS.write_text(json.dumps(summary, indent=1) + "\n")
    for found in runs:
        print(f"-n {found['workers']}:")
        for name, v in found["endpoints"].items():
            print(f"  {name:<10} {v['status']:<6} {v['measure_s']:6.1f} s  ({v['counts']})")
        print(f"  wall {found['wall_s']:.1f} s (pytest session {found['session_s']:.1f} s); "
              f"slowest endpoint {found['slowest_endpoint_s']:.1f} s, sum "
              f"{found['sum_of_endpoints_s']:.1f} s; wall/slowest "
              f"{found['wall_over_slowest']:.2f}, sum/wall {found['sum_over_wall']:.2f}")
        busy = ", ".join(f"{n} {v:.1f} s" for n, v in found["server_windows_s"].items())
        print(f"  simulators busy (ground truth): {busy}; first request to last "
              f"{found['measuring_s']:.1f} s = {found['measuring_over_slowest_window']:.2f} x "
              f"the slowest box, {found['sum_windows_over_measuring']:.2f} x less than their "
              "sum")
    print(f"wall -n 3 / wall -n 0: {summary['parallel_over_serial_wall']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
