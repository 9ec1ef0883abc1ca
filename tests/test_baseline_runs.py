"""Baselines from several runs (baselines/merge.py): which earlier runs of the report history
are merged, how (median per request slot, one run's spread kept), and what the file records."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from specperf.baselines.merge import PastRun, merged, past_runs
from specperf.baselines.store import Baseline, BaselineStore, CaseBaseline
from specperf.core.errors import BaselineError
from specperf.core.model import ContextFit
from specperf.core.stats import Summary, summarize
from specperf.store.history import HistoryLineSkipped

FP: dict[str, Any] = {"model": "m", "speculative_algorithm": "draft", "draft_model": None,
                      "simulated": False}
CASES = {"reasoning-ctx13": 64, "reasoning-ctx1663": 64}


def _doc(run_id: str, tok_s: list[float], *, deployment: str | None = "box",
         output_tokens: int = 64, cases: dict[str, int] = CASES) -> dict[str, Any]:
    measurements = {}
    for cid, n in cases.items():
        context = int(cid.rsplit("ctx", 1)[1])
        samples = [{"repeat": -1, "warmup": True, "tok_s": 1.0, "step_ms": 1.0}]
        samples += [{"repeat": i, "warmup": False, "tok_s": v + context / 1000,
                     "step_ms": 20.0 + context / 100 + i} for i, v in enumerate(tok_s)]
        measurements[cid] = {"case": {"id": cid, "output_tokens": output_tokens or n},
                             "samples": samples}
    return {"run_id": run_id, "settings": {"deployment": deployment, "sim_profile": "x"},
            "server": {"fingerprint": FP, "simulated": False}, "measurements": measurements}


def _history(root: Path, *docs: tuple[dict[str, Any], dict[str, Any]]) -> Path:
    """Write each (doc, history fields) as a run of the report dir ``root``, oldest first."""
    with (root / "history.jsonl").open("a", encoding="utf-8") as fh:
        for doc, extra in docs:
            path = root / doc["run_id"] / "results.json"
            path.parent.mkdir(parents=True)
            path.write_text(json.dumps(doc), encoding="utf-8")
            entry = {"run_id": doc["run_id"], "results": f"{doc['run_id']}/results.json",
                     "fingerprint": FP, "interrupted": False, **extra}
            fh.write(json.dumps(entry) + "\n")
    return root


def test_only_complete_runs_of_the_same_deployment_and_fingerprint_are_merged(tmp_path):
    root = _history(
        tmp_path,
        (_doc("r1", [10.0, 11.0]), {}),
        (_doc("r2-other-fp", [10.0]), {"fingerprint": {**FP, "draft_model": "noisy.gguf"}}),
        (_doc("r3-other-deployment", [10.0], deployment="elsewhere"), {}),
        (_doc("r4-interrupted", [10.0]), {"interrupted": True}),
        (_doc("r5-shorter-output", [10.0], output_tokens=32), {}),
        (_doc("r6-one-case", [10.0], cases={"reasoning-ctx13": 64}), {}),
        (_doc("r7", [12.0, 13.0, 14.0]), {}),
        (_doc("r8-this-run", [9.0]), {}))
    with (root / "history.jsonl").open("a", encoding="utf-8") as fh:
        fh.write('{"run_id": "cut short by a cra')
    # The line cut short is passed by, said once per read, naming the file and line.
    with pytest.warns(HistoryLineSkipped, match=r"history.jsonl line 9 is not a whole run"):
        found = past_runs(root, "box", FP, CASES, 5, exclude="r8-this-run").runs
        latest = past_runs(root, "box", FP, CASES, 1, exclude="r8").runs
    assert [r.run_id for r in found] == ["r7", "r1"]  # newest first
    assert found[0].slots["reasoning-ctx13"]["tok_s"] == {0: 12.013, 1: 13.013, 2: 14.013}
    assert [r.run_id for r in latest] == ["r8-this-run"]
    assert past_runs(tmp_path / "no-reports", "box", FP, CASES, 3).runs == []


def _baseline(tok_s: list[float]) -> Baseline:
    cases = {}
    for cid in CASES:
        context = int(cid.rsplit("ctx", 1)[1])
        values = {"tok_s": [v + context / 1000 for v in tok_s],
                  "step_ms": [20.0 + context / 100 + i for i in range(len(tok_s))]}
        cases[cid] = CaseBaseline("reasoning", context, 64,
                                  {m: summarize(v) for m, v in values.items()}, {},
                                  values=values)
    return Baseline("box", 0, "2026-12-02T00:00:00Z", "0.1.0", "abc", dict(FP), "test", False,
                    cases, {"reasoning": ContextFit(20.0, 0.01, 0.1, 2)}, {})


def _slots(base: Baseline) -> dict[str, dict[str, dict[int, float]]]:
    return {cid: {m: dict(enumerate(v)) for m, v in c.values.items()}
            for cid, c in base.cases.items()}


def test_runs_merge_slot_by_slot_keeping_one_runs_spread():
    this = _baseline([10.0, 20.0, 30.0, 40.0])
    earlier = [PastRun("r2", _slots(_baseline([12.0, 22.0]))),
               PastRun("r1", _slots(_baseline([14.0, 24.0, 34.0])))]
    new = merged(this, _slots(this), "r3", earlier)
    case = new.cases["reasoning-ctx13"]
    slots = [12.013, 22.013, 32.013, 40.013]  # medians of (10, 12, 14), (20, 22, 24), ...
    assert case.values["tok_s"] == pytest.approx(slots)
    spread = statistics.median([10.0, 5.0, 10.0])  # the runs' own MADs: 4, 2 and 3 slots
    assert case.metrics["tok_s"] == Summary(pytest.approx(statistics.median(slots)),
                                            pytest.approx(spread), 4)
    assert (new.runs, new.run_count) == (("r3", "r2", "r1"), 3)
    assert new.fits["reasoning"].b_ms_per_1k == pytest.approx(10.0)  # refitted: 1 ms / 100
    alone = merged(this, _slots(this), "r3", [])
    assert (alone.cases, alone.runs, alone.run_count) == (this.cases, ("r3",), 1)


def test_the_file_records_its_runs_and_older_files_count_as_one(tmp_path):
    store = BaselineStore(tmp_path)
    path = store.write_next(merged(_baseline([10.0, 11.0]), {}, "r2",
                                   [PastRun("r1", _slots(_baseline([12.0, 13.0])))]))
    assert json.loads(path.read_text(encoding="utf-8"))["runs"] == ["r2", "r1"]
    assert store.load("box").run_count == 2
    assert store.write_next(_baseline([10.0])) and store.load("box").run_count == 1
    data = json.loads(path.read_text(encoding="utf-8"))
    data.update(runs=["r2", 3], version=3)
    (tmp_path / "box" / "v3.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(BaselineError) as info:
        store.load("box")
    assert str(info.value) == (
        f"baseline {tmp_path / 'box' / 'v3.json'}: runs should be a list of run ids, found "
        "['r2', 3]: restore it from git or write a new version with --specperf-update-baselines.")


def test_a_run_judged_a_regression_enters_only_when_accepted(tmp_path):
    accepted_run = _doc("r3-accepted", [10.0])
    accepted_run["settings"].update(update_baselines=True, accept="new drafter")
    root = _history(
        tmp_path,
        (_doc("r1", [10.0]), {}),
        (_doc("r2-slow", [9.0]), {"failed": ["reasoning-ctx13"],
                                  "failed_factors": {"reasoning-ctx13": "step"}}),
        (accepted_run, {"failed": ["reasoning-ctx13"]}),
        (_doc("r4-both", [9.0]), {"failed": ["reasoning-ctx13", "reasoning-ctx1663"],
                                  "failed_factors": {"reasoning-ctx13": "step",
                                                     "reasoning-ctx1663": "acceptance"}}),
        (_doc("r5-fit", [9.0]), {"failed": ["reasoning-ctx13", "reasoning-fit", "sweep"]}))
    found = past_runs(root, "box", FP, CASES, 5)
    assert [r.run_id for r in found.runs] == ["r3-accepted", "r1"]
    assert [(r.run_id, r.factors) for r in found.left_out] == [
        ("r5-fit", {"reasoning-ctx13": "", "reasoning-fit": "", "sweep": ""}),
        ("r4-both", {"reasoning-ctx13": "step", "reasoning-ctx1663": "acceptance"}),
        ("r2-slow", {"reasoning-ctx13": "step"})]
    # An update that accepts a regression in reasoning-ctx13 takes the runs that regressed
    # there alone (their fit and sweep regress through it); one that regressed in another
    # case too stays out.
    taken = past_runs(root, "box", FP, CASES, 5, accepted={"reasoning-ctx13"})
    assert [r.run_id for r in taken.runs] == ["r5-fit", "r3-accepted", "r2-slow", "r1"]
    assert [r.run_id for r in taken.left_out] == ["r4-both"]
    # Left out runs do not count towards the runs asked for: the two newest that enter.
    assert [r.run_id for r in past_runs(root, "box", FP, CASES, 2).runs] == [
        "r3-accepted", "r1"]
    assert len(past_runs(root, "box", FP, CASES, 2).left_out) == 3


def test_the_update_says_which_runs_it_left_out_and_why():
    from specperf.baselines.merge import LeftOut
    from specperf.plugin.runbaseline import left_out_line
    assert left_out_line([LeftOut("r4", {"a-ctx13": "step", "a-ctx1663": "acceptance",
                                         "b-ctx13": "step"}),
                          LeftOut("r2", {"a-ctx13": ""})]) == (
        "  left out 2 runs that regressed: r4 (step time in a-ctx13, b-ctx13, acceptance in "
        "a-ctx1663); r2 (a regression in a-ctx13); a regressed run enters a merge only when "
        "the update accepts that regression.")
