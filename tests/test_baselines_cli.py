"""``specperf baselines DEPLOYMENT``: every version oldest first with its runs, what moved and
why it was written, read from real files (the shipped ones, files the store writes with the
lineage an update records); an unknown deployment or an unreadable file is one sentence."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from tests.test_baseline import make_baseline
from tests.test_baseline_lineage import STEP

from specperf.baselines.concurrency import ConcurrencyBaseline, ConcurrencyStore
from specperf.baselines.store import BaselineStore
from specperf.cli import main
from specperf.core.contract import IMPROVED, PASS, REGRESSION
from specperf.core.stats import Summary
from specperf.core.verdict import Scope, Verdict
from specperf.plugin import updatecheck

ROOT = Path(__file__).resolve().parents[1]
COMMIT = {"avg_commit": {"change": 0.102, "low": 0.06, "high": 0.14, "limit": -0.1},
          "tok_s": {"change": 0.01, "low": -0.02, "high": 0.04, "limit": -0.1}}


def listed(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["baselines", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_shipped_baselines_list_with_no_recorded_reason(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = listed(capsys, "sim-kimi-k26-ddtree", "--baseline-dir",
                            str(ROOT / "baselines"))
    assert (code, err) == (0, "")
    assert out.splitlines()[1:] == [
        "  v1  2026-11-30  1 run; moves not recorded; no recorded reason",
        "  v2  2026-11-30  1 run; moves not recorded; no recorded reason",
        "  v3  2026-12-02  1 run; moves not recorded; no recorded reason"]
    code, out, _ = listed(capsys, "sim-kimi-k26-ddtree", "--baseline-dir",
                          str(ROOT / "baselines"), "--json")
    found = json.loads(out)
    assert [v["version"] for v in found["versions"]] == [1, 2, 3]
    assert {v["reason"]["kind"] for v in found["versions"]} == {"unrecorded"}
    assert found["versions"][2]["run_ids"] == ["20261202-195821-cf0e"]


def write_lineage(root: Path) -> None:
    """v1 the first, v2 accepted over a step-time regression, v3 judged and written."""
    store = BaselineStore(root)
    first = updatecheck.lineage(None, [], updatecheck.check([]), None)
    store.write_next(replace(make_baseline(), lineage=first))
    slower = [Verdict("padding-ctx3333", REGRESSION, "slower", details=STEP, scope=Scope.CASE),
              Verdict("padding-fit", PASS, "ok", details={"slope": {"change": 0.05}},
                      scope=Scope.FIT)]
    store.write_next(replace(make_baseline(created="2026-12-03T02:00:00Z", runs=("r1", "r2")),
                             lineage=updatecheck.lineage(1, slower, updatecheck.check(slower),
                                                         "the new drafter is slower")))
    better = [Verdict("padding-ctx5553", IMPROVED, "better", details=COMMIT, scope=Scope.CASE),
              Verdict("padding-ctx3333", PASS, "same", details={}, scope=Scope.CASE),
              Verdict("padding-fit", PASS, "ok", details={"slope": {"change": 0.0001}},
                      scope=Scope.FIT)]
    store.write_next(replace(make_baseline(created="2026-12-05T02:00:00Z"),
                             lineage=updatecheck.lineage(2, better, updatecheck.check(better),
                                                         None)))


def test_each_version_says_what_moved_and_why(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.com")
    monkeypatch.setenv("GITHUB_REPOSITORY", "o/specperf")
    monkeypatch.setenv("GITHUB_RUN_ID", "42")
    write_lineage(tmp_path)
    code, out, err = listed(capsys, "kimi", "--baseline-dir", str(tmp_path))
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        f"kimi ({tmp_path / 'kimi'}): 3 versions, oldest first",
        "  v1  2026-11-29  1 run; the deployment's first version",
        # A change without an interval (the fit's slope) counts once it shows (0.1 %).
        "  v2  2026-12-03  2 runs; moved: step time +14.9% (padding-ctx3333), slope +5.0% "
        "(padding-fit); accepted: the new drafter is slower "
        "(https://github.com/o/specperf/actions/runs/42)",
        # tok/s moved inside its noise (its interval holds no change): not named.
        "  v3  2026-12-05  1 run; moved: avg commit +10.2% (padding-ctx5553); written by an "
        "update that judged no regression"]
    code, out, _ = listed(capsys, "kimi", "--baseline-dir", str(tmp_path), "--json")
    found = json.loads(out)["versions"]
    assert [v["reason"]["kind"] for v in found] == ["first", "accepted", "judged"]
    assert found[1]["reason"]["reason"] == "the new drafter is slower"
    assert found[1]["moved"][0] == {"metric": "step_ms", "case": "padding-ctx3333",
                                    "change": 0.149, "low": 0.057, "high": 0.249}


def level(tok_s: float) -> dict[str, Summary]:
    return {"tok_s": Summary(tok_s, 1.0, 5), "step_ms": Summary(28.0, 0.5, 5)}


def test_concurrency_versions_are_their_own_section(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_lineage(tmp_path)
    base = ConcurrencyBaseline("kimi", 0, "2026-12-06T00:00:00Z", "1.0", "abc", {}, True,
                               {"text_class": "reasoning", "context": 13, "output_tokens": 600},
                               {1: level(140.0), 4: level(80.0)}, None)
    ConcurrencyStore(tmp_path).write_next(base)
    code, out, _ = listed(capsys, "kimi", "--baseline-dir", str(tmp_path))
    assert code == 0
    assert out.splitlines()[-2:] == [
        "concurrency: 1 version",
        "  v1  2026-12-06  levels 1, 4; moves not recorded; no recorded reason"]


def test_an_unknown_deployment_or_directory_names_what_exists(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(ROOT / "baselines", tmp_path / "b")
    code, out, err = listed(capsys, "sim-kimi", "--baseline-dir", str(tmp_path / "b"))
    assert (code, out) == (2, "")
    assert err == (f"specperf baselines: {tmp_path / 'b'} has no baseline of deployment "
                   f"'sim-kimi' (it holds kimi-k26-ddtree-8xpro6000, sim-kimi-k26-ddtree): "
                   f"name one of those.\n")
    code, _, err = listed(capsys, "x", "--baseline-dir", str(tmp_path / "none"))
    assert code == 2
    assert err == (f"specperf baselines: baseline directory {tmp_path / 'none'} does not "
                   f"exist: pass --baseline-dir with the directory that holds "
                   f"<deployment>/v<N>.json.\n")
    (tmp_path / "file").write_text("", encoding="utf-8")
    code, _, err = listed(capsys, "x", "--baseline-dir", str(tmp_path / "file"))
    assert code == 2 and "file is not a directory: pass --baseline-dir" in err
    code, _, err = listed(capsys, "../x", "--baseline-dir", str(tmp_path / "b"))
    assert (code, err) == (2, "specperf baselines: deployment name '../x' cannot be a "
                              "directory name: use letters, digits, '.', '_' and '-', starting "
                              "with a letter or digit.\n")


def test_a_corrupt_file_is_one_sentence_naming_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(ROOT / "baselines", tmp_path / "b")
    broken = tmp_path / "b" / "sim-kimi-k26-ddtree" / "v2.json"
    broken.write_text(broken.read_text(encoding="utf-8")[:200], encoding="utf-8")
    code, out, err = listed(capsys, "sim-kimi-k26-ddtree", "--baseline-dir",
                            str(tmp_path / "b"))
    assert (code, out) == (3, "")
    assert err.startswith(f"specperf baselines: baseline {broken} is not valid JSON (")
    assert err.endswith("restore it from git or write a new version with "
                        "--specperf-update-baselines.\n") and err.count("\n") == 1
    concurrency = tmp_path / "b" / "kimi-k26-ddtree-8xpro6000" / "concurrency"
    concurrency.mkdir()
    (concurrency / "v1.json").write_text("{}", encoding="utf-8")
    code, _, err = listed(capsys, "kimi-k26-ddtree-8xpro6000", "--baseline-dir",
                          str(tmp_path / "b"))
    assert code == 3 and err.startswith(
        f"specperf baselines: concurrency baseline {concurrency / 'v1.json'} is not readable")


def test_a_concurrency_version_keeps_its_lineage_and_an_older_one_reads_unchanged(
        tmp_path: Path) -> None:
    first = updatecheck.lineage(None, [], updatecheck.check([]), None)
    base = ConcurrencyBaseline("kimi", 0, "2026-12-06T00:00:00Z", "1.0", "abc", {}, True,
                               {"text_class": "reasoning", "context": 13, "output_tokens": 600},
                               {1: level(140.0)}, None, first)
    path = ConcurrencyStore(tmp_path).write_next(base)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert (data["schema_version"], data["lineage"]) == (2, first)
    assert ConcurrencyBaseline.from_json(path.read_text(encoding="utf-8"), path) == \
        replace(base, version=1)
    data.update(schema_version=1)
    del data["lineage"]
    old = ConcurrencyBaseline.from_json(json.dumps(data), path)
    assert old.lineage is None and old.levels == base.levels


def test_a_hand_edited_move_that_holds_no_number_is_passed_by() -> None:
    from specperf.record.lineage import moves
    assert moves({"moved": {"a": 5, "b": {"tok_s": "x", "step_ms": {"change": True}},
                            "c": {"step_ms": {"change": 0.2, "low": "?", "high": 0.3}}}}) == [
        {"metric": "step_ms", "case": "c", "change": 0.2, "low": None, "high": 0.3}]
