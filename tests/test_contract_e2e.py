"""One contract, for real (issue 33): every status a run records is one of the contract's
words — case, fit and path verdicts and the predict-and-reconcile rows, read back from the
results.json of a real run against the simulator — and no judge spells a status itself."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from specperf.core.contract import REASONS, STATUSES
from test_parser_e2e import ARGS, SCALE, project_with_paths

JUDGE = Path(__file__).resolve().parents[1] / "src" / "specperf" / "judge"
# What `grep -rn '"fail"\|"pass"' src/specperf/judge` looks for.
LITERAL = re.compile(r'"fail"|"pass"')


def test_no_judge_spells_a_status_word_itself() -> None:
    """`grep -rn '"fail"\\|"pass"' src/specperf/judge` finds nothing: the words are the
    contract's constants (core/contract.py), and no Verdict is built with a literal status."""
    found = [f"{path.name}:{n}: {line.strip()}" for path in sorted(JUDGE.rglob("*.py"))
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if LITERAL.search(line)]
    assert found == []
    literal_status = []
    for path in sorted(JUDGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Verdict":
                status = node.args[1] if len(node.args) > 1 else next(
                    (k.value for k in node.keywords if k.arg == "status"), None)
                if isinstance(status, ast.Constant):
                    literal_status.append(f"{path.name}:{node.lineno}")
    assert literal_status == []


def _statuses(doc: dict) -> dict[str, set[str]]:
    """Every status word the record holds, by where it sits."""
    verdicts = doc["verdicts"]
    return {
        "case": {v["status"] for v in verdicts if re.search(r"-ctx\d+$", v["case_id"])},
        "fit": {v["status"] for v in verdicts if v["case_id"].endswith("-fit")},
        "path": {v["status"] for v in verdicts if " vs " in v["case_id"]},
        "reconcile": {r["status"] for r in doc["reconcile"]}
        | {v["reconcile"]["status"] for v in verdicts if v.get("reconcile")},
        "all": {v["status"] for v in verdicts},
    }


@pytest.mark.slow  # two whole perf sessions against a simulator
def test_every_status_in_a_real_runs_record_is_the_contracts(perf_project, start_sim,
                                                             tmp_path) -> None:
    sim = start_sim(time_scale=SCALE)
    project = project_with_paths(perf_project)
    # 64 tokens: any status will do, so long as it is the contract's (200 took 2 minutes).
    where = ("--endpoint", sim.url, "--baseline-dir", str(tmp_path / "baselines"),
             "--specperf-text-classes", "reasoning", "--specperf-contexts", "13,1663", *ARGS,
             "--output-tokens=64")
    marks = ("-m", "context_scaling or streaming or parser")
    written = project.run(*marks, *where, "--specperf-update-baselines",
                          env={"SPECPERF_REPORT_DIR": str(tmp_path / "r0")})
    assert written.ret == 0, written.stdout.str()
    result = project.run(*marks, *where, env={"SPECPERF_REPORT_DIR": str(tmp_path / "r1")})
    [path] = (tmp_path / "r1").glob("*/results.json")
    doc = json.loads(path.read_text(encoding="utf-8"))
    found = _statuses(doc)
    # Every kind of judgement was made and recorded...
    assert all(found[k] for k in ("case", "fit", "path", "reconcile")), \
        (found, result.stdout.str())
    # ...and each in the contract's words, its reasons the contract's too.
    assert set().union(*found.values()) <= set(STATUSES), found
    assert {v.get("reason", "") for v in doc["verdicts"]} <= {"", *REASONS}
    assert {r["reason"] for r in doc["reconcile"]} <= {"", *REASONS}
