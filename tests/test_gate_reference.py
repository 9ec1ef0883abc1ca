"""The gate's two phases around a deploy (issue 33): the running deployment measured just
before it as a same-night reference, the candidate judged against it after it.

End to end against real simulator processes: a deploy that changes nothing passes, a 5 % step
rise after the deploy (the simulator restarted on the same port, then its step-time fault set)
fails with exit 1, and a reference of another deployment is exit 2 with its sentence. The
stale, other-endpoint and missing references are checked without a run: they are refused
before any request.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx
import pytest

from sim_fixtures import SimProcess
from slowa_gate import SIM_SCALE
from specperf import cli
from specperf.cli import reference

ROOT = Path(__file__).resolve().parents[1]
GATE = ROOT / "ci" / "gate.sh"
PASS_THROUGH = ("--", "--specperf-output-tokens=200")
DEPLOYMENT = "gate-ref"
# Both phases decode the step-time cases short (cli/reference.py SHORT_CASES).
SHORT = ("--specperf-case-output-tokens=padding-ctx13=128,padding-ctx3333=128,"
         "reasoning-ctx13=128")
URL = "http://127.0.0.1:30000"


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECPERF_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["SPECPERF_LOCK_DIR"] = str(tmp / "locks")
    env["SPECPERF_REPORT_DIR"] = str(tmp / "reports")
    return env


def _gate(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """ci/gate.sh as the deploy pipeline runs it."""
    return subprocess.run(["bash", str(GATE), *args, *PASS_THROUGH], capture_output=True,
                          text=True, env=_env(tmp), timeout=600, check=False)


def _restart(start_sim: Callable[..., SimProcess], old: SimProcess, seed: int,
             **faults: float) -> SimProcess:
    """The "deploy": the server stops and a new one comes up on the same URL."""
    port = old.url.rsplit(":", 1)[1]
    old.stop()
    new = start_sim(time_scale=SIM_SCALE, extra_args=["--port", port, "--seed", str(seed)])
    assert new.url == old.url
    if faults:
        httpx.post(f"{new.url}/_sim/faults", json=faults).raise_for_status()
    return new


@pytest.fixture
def before_deploy(start_sim, tmp_path) -> tuple[SimProcess, Path]:
    """A running deployment and its same-night reference (phase 1)."""
    sim = start_sim(time_scale=SIM_SCALE)
    refs = tmp_path / "reference"
    saved = _gate(tmp_path, "--save-reference", str(refs), "--endpoint", sim.url,
                  "--deployment", DEPLOYMENT)
    assert saved.returncode == 0, saved.stdout + saved.stderr
    pytest.LineMatcher(saved.stdout.splitlines()).fnmatch_lines([
        f"specperf gate: reference saved in {refs}: deployment {DEPLOYMENT} v1, 4 cases (3 at "
        f"128 output tokens, 1 at 200), measured *Z on {sim.url}. After the deploy: `specperf gate "
        f"--reference {refs} --endpoint {sim.url} -- --specperf-output-tokens=200`."])
    doc = json.loads((refs / "reference.json").read_text())
    assert (doc["deployment"], doc["version"], doc["endpoint"], doc["output_tokens"]) == (
        DEPLOYMENT, 1, sim.url, 200)
    assert doc["cases"] == ["padding-ctx13", "padding-ctx3333", "reasoning-ctx13",
                            "reasoning-ctx3333"]
    # The step-time cases decode short; the long case keeps the run's output length.
    assert doc["case_output_tokens"] == {"padding-ctx13": 128, "padding-ctx3333": 128,
                                         "reasoning-ctx13": 128, "reasoning-ctx3333": 200}
    written = json.loads((refs / DEPLOYMENT / "v1.json").read_text())["cases"]
    assert {c: v["output_tokens"] for c, v in written.items()} == doc["case_output_tokens"]
    # Requests where a request is cheapest: the 13-token padding case takes most of them.
    taken = {c: v["metrics"]["step_ms"]["n"] for c, v in written.items()}
    assert all(taken[c] >= n for c, n in reference.REFERENCE_CASE_REPEATS.items()), taken
    assert taken["reasoning-ctx3333"] < taken["padding-ctx13"], taken
    assert doc["fingerprint"]["model"]
    assert (refs / DEPLOYMENT / "v1.json").is_file()
    return sim, refs


@pytest.mark.slow  # two gate runs and a reference (README: test commands)
def test_a_deploy_that_changes_nothing_passes(start_sim, before_deploy, tmp_path):
    sim, refs = before_deploy
    sim = _restart(start_sim, sim, seed=7)
    result = _gate(tmp_path, "--reference", str(refs), "--endpoint", sim.url)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    # the command it ran is progress, on stderr; stdout opens with the answer
    assert "--specperf-same-night" in result.stderr.splitlines()[0]
    assert out.startswith("specperf gate: PASS (exit 0)"), out
    flat = " ".join(out.split())
    assert "specperf gate: PASS (exit 0): all 5 smoke checks within their limits. 5 smoke " \
        f"checks (3 cases, 1 path, the sweep) against {sim.url}, judged against its same-night " \
        f"reference (deployment {DEPLOYMENT} v1, 4 cases (3 at 128 output tokens, 1 at 200), " \
        "measured " in flat
    # Both phases drained the box: the cost counts the reference too.
    assert re.search(r"cost: reference \d+ requests, \d+ s; candidate \d+ requests, \d+ s; both "
                     r"phases \d+ s of simulated server time", flat), out
    assert "decode: padding-ctx13, padding-ctx3333, reasoning-ctx13 decode 128 tokens: enough " \
        "for step time and prefill, blind to acceptance that changes later in the output; " \
        "reasoning-ctx3333 decodes 200 tokens to see it. The parser path compares the chat " \
        "route with the native one at 128 tokens: a parser cost per token weighs as much as at " \
        "200 tokens, one per response up to 1.6 times as much." in flat
    saved = json.loads((refs / "reference.json").read_text())
    # Each case's requests where the model puts them, a warm-up each (the sweep's top-ups
    # are the candidate's): 32 + 4 + 4 + 3 measured.
    assert saved["cost"]["requests"] >= 43 + 4 and saved["cost"]["server_s"] > 0
    # A text class whose re-sent prompts all took the reference's verify steps has its
    # acceptance settled: the sweep reads no change of it off two medians (a "noted"
    # acceptance was seen so); another seed may change some outputs, whose class it judges.
    # (the reference's own record is beside it: the newest is the candidate's)
    found = max((tmp_path / "reports").glob("*/results.json"), key=lambda p: p.stat().st_mtime)
    record = json.loads(found.read_text())
    # The parser path ran short, and its sentence says at which length it compared.
    assert [p["case"]["output_tokens"] for p in record["paths"]] == [128], record["paths"]
    parser = [v for v in record["verdicts"] if v["case_id"].endswith(" chat vs native")]
    assert len(parser) == 1 and parser[0]["message"].startswith("at 128 output tokens: chat "
                                                                "tok/s "), parser
    cases = [v for v in record["verdicts"] if v.get("exact")]
    sweeps = [v for v in record["verdicts"] if "step" in (v.get("details") or {})]
    assert len(sweeps) == 1, [v["case_id"] for v in record["verdicts"]]
    sweep = sweeps[0]
    for text_class in ("padding", "reasoning"):
        mine = [v for v in cases if v["case_id"].startswith(f"{text_class}-")]
        settled = bool(mine) and all(v["exact"]["status"] == "unchanged" for v in mine)
        assert (f"acceptance:{text_class}" in sweep["details"]) is not settled, (mine, sweep)


@pytest.mark.slow  # two gate runs and a reference (README: test commands)
def test_a_5_percent_step_rise_after_the_deploy_fails_with_exit_1(start_sim, before_deploy,
                                                                 tmp_path):
    sim, refs = before_deploy
    sim = _restart(start_sim, sim, seed=7, step_time_mult=1.05)
    result = _gate(tmp_path, "--reference", str(refs), "--endpoint", sim.url)
    assert result.returncode == 1, result.stdout + result.stderr
    pytest.LineMatcher(result.stdout.splitlines()).fnmatch_lines([
        "specperf gate: REGRESSION (exit 1): step time regressed in *: block the deploy.",
        "  step time +*% (*% CI *) over all 3 cases pooled*"])


@pytest.mark.slow  # two gate runs and a reference (README: test commands)
def test_an_acceptance_drop_late_in_the_output_is_caught_by_the_long_case(start_sim,
                                                                         before_deploy,
                                                                         tmp_path):
    # After the 150th output token, beyond the short cases' 128: only the long case sees it.
    sim, refs = before_deploy
    sim = _restart(start_sim, sim, seed=7, late_accept_mult=0.5, late_after=150)
    result = _gate(tmp_path, "--reference", str(refs), "--endpoint", sim.url)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    pytest.LineMatcher(lines).fnmatch_lines([
        "specperf gate: REGRESSION (exit 1): acceptance regressed in *: block the deploy.",
        "  cost: reference * requests, * s; candidate * requests, * s; both phases * s of "
        "simulated server time"])
    # The root cause's line names the long case, and not the short ones: they decoded before
    # the drop starts, so their acceptance did not move.
    first = next(i for i, line in enumerate(lines) if line.startswith("specperf gate: REGR"))
    checks = next(i for i, line in enumerate(lines) if " smoke checks (" in line)
    causes = " ".join(line.strip() for line in lines[first + 1:checks])
    assert "reasoning-ctx3333" in causes and "padding-" not in causes, result.stdout


@pytest.mark.slow  # a reference and a refused judge run (README: test commands)
def test_a_reference_measured_at_other_lengths_is_exit_2_before_any_request(before_deploy,
                                                                           tmp_path):
    # A reference written before the short decodes: every case at the run's length.
    sim, refs = before_deploy
    written = refs / DEPLOYMENT / "v1.json"
    doc = json.loads(written.read_text())
    for case in doc["cases"].values():
        case["output_tokens"] = 200
    written.write_text(json.dumps(doc, indent=2, sort_keys=True))
    saved = json.loads((refs / "reference.json").read_text())
    del saved["case_output_tokens"]
    (refs / "reference.json").write_text(json.dumps(saved))
    finished = _requests_finished(sim.url)
    result = _gate(tmp_path, "--reference", str(refs), "--endpoint", sim.url)
    assert result.returncode == 2, result.stdout + result.stderr
    assert (f"specperf gate: USAGE ERROR (exit 2): the reference in {refs} holds padding-ctx13 "
            "at 200, padding-ctx3333 at 200, reasoning-ctx13 at 200, reasoning-ctx3333 at 200 "
            "output tokens, not every case this gate judges at its output length") \
        in result.stdout, result.stdout + result.stderr
    assert _requests_finished(sim.url) == finished


@pytest.mark.slow  # a reference (README: test commands)
def test_a_reference_of_another_deployment_is_exit_2_before_any_request(before_deploy,
                                                                        tmp_path):
    sim, refs = before_deploy
    finished = _requests_finished(sim.url)
    result = _gate(tmp_path, "--reference", str(refs), "--endpoint", sim.url,
                   "--deployment", "other")
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.splitlines() == [
        f"specperf gate: the reference in {refs} is of deployment '{DEPLOYMENT}', not 'other': "
        f"measure one of 'other' just before its deploy with `specperf gate --save-reference "
        f"{refs} --endpoint {sim.url} --deployment other -- --specperf-output-tokens=200`."]
    assert _requests_finished(sim.url) == finished


def _requests_finished(url: str) -> float:
    text = httpx.get(f"{url}/metrics").text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("sglang:num_requests_total"))


# -- refused before any run: written references, the command in-process ---------------------------
def _write(directory: Path, *, age_h: float = 0.5, endpoint: str = URL) -> Path:
    created = datetime.now(timezone.utc) - timedelta(hours=age_h)
    ref = reference.Reference(directory, created.replace(microsecond=0), endpoint, DEPLOYMENT,
                              3, ("padding-ctx13", "padding-ctx3333", "reasoning-ctx13",
                                  "reasoning-ctx3333"), 600, {"model": "m"})
    directory.mkdir(parents=True, exist_ok=True)
    (directory / reference.REFERENCE_FILE).write_text(json.dumps(ref.to_dict()))
    return directory


def _refused(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert cli.main(["gate", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    return captured.err


def test_a_stale_reference_is_a_usage_error_naming_its_age(tmp_path, capsys):
    refs = _write(tmp_path / "r", age_h=5.2)
    err = _refused(capsys, "--reference", str(refs), "--endpoint", URL)
    created = json.loads((refs / "reference.json").read_text())["created"]
    assert err == (f"specperf gate: the reference in {refs} is 5.2 h old (measured {created}), "
                   "older than --reference-max-age 4 h: the night has moved on; measure a fresh "
                   f"one just before the deploy with `specperf gate --save-reference {refs} "
                   f"--endpoint {URL}`.\n")
    # A longer window accepts it: the check is the option's, not a constant.
    assert reference.mismatch(reference.load(refs), URL, None, 6.0,
                              reference.now_utc(), "fix") is None


def test_a_reference_of_another_endpoint_is_a_usage_error(tmp_path, capsys):
    refs = _write(tmp_path / "r", endpoint="http://10.0.0.9:30000")
    err = _refused(capsys, "--reference", str(refs), "--endpoint", URL + "/", "--deployment",
                   DEPLOYMENT)
    assert err == (f"specperf gate: the reference in {refs} was measured on "
                   f"http://10.0.0.9:30000, not on {URL}/: measure one on this endpoint just "
                   f"before its deploy with `specperf gate --save-reference {refs} --endpoint "
                   f"{URL}/ --deployment {DEPLOYMENT}`.\n")


def test_no_reference_is_a_usage_error_with_the_command_that_measures_one(tmp_path, capsys):
    refs = tmp_path / "none"
    err = _refused(capsys, "--reference", str(refs), "--endpoint", URL)
    assert err.startswith(f"specperf gate: no usable reference in {refs} (reference.json: ")
    assert err.endswith(f"measure one just before the deploy with `specperf gate "
                        f"--save-reference {refs} --endpoint {URL}`.\n")


@pytest.mark.parametrize(("args", "message"), [
    (["--save-reference", "a", "--reference", "b"],
     "--save-reference measures before the deploy and --reference judges after it: give one "
     "of them per call."),
    (["--reference", "b", "--baseline-dir", "c"],
     "--reference cannot be combined with --baseline-dir: a reference is one endpoint's "
     "deployment measured the same night, and its directory is its baseline directory."),
    (["--save-reference", "a", "--production", URL],
     "--save-reference cannot be combined with --production: a reference is one endpoint's "
     "deployment measured the same night, and its directory is its baseline directory."),
])
def test_a_reference_phase_refuses_options_of_other_modes(capsys, args, message):
    assert _refused(capsys, "--endpoint", URL, *args) == f"specperf gate: {message}\n"


def test_an_older_reference_reads_at_one_length_and_says_nothing_of_decodes(tmp_path):
    ref = reference.load(_write(tmp_path / "r"))
    data = json.loads((tmp_path / "r" / reference.REFERENCE_FILE).read_text())
    del data["case_output_tokens"]
    (tmp_path / "r" / reference.REFERENCE_FILE).write_text(json.dumps(data))
    old = reference.load(tmp_path / "r")
    assert old.lengths() == ref.lengths() == dict.fromkeys(ref.cases, 600)
    assert old.cases_text() == "4 cases at 600 output tokens"
    assert old.decode_sentence() is None


def test_a_reference_at_two_lengths_names_both_and_what_each_can_see(tmp_path):
    ref = reference.Reference(tmp_path, reference.now_utc(), URL, DEPLOYMENT, 1,
                              ("padding-ctx13", "reasoning-ctx3333"), 600,
                              case_tokens={"padding-ctx13": 128, "reasoning-ctx3333": 600})
    assert ref.cases_text() == "2 cases (1 at 128 output tokens, 1 at 600)"
    assert ref.decode_sentence() == (
        "padding-ctx13 decode 128 tokens: enough for step time and prefill, blind to "
        "acceptance that changes later in the output; reasoning-ctx3333 decodes 600 tokens "
        "to see it.")
    assert reference.load(_write_ref(ref)).lengths() == ref.lengths()


def _write_ref(ref: reference.Reference) -> Path:
    (ref.directory / reference.REFERENCE_FILE).write_text(json.dumps(ref.to_dict()))
    return ref.directory


def test_the_reference_subset_is_the_smoke_subsets_grid():
    from specperf.perf_tests.test_sweep import SMOKE_CASES

    assert {c for _, c in SMOKE_CASES} == set(reference.SUBSET_CONTEXTS)
    assert {t for t, _ in SMOKE_CASES} <= set(reference.SUBSET_CLASSES)


def test_phase_1_writes_tonights_run_alone_into_the_reference_directory(tmp_path):
    assert reference.measure_flags(tmp_path) == [
        "--specperf-baseline-dir", str(tmp_path), "--specperf-contexts=13,3333",
        "--specperf-text-classes=padding,reasoning", "--specperf-baseline-repeats=12",
        "--specperf-baseline-runs=1", "--specperf-update-baselines",
        f"--specperf-accept={reference.REFERENCE_ACCEPT}", SHORT,
        "--specperf-case-repeats=padding-ctx13=32,padding-ctx3333=4,reasoning-ctx13=4,"
        "reasoning-ctx3333=3", "--specperf-warmup-output-tokens=128"]


def test_phase_2_judges_exactly_that_version_the_same_night(tmp_path):
    ref = reference.load(_write(tmp_path / "r"))
    assert reference.judge_flags(ref) == [
        "--specperf-baseline-dir", str(tmp_path / "r"), "--specperf-deployment", DEPLOYMENT,
        "--specperf-baseline-version", "3", "--specperf-require-baseline",
        "--specperf-same-night", SHORT,
        "--specperf-case-repeats=padding-ctx13=8,padding-ctx3333=2,reasoning-ctx3333=1",
        "--specperf-path-output-tokens=128", "--specperf-warmup-output-tokens=128"]
