"""The results store's test helpers: synthetic results documents shaped as a run writes them,
and a fresh store per test in each engine — SQLite in a temp dir, and PostgreSQL on the real
server .ci/run starts (.ci/postgres.sh exports SPECPERF_TEST_PG_URL; without it, locally, the
PostgreSQL half skips)."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

PG_ENV = "SPECPERF_TEST_PG_URL"
FINGERPRINT = {"model": "m", "draft_model": "d", "speculative_algorithm": "EAGLE"}
CASES = ("reasoning-ctx13", "reasoning-ctx1663", "padding-ctx13")


def doc(run_id: str, *, created: str = "2026-12-01T00:00:00Z", label: str = "box-a",
        tok_s: float = 50.0, status: str = "pass", repeats: int = 3) -> dict[str, Any]:
    """A results document with what record/files.history_entry and the store read."""
    measurements = {}
    for i, cid in enumerate(CASES):
        values = {"tok_s": [tok_s + i + r * 0.1 for r in range(repeats)],
                  "step_ms": [30.0 + i + r * 0.01 for r in range(repeats)],
                  "avg_commit": [4.0 + i * 0.1] * repeats}
        samples = [{"warmup": True, "tok_s": 1.0, "step_ms": 99.0, "avg_commit": 1.0}]
        samples += [{"warmup": False, "repeat": r, **{m: v[r] for m, v in values.items()}}
                    for r in range(repeats)]
        measurements[cid] = {"samples": samples, "summaries": {
            m: {"median": sorted(v)[len(v) // 2], "mad": 0.1, "n": repeats}
            for m, v in values.items()}}
    verdicts = [{"case_id": cid, "status": status, "message": f"{cid} {status}",
                 "details": {"tok_s": {"change": -0.01, "low": -0.05, "high": 0.03,
                                       "limit": -0.1},
                             "step_ms": {"change": 0.0, "low": -0.02, "high": 0.02,
                                         "limit": 0.1}}} for cid in CASES]
    return {"run_id": run_id, "created": created, "suite_version": "0.1.0",
            "git_revision": "abc", "fingerprint": dict(FINGERPRINT),
            "server": {"label": label, "simulated": False, "model": "m"},
            "settings": {"endpoint": f"http://{label}:30000", "output_tokens": 600},
            "baseline": {"deployment": "dep", "version": 2}, "concurrency_baseline": None,
            "measurements": measurements, "fits": {}, "verdicts": verdicts,
            "run": {"kind": "full", "label": "full sweep"}, "errors": {}, "partial": {}}


def pg_server_url() -> str | None:
    return os.environ.get(PG_ENV) or None


def fresh_pg_database() -> str:
    """A new, empty database on the test server; its URL."""
    server = pg_server_url()
    assert server is not None
    name = f"specperf_{secrets.token_hex(6)}"
    admin = create_engine(server.replace("postgresql://", "postgresql+psycopg://", 1),
                          isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return server.rsplit("/", 1)[0] + "/" + name


@pytest.fixture(name="store_url", params=["sqlite", "postgresql"])
def store_url_fixture(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty store in each engine."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'results.db'}"
        return
    if pg_server_url() is None:
        pytest.skip(f"{PG_ENV} is not set: start PostgreSQL with .ci/postgres.sh "
                    "(.ci/run always does)")
    yield fresh_pg_database()
