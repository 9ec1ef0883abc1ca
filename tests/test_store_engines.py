"""The same nightly sequence (a baseline night, five nights, then a drift) written through the
run's own writer into SQLite and into PostgreSQL: every reader sees the same history, so the
noise model, the verdict rows and the trend page (its drift scan included) are identical."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from specperf.core.noise import from_history
from specperf.record import trend as record_trend
from specperf.record.files import write
from specperf.store import engine
from specperf.store.history import file_runs, read_history
from specperf.store.schema import cells, verdicts
from specperf.views import trend
from store_fixtures import doc, fresh_pg_database, pg_server_url

pytestmark = pytest.mark.skipif(pg_server_url() is None,
                                reason="SPECPERF_TEST_PG_URL is not set: start PostgreSQL "
                                       "with .ci/postgres.sh (.ci/run always does)")
# tok/s per night: a baseline night, five nights of noise, then a slow drift down.
NIGHTS = (50.0, 50.4, 49.7, 50.2, 49.9, 50.1, 48.9, 47.8, 46.6)


def _sequence(reports: Path, url: str) -> list[dict[str, Any]]:
    for night, tok_s in enumerate(NIGHTS):
        d = doc(f"n{night}", created=f"2026-11-{night + 10:02d}T02:00:00Z", tok_s=tok_s,
                status="fail" if tok_s < 48 else "pass")
        d["settings"]["results_db"] = url
        write(d, reports)
    return read_history(reports, url)


def _rows(url: str) -> list[Any]:
    def query(c):  # type: ignore[no-untyped-def]
        got = [tuple(r) for r in c.execute(select(cells).order_by(cells.c.run, cells.c.case_id,
                                                                  cells.c.metric))]
        return got + [tuple(r) for r in c.execute(select(verdicts).order_by(verdicts.c.run,
                                                                             verdicts.c.seq))]
    return engine.read(url, query)


def test_sqlite_and_postgresql_give_every_reader_the_same_history(tmp_path: Path) -> None:
    lite_url = f"sqlite:///{tmp_path / 'lite' / 'results.db'}"
    pg_url = fresh_pg_database()
    lite = _sequence(tmp_path / "lite", lite_url)
    pg = _sequence(tmp_path / "pg", pg_url)
    assert [e["run_id"] for e in lite] == [f"n{i}" for i in range(len(NIGHTS))]
    assert lite == pg == file_runs(tmp_path / "lite" / "history.jsonl")
    assert _rows(lite_url) == _rows(pg_url)
    noise_lite, noise_pg = from_history(lite, "box-a"), from_history(pg, "box-a")
    assert noise_lite.to_dict() == noise_pg.to_dict()
    assert noise_lite.of("tok_s").text() == noise_pg.of("tok_s").text()
    assert noise_lite.of("tok_s").source != "prior"  # the nights were read, not the prior
    page_lite, page_pg = (record_trend.build(e) for e in (lite, pg))
    assert trend.drift_lines(page_lite) == trend.drift_lines(page_pg)
    assert trend.render(page_lite) == trend.render(page_pg)
