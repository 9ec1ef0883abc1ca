"""Every baseline version says why: its lineage (previous version, what moved, the acceptance)
is data in the file, read back as written; schema-1 files (the shipped ones) load unchanged
with no lineage."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from tests.test_baseline import make_baseline

from specperf.baselines.store import SCHEMA_VERSION, Baseline, BaselineStore
from specperf.core.contract import PASS, REGRESSION, UNDETERMINED
from specperf.core.verdict import Scope, Verdict
from specperf.plugin import updatecheck

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted([*ROOT.glob("baselines/*/v*.json"),
                  *ROOT.glob("src/specperf/baselines/reference/*/v*.json")])
STEP = {"step_ms": {"base": 28.0, "new": 32.2, "change": 0.149, "limit": 0.1,
                    "low": 0.057, "high": 0.249, "se": 0.05}}


def test_a_lineage_is_written_and_read_back(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.com")
    monkeypatch.setenv("GITHUB_REPOSITORY", "o/specperf")
    monkeypatch.setenv("GITHUB_RUN_ID", "42")
    verdicts = [Verdict("reasoning-ctx13", REGRESSION, "slower", details=STEP, scope=Scope.CASE)]
    judged = updatecheck.check(verdicts)
    lineage = updatecheck.lineage(3, verdicts, judged, "new drafter")
    path = BaselineStore(tmp_path).write_next(replace(make_baseline(), lineage=lineage))
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["schema_version"] == SCHEMA_VERSION == 2
    assert data["lineage"] == {
        "previous": 3,
        "moved": {"reasoning-ctx13": {"step_ms": {"change": 0.149, "low": 0.057,
                                                  "high": 0.249}}},
        "accepted": {"reason": "new drafter",
                     "who": "https://github.com/o/specperf/actions/runs/42",
                     "verdicts": [{"case": "reasoning-ctx13", "status": "regression",
                                   "factor": "", "metrics": "step_ms",
                                   "message": "slower"}]}}
    assert Baseline.from_json(path.read_text(encoding="utf-8"), path).lineage == lineage


def test_an_undetermined_verdict_blocks_only_when_its_estimate_is_beyond_the_limit() -> None:
    inside = {"step_ms": {**STEP["step_ms"], "change": 0.08}}
    assert updatecheck.check([Verdict("c", UNDETERMINED, "?", details=inside,
                                      scope=Scope.CASE)]).clear
    assert not updatecheck.check([Verdict("c", UNDETERMINED, "?", details=STEP,
                                          scope=Scope.CASE)]).clear
    assert updatecheck.check([Verdict("c", PASS, "ok", details=STEP, scope=Scope.CASE)]).clear


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(ROOT)))
def test_schema_one_files_load_without_a_lineage(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert json.loads(text)["schema_version"] == 1
    base = Baseline.from_json(text, path)
    assert base.lineage is None and base.cases
