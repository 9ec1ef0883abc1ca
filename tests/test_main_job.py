"""The main job end to end: real pytest sessions (pytester) against real simulator processes."""

from __future__ import annotations

import json
import re

import httpx
import pytest

from slowb_runs import BUSY_CLIENT_SPREAD, BUSY_CLIENT_TOK_S, embedded_main_job

# Whole perf sessions against simulators: `pytest -m slow` (README: test commands).
pytestmark = pytest.mark.slow


def _table_rows(text: str) -> dict[str, list[float]]:
    """Parse the closing incident table: {'padding-ctx13': [tok/s, commit, step, decode]}."""
    rows = {}
    for m in re.finditer(r"^\s*(\d+) \| (\w+)\s*\|([^|\n]+)\|([^|\n]+)\|([^|\n]+)\|([^|\n]+)\|",
                         text, re.M):
        rows[f"{m[2]}-ctx{m[1]}"] = [float(m[i]) for i in range(3, 7)]
    return rows


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    """The main job against the embedded simulator with no baseline (slowb_runs, shared
    with test_report): its baseline dir (empty) and the session."""
    folder, result = embedded_main_job(tmp_path_factory)
    return folder / "b", result


def test_embedded_simulator_runs_the_main_job_and_reports_simulated(embedded):
    base, result = embedded
    out = result.output
    # No baseline yet: every case is skipped with the command that creates one.
    result.assert_outcomes(skipped=6)
    # The command carries this run's own flags, so it writes the baseline this run reads.
    # The project has no perf_tests/ directory, so the command names the installed copy.
    assert ("create one with `pytest --pyargs specperf.perf_tests -m context_scaling "
            "--specperf-deployment "
            f"sim-kimi-k26-ddtree --specperf-baseline-dir {base} --specperf-output-tokens 64 "
            "--specperf-update-baselines`") in out
    assert "SIMULATED: profile kimi-k26-ddtree at time scale 0.5" in out
    result.fnmatch_lines([
        "*padding-ctx13 warm-up: * tok/s, avg commit *, step * ms",
        "*padding-ctx1663 repeat 3/3: * tok/s, avg commit *, step * ms",
        "*acceptance from response*",
        "fit padding: step_ms = * + * ms per 1k context*",
    ])
    rows = _table_rows(out)
    assert set(rows) == {"padding-ctx13", "padding-ctx1663", "reasoning-ctx13",
                         "reasoning-ctx1663"}
    # The physics the suite exists to see: padding drafts better, step time grows with context.
    assert rows["padding-ctx1663"][1] > rows["reasoning-ctx1663"][1] * 1.5
    assert rows["padding-ctx1663"][2] > rows["padding-ctx13"][2] * 1.3


def test_update_then_compare_passes_and_never_overwrites(perf_project, tmp_path):
    project = perf_project()
    first = project.run("-m", "context_scaling", "--specperf-update-baselines", "--baseline-dir",
                        str(tmp_path))
    first.stdout.fnmatch_lines(["specperf: wrote baseline */sim-kimi-k26-ddtree/v1.json",
                                "  first baseline of sim-kimi-k26-ddtree: 4 cases*"])
    v1 = (tmp_path / "sim-kimi-k26-ddtree" / "v1.json").read_bytes()
    second = project.run("-m", "context_scaling", "--baseline-dir", str(tmp_path), "-rs",
                         BUSY_CLIENT_TOK_S, BUSY_CLIENT_SPREAD)
    # The four cases pass. Each class's slope passes, or -- when 64-token requests on a
    # loaded box leave its error wider than the tolerance band -- skips as undetermined;
    # never a failure (tests/test_fit_uncertainty.py pins those sentences).
    outcomes = second.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("skipped", 0) == 6, outcomes
    assert outcomes.get("passed", 0) >= 4 and "failed" not in outcomes, outcomes
    skips = [line for line in second.stdout.lines if line.startswith("SKIPPED")]
    assert all("neither a pass nor a fail" in line for line in skips), skips
    third = project.run("-m", "context_scaling", "--specperf-update-baselines", "--baseline-dir",
                        str(tmp_path))
    third.stdout.fnmatch_lines(["specperf: wrote baseline */sim-kimi-k26-ddtree/v2.json"])
    assert (tmp_path / "sim-kimi-k26-ddtree" / "v1.json").read_bytes() == v1
    data = json.loads(v1)
    assert data["simulated"] is True and data["fingerprint"]["simulated"] is True
    assert set(data["cases"]) == {"padding-ctx13", "padding-ctx1663", "reasoning-ctx13",
                                  "reasoning-ctx1663"}


def test_separately_started_simulator_behaves_like_the_embedded_one(perf_project, start_sim,
                                                                     embedded, tmp_path):
    sim = start_sim(time_scale=0.5)
    project = perf_project()
    external = project.run("-m", "context_scaling", "--endpoint", sim.url,
                           "--baseline-dir", str(tmp_path))
    _, embedded_run = embedded  # the same sweep against the embedded simulator
    assert f"SIMULATED ({sim.url})" in external.stdout.str()
    ext, emb = _table_rows(external.stdout.str()), _table_rows(embedded_run.output)
    assert set(ext) == set(emb)
    for case in ext:
        # Acceptance comes from the server's seeded physics: equal within its draw noise.
        # Step time is wall-clock on a shared 2-core box: only a loose sanity bound here
        # (accuracy is measured against /_sim/truth in benchmarks/, not in a flaky test).
        assert ext[case][1] == pytest.approx(emb[case][1], rel=0.05), case
        assert ext[case][2] == pytest.approx(emb[case][2], rel=0.25), case


def test_unreachable_endpoint_errors_every_case_with_one_sentence(perf_project):
    project = perf_project()
    result = project.run("-m", "context_scaling", "--endpoint", "http://127.0.0.1:9")
    result.assert_outcomes(errors=6)  # 4 cases and 2 fits
    out = result.stdout.str()
    assert "Traceback" not in out and "httpx" not in out
    result.stdout.fnmatch_lines([
        "*ERROR at setup of test_context_scaling?padding-ctx13?*",
        "EndpointUnreachable: specperf cannot "
        "reach the endpoint http://127.0.0.1:9 (from --endpoint): tried GET /health and the "
        "connection failed*Start the server, or point --endpoint at one "
        "that is up.",
    ])


@pytest.fixture(scope="module")
def sim(start_sim):
    """The module's simulator for the fault tests (each resets it before injecting). The
    hang case stays last: its hung requests still run once their 5 s are over."""
    return start_sim()


def _faulty(sim, **faults):
    httpx.post(f"{sim.url}/_sim/reset").raise_for_status()
    httpx.post(f"{sim.url}/_sim/faults", json=faults).raise_for_status()
    return sim


@pytest.mark.parametrize(("faults", "args", "expected"), [
    ({"early_stop_rate": 1.0}, (),
     "*IgnoreEosNotHonoured: padding-ctx13: asked for exactly 64 tokens with ignore_eos, got "
     "* (finish reason 'stop'): ignore_eos not honoured*"),
    ({"error_rate": 1.0, "error_status": 503}, (),
     "*BadStatus: POST http://127.0.0.1:*/generate answered HTTP 503*(after 2 retries)"),
    ({"malformed_rate": 1.0}, (),
     "*MalformedResponse: http://127.0.0.1:*/generate answered HTTP 200 with a body that is "
     "not JSON*"),
    ({"omit_spec_fields": True}, ("--specperf-acceptance-source", "response"),
     "*AcceptanceUnavailable: --specperf-acceptance-source response was asked for, but the "
     "server does not provide it*"),
    ({"hang_s": 5.0}, ("--specperf-request-timeout", "1"),
     "*EndpointTimeout: POST http://127.0.0.1:*/generate gave no complete answer within 1 s*"),
])
def test_server_faults_are_errors_with_one_clear_sentence(perf_project, sim, faults, args,
                                                          expected):
    _faulty(sim, **faults)
    project = perf_project()
    result = project.run("-m", "context_scaling", "--endpoint", sim.url, "--specperf-text-classes",
                         "padding", "--specperf-contexts", "13", *args)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(errors=2)  # the case and its class's fit
    result.stdout.fnmatch_lines([expected])
    assert "Traceback" not in result.stdout.str()


def test_context_beyond_the_servers_length_is_an_error(perf_project):
    project = perf_project()
    result = project.run("-m", "context_scaling", "--specperf-contexts", "300000",
                         "--specperf-text-classes", "padding")
    result.stdout.fnmatch_lines(["*ConfigError: context 300000 + 64 output tokens = 300064 "
                                 "exceeds the server's context length *"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


@pytest.mark.parametrize("api", ["openai", "openai-chat"])
def test_openai_routes_measure_at_the_exact_context(perf_project, api, tmp_path):
    project = perf_project()
    result = project.run("-m", "context_scaling", "--specperf-api", api, "--specperf-contexts=1663",
                         "--baseline-dir", str(tmp_path))
    result.assert_outcomes(skipped=4)  # measured; no baseline for these
    assert "acceptance from response" in result.stdout.str()
    [path] = project.pytester.path.glob("reports/*/results.json")
    doc = json.loads(path.read_text())
    for data in doc["measurements"].values():
        assert {s["prompt_tokens"] for s in data["samples"]} == {1663}
        assert all(s["verify_steps"] for s in data["samples"])


def test_the_chat_template_cannot_fit_a_tiny_context(perf_project, tmp_path):
    result = perf_project().run("-m", "context_scaling", "--specperf-api", "openai-chat",
                                "--specperf-contexts=13", "--specperf-text-classes=padding",
                                "--baseline-dir", str(tmp_path))
    result.stdout.fnmatch_lines(["ConfigError: padding-ctx13: the chat template alone takes * "
                                 "tokens of the 13-token context: measure short contexts with "
                                 "--specperf-api sglang or openai, or raise --specperf-contexts."])
