"""A record you can trust: the samples that were judged are the samples recorded; a session
that attempted nothing writes nothing; a run's kind says what happened; errored and stopped
cases keep their samples; a fleet's cross-box table shows an errored case.

Whole perf sessions (pytester subprocesses) against real simulator processes, and the record's
pieces from values.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from perf_project import FAST, ROOT
from specperf.fleet import page as fleet_page
from specperf.fleet.record import cross_lines
from specperf.record import readers as record_readers
from specperf.record import runkind
from specperf.record import schema as record_schema
from specperf.record import trend as record_trend

SCALE = 0.5


def _project(pytester: pytest.Pytester, *names: str) -> None:
    pytester.makeini("[pytest]\nfilterwarnings = error\naddopts = --strict-markers\n")
    for name in names:
        pytester.path.joinpath(name).write_text((ROOT / "perf_tests" / name).read_text())


def _run(pytester: pytest.Pytester, tmp: Path, *args: str) -> pytest.RunResult:
    mp = pytest.MonkeyPatch()
    try:
        mp.setenv("SPECPERF_LOCK_DIR", str(tmp / "locks"))
        return pytester.runpytest_subprocess(*FAST, *args, timeout=300)
    finally:
        mp.undo()


def _records(where: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(where.glob("reports/*/results.json"))]


def _history(where: Path) -> list[dict]:
    path = where / "reports" / "history.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _digests(measurement: dict) -> list[tuple]:
    """What identifies each request of a measurement: its timings and token counts."""
    return [(s["wall_s"], s["verify_steps"], s["prompt_tokens"], s["warmup"])
            for s in measurement["samples"]]


# -- 1. one case id, one measurement ---------------------------------------------------------
@pytest.mark.slow  # a whole perf session or gate run (README: test commands)
def test_a_regressed_gate_records_the_samples_its_verdict_judged(pytester, clean_sim, tmp_path):
    sim = clean_sim
    _project(pytester, "test_context_scaling.py", "test_smoke.py")
    base = ("--endpoint", sim.url, "--baseline-dir", str(tmp_path / "b"), "--deployment", "d",
            "--specperf-contexts=13,3333")
    first = _run(pytester, tmp_path, "-m", "context_scaling", *base, "--specperf-update-baselines")
    first.stdout.fnmatch_lines(["specperf: wrote baseline */d/v1.json"])
    httpx.post(f"{sim.url}/_sim/faults", json={"step_time_mult": 1.3}).raise_for_status()
    before = {p.name for p in (pytester.path / "reports").glob("2*")}
    # The simulator's run-to-run noise stated, so the 30 % step fault is judged (a fail).
    result = _run(pytester, tmp_path, "-v", "test_smoke.py", *base, "--specperf-run-noise=0.005")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    [run_dir] = [p for p in (pytester.path / "reports").glob("2*") if p.name not in before]
    doc = json.loads((run_dir / "results.json").read_text())
    assert record_schema.validate(doc, record_schema.schema()) == []
    judged = next(v for v in doc["verdicts"] if v["case_id"] == "reasoning-ctx3333")
    assert judged["status"] == "fail", judged
    recorded = doc["measurements"]["reasoning-ctx3333"]
    # The parser test's native route is its own measurement, in the record's paths only.
    [path_run] = [p for p in doc["paths"] if p["case"]["id"] == "reasoning-ctx3333"]
    native = path_run["paths"]["native"]["measurement"]
    assert not set(_digests(native)) & set(_digests(recorded))
    # The recorded samples are the judged ones: their median is the verdict's.
    tok = record_readers.median(recorded, "tok_s")
    assert tok == pytest.approx(judged["details"]["tok_s"]["new"])
    step = record_readers.median(recorded, "step_ms")
    assert step == pytest.approx(judged["details"]["step_ms"]["new"])
    assert _history(pytester.path)[-1]["cells"]["reasoning-ctx3333"]["tok_s"] == \
        pytest.approx(tok)
    assert f"{tok:.1f}" in (run_dir / "report.html").read_text()
    row = next(line for line in result.stdout.lines
               if line.strip().startswith("3333 | reasoning"))
    assert f"{tok:.1f}" in row and f"{step:.1f}" in row, row


# -- 2. a session that attempted nothing writes nothing -----------------------------------------
def test_collect_only_writes_no_run(pytester, tmp_path):
    _project(pytester, "test_context_scaling.py")
    result = _run(pytester, tmp_path, "-m", "context_scaling", "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert not (pytester.path / "reports").exists()


def test_a_session_that_deselected_every_perf_test_writes_no_run(pytester, tmp_path):
    _project(pytester, "test_context_scaling.py")
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = _run(pytester, tmp_path, "test_plain.py")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert not (pytester.path / "reports").exists()


def test_the_trend_lists_an_empty_line_without_plotting_it():
    empty = {"run_id": "r0", "created": "1", "cells": {}, "kind": "full", "error_count": 0,
             "failed": []}
    full = {"run_id": "r1", "created": "2", "cells": {"padding-ctx13": {"tok_s": 50.0}},
            "kind": "full"}
    built = record_trend.build([empty, full])
    assert [r["run_id"] for r in built.runs] == ["r1"]
    assert built.left_out() == {"empty": 1}


# -- 3. run kinds say what happened -----------------------------------------------------------
def _errored(n: int, kinds: list[str]) -> dict:
    outcomes = {f"t.py::test[padding-ctx{i}]": "error" for i in range(n)}
    return {"outcomes": outcomes, "error_kinds": {k: kinds for k in outcomes}}


@pytest.mark.parametrize(("kinds", "stopped", "label"), [
    (["GpuLockTimeout", "SpecperfError"], "lock-timeout",
     "full sweep, LOCK TIMEOUT (nothing was measured: another run held the GPU lock; 2 of 2 "
     "perf tests errored)"),
    (["BaselineError", "SpecperfError"], "no-baseline",
     "full sweep, NO BASELINE (nothing was measured: the deployment's baseline is missing "
     "or unreadable; 2 of 2 perf tests errored)"),
    (["ConfigError", "SpecperfError"], "config-error",
     "full sweep, USAGE ERROR (nothing was measured: the settings point at no LLM server or "
     "ask for what the server cannot do; 2 of 2 perf tests errored)"),
    (["NotAnLlmServer", "EndpointError", "SpecperfError"], "config-error",
     "full sweep, USAGE ERROR (nothing was measured: the settings point at no LLM server or "
     "ask for what the server cannot do; 2 of 2 perf tests errored)"),
    (["BadStatus", "EndpointError", "SpecperfError"], "outage",
     "full sweep, OUTAGE (nothing was measured: 2 of 2 perf tests errored)"),
])
def test_a_run_that_measured_nothing_says_why(kinds, stopped, label):
    found = _errored(2, kinds)
    kind = runkind.classify(ab=False, interrupted=False, outcomes=found["outcomes"], smoke=(),
                            scaling_cases={"padding-ctx0", "padding-ctx1"},
                            planned=["padding-ctx0", "padding-ctx1"], measured=0,
                            error_kinds=found["error_kinds"])
    assert (kind.stopped_by, kind.outage, kind.label()) == (stopped, stopped == "outage", label)
    assert kind.comparable == "partial"


def test_a_custom_context_list_is_its_own_kind_and_not_plotted_with_full_sweeps():
    outcomes = {"t.py::test[padding-ctx13]": "passed", "t.py::test[padding-ctx3333]": "passed"}
    kind = runkind.classify(ab=False, interrupted=False, outcomes=outcomes, smoke=(),
                            scaling_cases={"padding-ctx13", "padding-ctx3333"},
                            planned=["padding-ctx13", "padding-ctx3333"], measured=2,
                            custom=runkind.custom_matrix((13, 3333), (13, 1663, 3333, 5553),
                                                         ("padding",), ("padding",)))
    assert (kind.kind, kind.label()) == ("custom", "custom sweep (contexts 13, 3333)")
    custom = {"run_id": "c", "created": "2", "cells": {"padding-ctx13": {"tok_s": 9.0}},
              "kind": "custom"}
    full = {"run_id": "f", "created": "1", "cells": {"padding-ctx13": {"tok_s": 50.0}},
            "kind": "full"}
    assert [r["run_id"] for r in record_trend.build([full, custom]).runs] == ["f"]
    assert [r["run_id"] for r in record_trend.build([full, custom], kind="custom").runs] == ["c"]
    for stopped in ("lock-timeout", "no-baseline", "config-error"):
        line = {**full, "stopped_by": stopped, "cells": {}}
        assert record_trend.group(line) == stopped


@pytest.mark.slow  # a whole perf session or gate run (README: test commands)
def test_require_baseline_without_one_is_recorded_as_no_baseline(pytester, clean_sim,
                                                                 tmp_path):
    sim = clean_sim
    _project(pytester, "test_context_scaling.py")
    result = _run(pytester, tmp_path, "-m", "context_scaling", "--endpoint", sim.url,
                  "--baseline-dir", str(tmp_path / "none"), "--specperf-require-baseline")
    result.assert_outcomes(errors=6)
    [doc] = _records(pytester.path)
    assert doc["run"]["stopped_by"] == "no-baseline" and doc["run"]["outage"] is False
    assert doc["run"]["label"].startswith("custom sweep (contexts 13, 1663), NO BASELINE ("), doc
    assert _history(pytester.path)[0]["stopped_by"] == "no-baseline"


@pytest.mark.slow  # a whole perf session or gate run (README: test commands)
def test_a_context_beyond_the_servers_limit_is_a_usage_error_not_an_outage(pytester, clean_sim,
                                                                           tmp_path):
    sim = clean_sim
    _project(pytester, "test_context_scaling.py")
    result = _run(pytester, tmp_path, "-m", "context_scaling", "--endpoint", sim.url,
                  "--specperf-contexts=500000", "--specperf-text-classes=padding")
    assert result.ret != pytest.ExitCode.OK
    [doc] = _records(pytester.path)
    assert doc["measurements"] == {}
    assert doc["run"]["stopped_by"] == "config-error", doc["run"]
    assert "USAGE ERROR" in doc["run"]["label"]


@pytest.mark.slow  # a whole perf session or gate run (README: test commands)
def test_a_gpu_lock_timeout_is_recorded_as_such(pytester, clean_sim, tmp_path):
    from specperf.measure.lock import GpuLock, lock_path_for

    sim = clean_sim
    _project(pytester, "test_context_scaling.py")
    with GpuLock(lock_path_for(sim.url, tmp_path / "locks"), timeout_s=5):
        result = _run(pytester, tmp_path, "-m", "context_scaling", "--endpoint", sim.url,
                      "--specperf-gpu-lock-timeout=1")
    assert result.ret != pytest.ExitCode.OK
    [doc] = _records(pytester.path)
    assert doc["run"]["stopped_by"] == "lock-timeout", (doc["run"], result.stdout.str())
    assert "LOCK TIMEOUT" in doc["run"]["label"]


# -- 4. errored and interrupted cases keep their samples -----------------------------------------
@pytest.mark.slow  # a whole perf session or gate run (README: test commands)
def test_an_unstable_case_keeps_every_sample_it_took(pytester, clean_sim, tmp_path):
    sim = clean_sim
    _project(pytester, "test_context_scaling.py")
    result = _run(pytester, tmp_path, "-v", "-m", "context_scaling", "--endpoint", sim.url,
                  "--specperf-text-classes=padding", "--specperf-contexts=13",
                  "--specperf-max-spread=0.0001", "--specperf-max-repeats=4")
    result.stdout.fnmatch_lines(["*UnstableMeasurement*"])
    [doc] = _records(pytester.path)
    assert record_schema.validate(doc, record_schema.schema()) == []
    partial = doc["partial"]["padding-ctx13"]
    assert partial["state"] == "errored"
    assert partial["reason"].startswith("UnstableMeasurement: padding-ctx13:")
    measured = [s for s in partial["samples"] if not s["warmup"]]
    assert len(measured) == 4
    printed = [line for line in result.stdout.lines
               if line.strip().startswith("padding-ctx13 ") and "repeat" in line]
    assert len(printed) == len(measured), result.stdout.str()
    assert "padding-ctx13" not in doc["measurements"]
    assert _history(pytester.path)[0]["partial"] == ["padding-ctx13"]
    assert doc["run"]["stopped_by"] == "unstable"  # too noisy to judge is no outage


@pytest.mark.slow  # a whole perf session or gate run (README: test commands)
def test_an_interrupted_case_keeps_the_samples_it_took(pytester, start_sim, tmp_path):
    sim = start_sim(time_scale=0.2)
    _project(pytester, "test_context_scaling.py")
    env = {**os.environ, "SPECPERF_LOCK_DIR": str(tmp_path / "locks"), "PYTHONUNBUFFERED": "1"}
    env.pop("SPECPERF_REPORT_DIR", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", "-m",
         "context_scaling", "--endpoint", sim.url, "--output-tokens=200",
         "--specperf-contexts=13,1663", "test_context_scaling.py"],
        cwd=pytester.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + 120
    for line in proc.stdout:
        seen.append(line)
        if "padding-ctx1663 repeat 1/" in line:
            break
        assert time.monotonic() < deadline, "".join(seen)
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=120)
    out = "".join(seen) + rest
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
    [doc] = _records(pytester.path)
    assert record_schema.validate(doc, record_schema.schema()) == []
    partial = doc["partial"]["padding-ctx1663"]
    assert partial["state"] == "interrupted"
    printed = [line for line in out.splitlines() if line.strip().startswith("padding-ctx1663 ")]
    assert len(partial["samples"]) >= len(printed) >= 2, out


# -- 5. the fleet's cross-box table shows an errored case --------------------------------------
def _part(name: str, measurements: dict, outcomes: dict) -> dict:
    return {"name": name, "document": {"measurements": measurements, "verdicts": [],
                                       "outcomes": outcomes}}


def _measured(cid: str) -> dict:
    return {"case": {"id": cid}, "summaries": {"tok_s": {"median": 50.0},
                                               "step_ms": {"median": 30.0},
                                               "avg_commit": {"median": 4.5}}}


def test_the_fleet_cross_table_shows_an_errored_case_as_an_error():
    ok = _part("a", {"padding-ctx13": _measured("padding-ctx13")},
               {"t.py::test_context_scaling[a-padding-ctx13]": "passed"})
    down = _part("b", {}, {"t.py::test_context_scaling[b-padding-ctx13]": "error",
                           "t.py::test_context_scaling[b-padding-ctx1663]": "error"})
    html = fleet_page.cross_table([ok, down])
    assert 'data-case="padding-ctx13"' in html and 'data-case="padding-ctx1663"' in html
    assert 'data-endpoint="b" data-status="error">error</td>' in html
    lines = cross_lines([("a", ok["document"]["measurements"]), ("b", {})],
                        [set(), fleet_page.errored_cases(down["document"]["outcomes"])])
    row = next(line for line in lines if line.startswith("padding-ctx1663"))
    assert row.split("|")[2].strip() == "error"
    assert lines[-1].startswith("padding-ctx1663")


def test_the_report_header_flags_a_run_stopped_before_measuring():
    from specperf.views import page

    for stopped in ("lock-timeout", "no-baseline", "config-error"):
        shown = page.section("kind", {"run": {"kind": "full", "label": "x",
                                              "stopped_by": stopped}})
        assert 'class="warn"' in shown, stopped
    assert 'class="warn"' not in page.section("kind", {"run": {"kind": "full",
                                                             "label": "full sweep"}})
