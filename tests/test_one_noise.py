"""One noise model and one night for every reader (issue 49): on one history, with the run noise
stated in the environment and the night window in the project's ini, the gate's and nightly's
noise model (the plugin's, from pytest's own configuration), ``specperf explain``'s and the
trend's drift scan count the same nights, and explain and the gate state the same run-to-run
figure. The window is chosen so that the default 12 h would count fewer nights."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from specperf.cli import _parser, main
from specperf.cli import explain as cli_explain
from specperf.cli import trend as cli_trend
from specperf.core.noise import NoiseModel
from specperf.plugin.fixtures import STATE
from specperf.plugin.runbaseline import RunBaseline
from specperf.record import trend as record_trend
from specperf.record.files import write
from specperf.servers.probe import ServerInfo
from specperf.store.history import read_history
from store_fixtures import doc

BOX = "box-a"
METRICS = ("tok_s", "step_ms", "avg_commit")
# (day, hour, tok/s): nights at 02:00 with retries an hour later, and a second night at 10:00
# on some days — 8 h after the first: its own night with a 2 h window, not with 12 h; a run
# 2 h after a night's first starts another.
RUNS = ((1, 2, 50.0), (1, 3, 50.6), (1, 10, 48.9), (2, 2, 51.2), (3, 2, 49.4), (3, 3, 49.0),
        (3, 4, 49.8), (3, 10, 50.9), (4, 2, 50.3), (5, 2, 48.7), (5, 10, 51.5), (6, 2, 49.9))


def _history(reports: Path) -> None:
    for n, (day, hour, tok_s) in enumerate(RUNS):
        d = doc(f"r{n:02d}", created=f"2026-11-{day:02d}T{hour:02d}:00:00Z", label=BOX,
                tok_s=tok_s)
        write(d, reports)


def _gate_noise(pytester: pytest.Pytester) -> NoiseModel:
    """The model the perf run judges with: settings from pytest's configuration (env, ini)."""
    settings = pytester.parseconfigure().stash[STATE].settings
    server = ServerInfo(url=BOX, flavour="native", api="sglang", model="m", fingerprint={},
                        time_scale=1.0, simulated=False, tokenizer_path=None,
                        max_model_len=None, metrics=True, server_timings=True,
                        acceptance_source="response", acceptance_available=("response",))
    return RunBaseline(settings).noise(server)


def _explain_noise() -> NoiseModel:
    args: argparse.Namespace = _parser().parse_args(["explain", "--deployment", "dep"])
    return cli_explain.noise(args)


def test_explain_the_gate_and_the_trend_read_one_noise_model(pytester: pytest.Pytester,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\nspecperf_night_window = "2"\n')
    monkeypatch.setenv("SPECPERF_RUN_NOISE", "0.01")
    _history(pytester.path / "reports")

    gate, explained = _gate_noise(pytester), _explain_noise()
    entries = read_history(pytester.path / "reports")
    nights = record_trend.nights(record_trend.build(entries, "full", cli_trend.night_window(None)))
    assert gate.nights == explained.nights == len(nights.labels) == 10  # 12 h: 6
    assert explained.stated and gate.stated and explained.total == gate.total == 0.01
    for metric in METRICS:
        g, e = gate.of(metric), explained.of(metric)
        assert g.text() == e.text() and g.text().endswith("from 10 nights")
        assert (g.common, g.own, g.df, g.source) == (e.common, e.own, e.df, e.source)

    assert main(["trend", "--history", str(pytester.path / "reports")]) == 0
    page = (pytester.path / "reports" / "trend.html").read_text()
    assert ("No persistent shift: no factor or case moved over the last 4 nights against the "
            "6 before them (drift.py).") in page


def test_a_bad_night_window_names_where_it_came_from(pytester: pytest.Pytester,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\nspecperf_night_window = "soon"\n')
    (pytester.path / "history.jsonl").write_text("")
    assert main(["trend", "--history", str(pytester.path / "history.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err == ("specperf trend: ini specperf_night_window = 'soon' is not valid: expected a "
                   "positive number.\n")
