"""How the results store scales: a fleet of 50 endpoints × 730 nights of synthetic history (a
few million rows) in SQLite and in PostgreSQL, and what a run and a reader pay at that size.

Times, best of ``--rounds`` each:

- **endpoint read**: one endpoint's 730 history lines out of the store, its noise model
  (``noise_from_history``) and the drift scan over its nights (core/drift.py, as the trend
  page runs it);
- **fleet regressions**: the fleet's regressions of the last 30 nights counted by factor (one
  SQL query over the verdict rows);
- **night ingest**: one night of the fleet (50 runs) written through the run's own path, one
  transaction per run.

The history is bulk-loaded first (its time is printed, not the point). PostgreSQL needs
``SPECPERF_TEST_PG_URL`` (a server; a fresh database is made there), e.g. from
``. .ci/postgres.sh && pg_start``.

    python benchmarks/store_scale.py [--endpoints 50] [--nights 730] [--rounds 3]

Writes benchmarks/results/store_scale.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, create_engine, func, insert, select, text

from specperf import noise_from_history
from specperf.core import drift
from specperf.record.files import history_entry
from specperf.store import engine, ingest
from specperf.store.history import store_runs
from specperf.store.schema import cells, runs, verdicts

CASES = [f"{c}-ctx{n}" for c in ("padding", "reasoning") for n in (13, 1663, 3333, 5553)]
METRICS = ("tok_s", "step_ms", "avg_commit", "decode_tok_s", "ttft_ms")
FACTORS = ("tok_s", "step_ms", "avg_commit")
START = datetime(2025, 1, 1, 2, 0, tzinfo=timezone.utc)
BATCH = 500


def night_doc(endpoint: int, night: int, rng: random.Random) -> dict[str, Any]:
    """One endpoint's run of one night: a results document as the writer reads it."""
    label = f"box-{endpoint:02d}"
    created = (START + timedelta(days=night)).strftime("%Y-%m-%dT%H:%M:%SZ")
    level = 1.0 + 0.02 * rng.gauss(0, 1)
    measurements, verdict_list = {}, []
    for i, cid in enumerate(CASES):
        base = {"tok_s": 50.0 + i, "step_ms": 30.0 + i, "avg_commit": 4.0 + i / 10,
                "decode_tok_s": 52.0 + i, "ttft_ms": 100.0 + 10 * i}
        values = {m: [v * level * (1 + 0.01 * rng.gauss(0, 1)) for _ in range(3)]
                  for m, v in base.items()}
        measurements[cid] = {
            "samples": [{"warmup": False, **{m: v[r] for m, v in values.items()}}
                        for r in range(3)],
            "summaries": {m: {"median": sorted(v)[1], "mad": 0.3, "n": 3}
                          for m, v in values.items()}}
        status = "regression" if rng.random() < 0.02 else "pass"
        verdict_list.append({"case_id": cid, "status": status, "details": {
            f: {"change": rng.gauss(0, 0.03), "low": -0.05, "high": 0.05, "limit": 0.1}
            for f in FACTORS}})
    return {"run_id": f"{label}-n{night:04d}", "created": created, "suite_version": "0.1.0",
            "git_revision": "bench", "fingerprint": {"model": "m", "draft_model": "d"},
            "server": {"label": label, "simulated": False},
            "settings": {"endpoint": f"http://{label}:30000"},
            "baseline": {"deployment": label, "version": 1}, "concurrency_baseline": None,
            "measurements": measurements, "fits": {}, "verdicts": verdict_list,
            "run": {"kind": "full"}, "errors": {}, "partial": {}}


def _history(endpoints: int, nights: int) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    rng = random.Random(7)
    for night in range(nights):
        for e in range(endpoints):
            d = night_doc(e, night, rng)
            yield history_entry(d, f"{d['run_id']}/results.json"), d


def bulk_load(url: str, endpoints: int, nights: int) -> float:
    """The synthetic history in batches of runs, each batch one transaction; seconds."""
    start = time.perf_counter()
    batch: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for item in _history(endpoints, nights):
        batch.append(item)
        if len(batch) == BATCH:
            _load(url, batch)
            batch = []
    if batch:
        _load(url, batch)
    return time.perf_counter() - start


def _load(url: str, batch: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    with engine.transaction(url) as c:
        first = (c.execute(select(func.max(runs.c.id))).scalar() or 0) + 1
        run_rows = [{"id": first + i, **ingest.run_row(e)} for i, (e, _) in enumerate(batch)]
        c.execute(insert(runs), run_rows)
        c.execute(insert(cells), [r for i, (e, d) in enumerate(batch)
                                  for r in ingest.cell_rows(first + i, e, d)])
        c.execute(insert(verdicts), [r for i, (_, d) in enumerate(batch)
                                     for r in ingest.verdict_rows(first + i, d)])
        if c.dialect.name == "postgresql":  # explicit ids: move the serial past them
            c.execute(select(func.setval(func.pg_get_serial_sequence("runs", "id"),
                                         first + len(batch) - 1)))


def endpoint_read(url: str, label: str) -> dict[str, float]:
    """Seconds of each part: the history lines out of the store, the noise model, the drift
    scan over every night (the last two do not touch the store)."""
    marks = [time.perf_counter()]
    entries = store_runs(url, label)
    marks.append(time.perf_counter())
    noise_from_history(entries, label)
    marks.append(time.perf_counter())
    series = {f"{m}|{cid}": [(e["cells"].get(cid) or {}).get(m) for e in entries]
              for m in ("step_ms", "avg_commit") for cid in CASES}
    drift.detect_all(series, [])
    marks.append(time.perf_counter())
    return {"runs": len(entries), "history_read_s": marks[1] - marks[0],
            "noise_model_s": marks[2] - marks[1], "drift_scan_s": marks[3] - marks[2]}


def fleet_regressions(url: str, since: str) -> dict[str, int]:
    def query(c: Connection) -> dict[str, int]:
        rows = c.execute(select(verdicts.c.factor, func.count()).join(runs, runs.c.id ==
                                                                      verdicts.c.run)
                         .where(verdicts.c.status == "regression", runs.c.created >= since)
                         .group_by(verdicts.c.factor).order_by(verdicts.c.factor))
        return {str(f): int(n) for f, n in rows}
    return engine.read(url, query)


def night_ingest(url: str, endpoints: int, night: int) -> int:
    rng = random.Random(night)
    docs = [night_doc(e, night, rng) for e in range(endpoints)]
    return ingest.put_runs(url, [(history_entry(d, "x"), d) for d in docs])


def best(rounds: int, action: Callable[[], Any]) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(rounds):
        start = time.perf_counter()
        result = action()
        times.append(time.perf_counter() - start)
    return min(times), result


def counts(url: str) -> dict[str, int]:
    def query(c: Connection) -> dict[str, int]:
        return {t.name: int(c.execute(select(func.count()).select_from(t)).scalar_one())
                for t in (runs, cells, verdicts)}
    return engine.read(url, query)


def measure(name: str, url: str, endpoints: int, nights: int, rounds: int) -> dict[str, Any]:
    engine.open_engine(url)
    load_s = bulk_load(url, endpoints, nights)
    rows = counts(url)
    since = (START + timedelta(days=nights - 30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    label = f"box-{endpoints // 2:02d}"
    reads = [endpoint_read(url, label) for _ in range(rounds)]
    read = {k: round(min(r[k] for r in reads), 3) for k in reads[0] if k != "runs"}
    fleet_s, by_factor = best(rounds, lambda: fleet_regressions(url, since))
    ingest_times = []
    for r in range(rounds):
        start = time.perf_counter()
        assert night_ingest(url, endpoints, nights + r) == endpoints
        ingest_times.append(time.perf_counter() - start)
    result = {"engine": name, "endpoints": endpoints, "nights": nights, "rows": rows,
              "bulk_load_s": round(load_s, 1), "endpoint_runs": reads[0]["runs"],
              **{f"endpoint_{k}": v for k, v in read.items()},
              "fleet_regressions_30_nights_s": round(fleet_s, 3),
              "regressions_by_factor": by_factor,
              "night_ingest_s": round(min(ingest_times), 3)}
    print(json.dumps(result), flush=True)
    return result


def pg_database(server: str) -> str:
    name = f"specperf_bench_{secrets.token_hex(4)}"
    admin = create_engine(server.replace("postgresql://", "postgresql+psycopg://", 1),
                          isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return server.rsplit("/", 1)[0] + "/" + name


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoints", type=int, default=50)
    parser.add_argument("--nights", type=int, default=730)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--engines", default="sqlite,postgresql")
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).parent / "results" / "store_scale.json")
    args = parser.parse_args()
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.engines.split(","):
            if name == "sqlite":
                url = f"sqlite:///{Path(tmp) / 'results.db'}"
            elif os.environ.get("SPECPERF_TEST_PG_URL"):
                url = pg_database(os.environ["SPECPERF_TEST_PG_URL"])
            else:
                print("postgresql: SPECPERF_TEST_PG_URL is not set, skipped", file=sys.stderr)
                continue
            out.append(measure(name, url, args.endpoints, args.nights, args.rounds))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
