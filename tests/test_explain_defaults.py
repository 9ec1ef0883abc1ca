"""What ``specperf explain`` does without being told (issue 41, item 5): the live form names
the deployment from the server's fingerprint and marks a simulator SIMULATED with its times
as simulated time; the history pytest writes is read by default; a missing baseline prints a
command that works as printed.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import pytest

from explain_load import Load, prompt_ids
from specperf.cli import explain as cli

BASELINES = Path(__file__).resolve().parents[1] / "baselines"
REAL_BOX = "kimi-k26-ddtree-8xpro6000"
OFFLINE = ("--deployment", REAL_BOX, "--baseline-dir", str(BASELINES), "--class", "reasoning",
           "--context", "3500", "--observed-tok-s", "29")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="specperf")
    cli.add_subcommand(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["explain", *argv])
    code = args.run(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_the_live_form_names_the_deployment_and_marks_a_simulator(start_sim, capsys, tmp_path):
    sim = start_sim(time_scale=0.05)
    ids = prompt_ids(sim.url, "reasoning", 1000)
    card = tmp_path / "card.html"
    with Load(sim.url, ids, 100) as load:
        deadline = time.monotonic() + 60
        while load.finished < 1:  # the window starts with traffic flowing
            assert time.monotonic() < deadline and not load.errors, load.errors
            time.sleep(0.05)
        code, out, err = run(capsys, "--endpoint", sim.url, "--baseline-dir", str(BASELINES),
                             "--window", "2", "--html", str(card))
    assert code == 0, out + err
    lines = out.splitlines()
    assert lines[0].startswith("specperf explain: SIMULATED pass — the observation is what "
                               "this deployment does"), out
    assert any(line.startswith("  predicted ") for line in lines), out
    assert any(line.startswith("  observed ") and "the predicted" in line for line in lines), out
    live = next(line for line in lines if line.startswith("  live over "))
    assert " s of simulated time (" in live, out
    assert lines[-2] == ("  SIMULATED: the server is the simulator; its times are simulated "
                         "time, not a real box's.")
    assert lines[-1] == f"specperf explain: card {card}"  # where --html wrote
    html = card.read_text(encoding="utf-8")
    assert '<span class="badge sim">SIMULATED</span>' in html
    assert "sim-kimi-k26-ddtree v" in html  # the deployment its fingerprint names


def _history_line(i: int, f: float) -> dict[str, object]:
    return {"run_id": f"r{i}", "label": "http://box:30000", "kind": "full",
            "created": f"2026-11-2{i}T00:00:00Z",
            "baseline": {"deployment": REAL_BOX, "version": 1},
            "cells": {"reasoning-ctx3333": {"tok_s": 29.0 * f, "step_ms": 100 / f},
                      "padding-ctx13": {"tok_s": 139.6 * f, "step_ms": 34 / f}}}


def test_the_history_pytest_writes_is_read_by_default(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SPECPERF_REPORT_DIR", raising=False)
    _, out, _ = run(capsys, *OFFLINE, "--json")
    assert json.loads(out)["prediction"]["noise"].endswith("no history yet")
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "history.jsonl").write_text("".join(
        json.dumps(_history_line(i, f)) + "\n" for i, f in enumerate((1.0, 1.01, 0.99, 1.0))))
    # Offline, the box is the one whose runs were judged against --deployment.
    _, out, _ = run(capsys, *OFFLINE, "--json")
    noise = json.loads(out)["prediction"]["noise"]
    assert noise.startswith("run-to-run ±") and noise.endswith("% from 4 nights"), noise


def test_a_missing_baseline_prints_a_command_that_works_as_printed(capsys, tmp_path):
    code, _, err = run(capsys, "--deployment", "prod", "--baseline-dir", str(tmp_path),
                       "--class", "reasoning", "--context", "3500", "--observed-tok-s", "29")
    assert code == 3
    assert err == (
        f"specperf explain: no baseline for deployment 'prod' in {tmp_path / 'prod'}: create "
        "one with `pytest perf_tests -m context_scaling --specperf-endpoint URL "
        f"--specperf-deployment prod --specperf-baseline-dir {tmp_path} "
        "--specperf-update-baselines` against a quiet server (URL: the deployment's server).\n")


def test_offline_still_needs_a_deployment(capsys):
    code, _, err = run(capsys, "--class", "reasoning", "--context", "3500",
                       "--observed-tok-s", "29")
    assert code == 2
    assert err == ("specperf explain: explain needs --deployment NAME offline (live, with "
                   "--endpoint, the server's fingerprint names it).\n")
