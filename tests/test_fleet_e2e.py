"""A fleet in one run against real simulator processes: outcomes per endpoint, the report in
headless Chromium, and two runs over overlapping fleets that never measure one box at once.

The scenario (one per module): three simulators; ``regressed`` has its step time raised by
30 % (``/_sim/faults``), ``stopped`` is killed as soon as it has served the first request of
the run's second case. One ``pytest -n 3 --endpoints FILE`` session measures all three.
Timing (wall time against the slowest endpoint) is left to benchmarks/fleet_wall.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from browser import chromium, needs_chromium
from perf_project import FAST, ROOT
from sim_fixtures import SimProcess
from slowa_runs import once

# Whole perf sessions against simulators: `pytest -m slow` (README: test commands).
pytestmark = pytest.mark.slow

CASES = ("--text-classes=reasoning", "-m", "context_scaling", "-p", "no:randomly")
SECOND_CASE_TOKENS = 1663  # the prompt length of the run's second case (FAST's contexts)


@dataclass
class FleetRun:
    """One finished fleet session."""

    output: str
    code: int
    project: Path
    urls: dict[str, str]
    stopped_after: int  # requests the stopped simulator had served when it was killed

    @property
    def run_dir(self) -> Path:
        dirs = sorted((self.project / "reports").glob("2*"))
        return dirs[-1]

    @property
    def doc(self) -> dict:
        return json.loads((self.run_dir / "results.json").read_text())

    def part(self, name: str) -> dict:
        return next(p for p in self.doc["endpoints"] if p["name"] == name)


def _project(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pytest.ini").write_text("[pytest]\nfilterwarnings = error\n"
                                     "addopts = --strict-markers\n")
    shutil.copy(ROOT / "perf_tests" / "test_context_scaling.py", root)
    return root


def _env(project: Path) -> dict[str, str]:
    return {**os.environ, "SPECPERF_LOCK_DIR": str(project.parent / "locks"),
            "SPECPERF_REPORT_DIR": str(project / "reports")}


def _pytest(project: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "pytest", *FAST, *CASES, *args],
                            cwd=project, env=_env(project), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _fleet_file(path: Path, urls: dict[str, str]) -> Path:
    path.write_text("".join(f'[[endpoint]]\nname = "{n}"\nurl = "{u}"\n\n'
                            for n, u in urls.items()))
    return path


def _copy_baseline(base: Path, source: str, target: str) -> None:
    """Identical simulators share one measured baseline, filed under each deployment."""
    data = json.loads((base / source / "v1.json").read_text())
    data["deployment"] = target
    (base / target).mkdir()
    (base / target / "v1.json").write_text(json.dumps(data, indent=1, sort_keys=True))


def _truth(url: str) -> list[dict]:
    requests: list[dict] = httpx.get(f"{url}/_sim/truth", timeout=5).json()["requests"]
    return requests


def _stop_halfway(sim: SimProcess, run: subprocess.Popen[str], found: list[int]) -> None:
    """Kill the simulator once it has served the first request of the second case."""
    while run.poll() is None:
        truth = _truth(sim.url)
        if any(r["prompt_tokens"] >= SECOND_CASE_TOKENS for r in truth):
            sim.process.kill()
            found.append(len(truth))
            return
        time.sleep(0.05)


@pytest.fixture(scope="module")
def fleet_run(start_sim, tmp_path_factory) -> FleetRun:
    """The scenario's one fleet session, run once per test session (any xdist worker)."""
    def produce(root: Path) -> None:
        project = _project(root / "project")
        sims = {name: start_sim(time_scale=0.5) for name in ("healthy", "regressed", "stopped")}
        urls = {name: sim.url for name, sim in sims.items()}
        base = project / "baselines"
        writer = _pytest(project, "--endpoint", urls["healthy"], "--deployment", "healthy",
                         "--update-baselines", "--baseline-repeats=3", "--baseline-dir",
                         str(base))
        out, _ = writer.communicate(timeout=300)
        assert writer.returncode == 0, out
        for name in ("regressed", "stopped"):
            _copy_baseline(base, "healthy", name)
        httpx.post(f"{urls['regressed']}/_sim/faults", json={"step_time_mult": 1.3}, timeout=5)
        fleet = _fleet_file(project / "fleet.toml", urls)
        # Default settings, no history: the 3 % prior (knowledge, docs/noise.md) still
        # names the 30 % step-time fault on its first night.
        run = _pytest(project, "-n", "3", "--endpoints", str(fleet), "--baseline-dir", str(base),
                      "-rA")
        killed: list[int] = []
        stopper = threading.Thread(target=_stop_halfway, args=(sims["stopped"], run, killed))
        stopper.start()
        out, _ = run.communicate(timeout=600)
        stopper.join()
        (root / "run.json").write_text(json.dumps({
            "output": out, "code": run.returncode, "urls": urls,
            "stopped_after": killed[0] if killed else 0}))
    root = once(tmp_path_factory, "fleet-run", produce)
    done = json.loads((root / "run.json").read_text())
    return FleetRun(done["output"], done["code"], root / "project", done["urls"],
                    done["stopped_after"])


def _outcomes(run: FleetRun, name: str) -> dict[str, str]:
    """Test name (endpoint dropped) → outcome, from the endpoint's own record."""
    outcomes = run.part(name)["document"]["outcomes"]
    return {k.split("::", 1)[1].split("@", 1)[0].replace(f"[{name}-", "["): v
            for k, v in outcomes.items()}


def test_each_endpoint_gets_its_own_outcome(fleet_run):
    run = fleet_run
    assert run.stopped_after > 0, run.output  # it was stopped mid-run, not before
    assert run.code == 1, run.output
    healthy, regressed = _outcomes(run, "healthy"), _outcomes(run, "regressed")
    assert healthy["test_context_scaling[reasoning-ctx13]"] == "passed"
    assert healthy["test_context_scaling[reasoning-ctx1663]"] == "passed"
    assert healthy["test_context_fit[reasoning]"] in ("passed", "skipped")  # undetermined: skip
    assert regressed["test_context_scaling[reasoning-ctx13]"] == "failed"
    assert regressed["test_context_scaling[reasoning-ctx1663]"] == "failed"
    assert _outcomes(run, "stopped") == {"test_context_scaling[reasoning-ctx13]": "passed",
                                         "test_context_scaling[reasoning-ctx1663]": "error",
                                         "test_context_fit[reasoning]": "error"}
    statuses = {p["name"]: p["status"] for p in run.doc["endpoints"]}
    assert statuses == {"healthy": "pass", "regressed": "fail", "stopped": "error"}
    assert "specperf fleet: healthy: PASS (" in run.output
    assert "specperf fleet: regressed: FAIL (" in run.output
    assert "specperf fleet: stopped: ERROR (1 passed, 2 error)" in run.output


def test_the_regression_is_attributed_to_step_time(fleet_run):
    verdicts = fleet_run.part("regressed")["document"]["verdicts"]
    failing = {v["case_id"]: v for v in verdicts if v["status"] == "fail"}
    assert {"reasoning-ctx13", "reasoning-ctx1663"} <= set(failing)
    for case_id in ("reasoning-ctx13", "reasoning-ctx1663"):
        verdict = failing[case_id]
        # The server-timed decode tok/s leads when the client's tok/s, which carries the
        # client's own overhead, is not past its limit with confidence (a loaded CI box).
        assert re.fullmatch(r"(decode )?tok/s [\d.]+ → [\d.]+ \(−[\d.]+%, limit −10%\): "
                            r"step time [\d.]+ → [\d.]+ ms \(\+[\d.]+%\) explains it; avg "
                            r"commit [\d.]+ → [\d.]+ "
                            r"\([+−][\d.]+%, within noise\) — step-time regression: check the "
                            r"kernels, attention backend and KV cache \(run-to-run ±3\.0% "
                            r"assumed: no history yet\)\.",
                            verdict["message"]), \
            verdict["message"]
        # Ground truth: the server's step time read the injected 1.3, acceptance has no share
        # and step time the largest by far. tok/s of these 0.2 s requests also carries a loaded
        # client's delays (the rest: step share 0.83 at load 11), so the share is held to 0.75.
        assert verdict["details"]["step_ms"]["change"] == pytest.approx(0.3, abs=0.02), verdict
        assert abs(verdict["attribution"]["acceptance"]) < 0.05, verdict
        assert verdict["attribution"]["step"] > 0.75, verdict
    others = [v for p in ("healthy", "stopped") for v in
              fleet_run.part(p)["document"]["verdicts"] if v["status"] == "fail"]
    assert others == []  # the regression is the regressed box's alone


def test_the_stopped_endpoint_errors_with_one_sentence(fleet_run):
    url = fleet_run.urls["stopped"]
    errors = fleet_run.part("stopped")["document"]["errors"]
    assert len(errors) == 2
    sentence = re.compile(rf"EndpointUnreachable: cannot connect to {re.escape(url)}/[a-z_/]+: "
                          r"\[Errno 111\] Connection refused\. Is the server running and is "
                          r"--endpoint right\?( \(after \d+ retries\))?")
    for text in errors.values():
        assert sentence.fullmatch(text.strip()), text
    # The other endpoints errored nowhere; the top level holds the whole run's errors.
    assert all(not fleet_run.part(n)["document"]["errors"] for n in ("healthy", "regressed"))
    assert set(fleet_run.doc["errors"]) == set(errors)


def test_one_document_with_a_part_per_endpoint(fleet_run):
    doc = fleet_run.doc
    from specperf.record import schema as record_schema

    assert record_schema.validate(doc, record_schema.schema()) == []
    for part in doc["endpoints"]:
        assert record_schema.validate(part["document"], record_schema.schema()) == []
        assert part["deployment"] == part["name"]
        assert part["document"]["baseline"]["deployment"] == part["name"]
    measured = {p["name"]: sorted(p["document"]["measurements"]) for p in doc["endpoints"]}
    assert measured == {"healthy": ["reasoning-ctx13", "reasoning-ctx1663"],
                        "regressed": ["reasoning-ctx13", "reasoning-ctx1663"],
                        "stopped": ["reasoning-ctx13"]}
    history = (fleet_run.project / "reports" / "history.jsonl").read_text().splitlines()
    labels = [json.loads(line)["results"] for line in history[-3:]]
    assert labels == [f"{doc['run_id']}/results.json"] * 3


@needs_chromium
def test_fleet_report_in_headlesschromium(fleet_run, tmp_path):
    url = (fleet_run.run_dir / "report.html").as_uri()
    screenshot = tmp_path / "fleet-top.png"
    chromium(f"--screenshot={screenshot}", "--window-size=1280,1100", url, tmp=tmp_path)
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    dom = chromium("--dump-dom", url, tmp=tmp_path).stdout
    statuses = re.findall(r'<td data-endpoint-status="([^"]+)"><a href="#endpoint-([^"]+)"', dom)
    assert statuses == [("pass", "healthy"), ("fail", "regressed"), ("error", "stopped")]
    rows = re.findall(r'<tr class="cross-case" data-case="([^"]+)">(.*?)</tr>', dom)
    assert [case for case, _ in rows] == ["reasoning-ctx13", "reasoning-ctx1663"]
    cells = {case: re.findall(r'data-endpoint="([^"]+)" data-status="([^"]+)"', body)
             for case, body in rows}
    # The healthy box within its limits: a pass, or "noted" when the stated 0.5 % run-to-run
    # noise makes a small change on the loaded box sure (the contract's pass with a change).
    found = dict(cells["reasoning-ctx1663"])
    assert found.pop("healthy") in ("pass", "noted"), cells
    assert sorted(found.items()) == [("regressed", "fail"), ("stopped", "error")], cells
    for name in ("healthy", "regressed", "stopped"):  # each endpoint's own section is there
        assert f'<section id="endpoint-{name}" class="endpoint">' in dom
    assert len(re.findall(r'<figure class="plot"', dom)) >= 6  # two measured boxes' plots


# -- two runs at once over overlapping fleets ---------------------------------------------
def _samples(project: Path, name: str) -> int:
    """Requests (warm-ups too) one run's record says it sent to one endpoint."""
    run_dir = sorted((project / "reports").glob("2*"))[-1]
    doc = json.loads((run_dir / "results.json").read_text())
    part = next(p for p in doc["endpoints"] if p["name"] == name)
    return sum(len(m["samples"]) for m in part["document"]["measurements"].values())


def test_two_fleets_never_measure_one_endpoint_at_once(start_sim, tmp_path):
    sims = {name: start_sim(time_scale=0.5) for name in ("x", "shared", "z")}
    urls = {name: sim.url for name, sim in sims.items()}
    runs = []
    for label, names in (("a", ("x", "shared")), ("b", ("shared", "z"))):
        project = _project(tmp_path / label)  # one lock directory: tmp_path/locks
        fleet = _fleet_file(project / "fleet.toml", {n: urls[n] for n in names})
        runs.append(_pytest(project, "-n", "2", "--endpoints", str(fleet),
                            "--baseline-dir", str(project / "baselines")))
    outputs = [run.communicate(timeout=600)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    # Ground truth: the shared simulator served both runs, never two requests at once.
    truth = [r for r in _truth(urls["shared"]) if not r["background"]]
    spans = sorted((r["received_mono"], r["finished_mono"]) for r in truth)
    served = [_samples(tmp_path / label, "shared") for label in ("a", "b")]
    assert min(served) > 0 and len(spans) >= sum(served), (len(spans), served)
    for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
        assert start >= end, "two runs measured the shared endpoint at the same time"
    # The run that waited says so, naming the lock and its holder; nobody waited elsewhere.
    waits = [line for out in outputs for line in out.splitlines()
             if line.startswith("specperf fleet: ") and " for its GPU lock: " in line]
    assert len(waits) == 1, outputs
    assert re.fullmatch(r"specperf fleet: shared waited [\d.]+ s for its GPU lock: specperf: "
                        r"waiting for the GPU lock .*gpu-localhost-\d+\.lock held by \S+ pid "
                        r"\d+ since \S+ \(.*\); waited 0 s of 1800 s", waits[0]), waits[0]
