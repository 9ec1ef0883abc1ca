"""`specperf bisect` end to end: a real simulator process on loopback, the shipped deploy
script (examples/sim_deploy.py) putting each version's knobs and drafter on it, a deploy log
whose culprits come from a seeded draw, and the command's JSON, text and HTML."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from specperf.bisect import report
from specperf.cli import main
from specperf.views.screen import WIDTH
from test_first_screen import MAX_WORDS, sentences

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "examples" / "sim_deploy.py"
# Short requests on one context, two classes: each version costs seconds. A 30 % step rise
# and a drafter 20 % worse are far above what a loaded 2-core box moves a same-night figure.
MEASURE = ("--contexts", "1663", "--classes", "padding,reasoning", "--output-tokens", "48",
           "--repeats", "2", "--deploy-timeout", "60")
SCALE = 0.05


def _draw(path: Path) -> dict[str, Any]:
    """The culprits and failing deploys the file was written with, from its own lines."""
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.startswith("{")]
    first = {knob: next(x["name"] for x in lines if knob in x["sim"])
             for knob in ("step_time_mult", "acceptance_mult")}
    return {"step time": first["step_time_mult"], "acceptance": first["acceptance_mult"],
            "fails": {x["name"] for x in lines if x.get("deploy_fails")}}


def test_bisect_on_the_simulator_names_both_drawn_culprits(
        start_sim: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SPECPERF_LOCK_DIR", str(tmp_path / "locks"))
    sim = start_sim(time_scale=SCALE)
    versions = tmp_path / "versions.jsonl"
    from importlib.util import module_from_spec, spec_from_file_location
    spec = spec_from_file_location("sim_deploy", DEPLOY)
    assert spec is not None and spec.loader is not None
    sim_deploy = module_from_spec(spec)
    spec.loader.exec_module(sim_deploy)
    sim_deploy.history(16, "e2e-2026", 0.3, 0.8, 1, versions)
    draw = _draw(versions)
    deploy = f"{sys.executable} {DEPLOY} deploy --endpoint {sim.url} --versions {versions} " \
             "{version}"
    page = tmp_path / "bisect.html"
    code = main(["bisect", "--endpoint", sim.url, "--versions", str(versions), "--deploy", deploy,
                 *MEASURE, "--json", "--html", str(page)])
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert f"specperf bisect: page {page}" in captured.err.splitlines()  # where --html wrote
    assert doc["exit_code"] == code
    named = {f["factor"]: f for f in doc["factors"]}
    assert set(named) == {"step time", "acceptance"}
    skipped = {v["name"] for v in doc["versions"] if v["state"] == "skipped"}
    why = {v["name"]: v["skipped"] for v in doc["versions"] if v["state"] == "skipped"}
    assert skipped <= draw["fails"], why  # only a failing deploy is skipped, and it is named
    for factor in ("step time", "acceptance"):
        found = named[factor]
        if found["status"] == "found":
            assert found["first_bad"] == draw[factor]
        else:  # a failing deploy right before the culprit: the range, as git bisect answers
            assert draw[factor] in found["candidates"]
            assert set(found["candidates"]) - {draw[factor]} <= skipped
    assert code == (0 if all(f["status"] == "found" for f in named.values()) else 6)
    acceptance = named["acceptance"]
    if acceptance["status"] == "found":
        assert acceptance["culprit_change"]["high"] < -0.1  # the drafter: avg commit fell
        # the culprit's deploy was waited for until /server_info reported its drafter
        assert doc["fingerprints"][draw["acceptance"]]["draft_model"] == \
            "specperf-sim/drafter-ckpt2"
    assert named["step time"]["regression"]["low"] > 0.2
    assert doc["versions_measured"] <= 12 and doc["gpu_s"] > 0
    assert doc["restored"] == "v15"  # the box runs what it ran before the bisect
    faults = httpx.get(sim.url + "/_sim/faults").json()
    assert (faults["step_time_mult"], faults["acceptance_mult"]) == (1.3, 0.8)
    html = page.read_text()
    assert html.count('data-plot="bisect-') == 3 and draw["step time"] in html
    # the probe found the simulator: every view says so, and its seconds are simulated time
    assert doc["simulated"] is True
    assert '<span class="badge sim">SIMULATED</span>' in html and "GPU time" not in html
    # the text the same run prints without --json: its answer first, in one screen
    screen = report.text(doc, [f"  page: {page}"]).splitlines()
    assert max(len(line) for line in screen) <= WIDTH
    if code == 0:
        assert screen[0] == (f"specperf bisect: culprit found (exit 0): {draw['acceptance']} made "
                             f"acceptance worse, {draw['step time']} made step time worse.")
    assert all(len(s.split()) <= MAX_WORDS for s in sentences(screen))
