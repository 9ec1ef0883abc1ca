"""Every judge's figures are bit for bit those of a given commit: the judges' unit tests (the
base commit's copies, so both trees see the same inputs) run over that commit's package and
over this tree's, recording every value the judged modules return (tests/figtrace.py), and
the two records are compared number by number (equal, or within 1e-12).

On demand, a few minutes: ``SPECPERF_FIGURES_BASE=<commit> pytest tests/figures_check.py``
(named so that a plain ``pytest`` does not collect it: a skip in CI is a test that never ran).
Issue 48 ran it against the commit before core/interval.py took over every standard error.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BASE = os.environ.get("SPECPERF_FIGURES_BASE", "")
JUDGE_TESTS = ("ab", "bisect", "bisect_history", "concurrency", "contract", "exact", "explain",
               "explain_defaults", "fit_uncertainty", "noise", "one_interval", "pathverdict",
               "positions", "positions_claims", "reconcile", "sweep", "sweep_baseline_values",
               "verdict")
# Against a live simulator: its timings differ from run to run whatever the code.
LIVE = ("tests/test_explain_defaults.py::"
        "test_the_live_form_names_the_deployment_and_marks_a_simulator")
# core/interval.py's helpers (and the quantile Move.interval now takes through it) are called
# only after the change; format_spread moved to core/noise.py, which is not traced.
KEEP = {"comparison", "fixed_se", "fixed_ses", "median_var", "median_se", "satterthwaite"}


def _trace(base: Path, src: Path, out: Path) -> list[list[Any]]:
    files = [f"tests/test_{name}.py" for name in JUDGE_TESTS
             if (base / "tests" / f"test_{name}.py").exists()]
    env = {**os.environ, "FIGTRACE_OUT": str(out),
           "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(src)])}
    done = subprocess.run([sys.executable, "-m", "pytest", *files, "-q", "-p", "figtrace",
                           "-p", "no:cacheprovider", "-p", "no:xdist", "--deselect", LIVE],
                          cwd=base, env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    return [r for r in rows if not (r[1] == "core/interval.py" and r[2] not in KEEP
                                    or r[2] == "format_spread")]


def _differences(a: Any, b: Any, where: str) -> list[str]:
    if isinstance(a, float) or isinstance(b, float):
        if isinstance(a, int | float) and isinstance(b, int | float) \
                and math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-15):
            return []
        return [f"{where}: {a!r} → {b!r}"]
    if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        return [d for k in a for d in _differences(a[k], b[k], f"{where}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (u, v) in enumerate(zip(a, b, strict=True))
                for d in _differences(u, v, f"{where}[{i}]")]
    return [] if a == b else [f"{where}: {a!r} → {b!r}"[:300]]


def test_the_judges_figures_are_the_base_commits(tmp_path: Path) -> None:
    assert BASE, "set SPECPERF_FIGURES_BASE=<commit>: the commit whose figures to compare with"
    base = tmp_path / "base"
    base.mkdir()
    archive = subprocess.run(["git", "archive", "--format=tar", BASE], cwd=ROOT,
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
    before = _trace(base, base / "src", tmp_path / "before.jsonl")
    after = _trace(base, ROOT / "src", tmp_path / "after.jsonl")
    assert len(before) == len(after) > 10_000
    found = [d for i, (a, b) in enumerate(zip(before, after, strict=True))
             for d in _differences(a, b, f"#{i} {a[0]} {a[1]}:{a[2]}")]
    assert not found, "\n".join(found[:20])
