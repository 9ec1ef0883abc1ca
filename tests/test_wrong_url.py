"""A URL that is no LLM server, an old flag and a typo: what a newcomer types first.

The gate pointed at a plain web server exits 2 (fix the pipeline's call), decided from the
record's ``run.stopped_by``, not from the error's words; the sentence is printed in full
once; an old unprefixed flag prints a deprecation notice once, and a typo of a flag gets a
"did you mean".
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from specperf.cli import explain, runner
from specperf.cli.decision import GateExit
from specperf.core.errors import NotAnLlmServer
from specperf.servers.client import Client
from specperf.servers.probe import check_reachable
from specperf.settings.spelling import renamed_notice, unknown_flag

JUNIT = ('<testsuites><testsuite>'
         '<testcase name="test_smoke[padding-ctx13]">'
         '<error message="failed on setup">{error}</error></testcase>'
         '</testsuite></testsuites>')
NODE = "perf_tests/test_smoke.py::test_smoke[padding-ctx13]"


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def web_server(tmp_path: Path) -> Iterator[str]:
    """`python3 -m http.server` on loopback: up, but no LLM server."""
    handler = partial(Quiet, directory=str(tmp_path))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _record(tmp_path: Path, stopped_by: str | None, server: dict[str, object]) -> Path:
    doc = {"outcomes": {NODE: "error"}, "errors": {NODE: "SomeError: words"},
           "verdicts": [], "settings": {"endpoint": "http://box:1"}, "server": server,
           "run": {"kind": "gate", "stopped_by": stopped_by}}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    return path


def _junit(tmp_path: Path) -> Path:
    junit = tmp_path / "smoke.xml"
    junit.write_text(JUNIT.format(error="SomeError: words"))
    return junit


def test_a_run_stopped_by_its_settings_is_a_usage_error_from_the_record(tmp_path):
    result = runner.result_of(1, _junit(tmp_path), _record(tmp_path, "config-error", {}))
    assert result.code == GateExit.USAGE
    assert result.reason == (
        "http://box:1 is not an LLM server specperf can measure (the error above says what "
        "answered): point --endpoint at the SGLang, vLLM or llama.cpp server itself, then run "
        "the gate again.")
    probed = _record(tmp_path, "config-error", {"url": "http://box:1", "simulated": False})
    asked = runner.result_of(1, _junit(tmp_path), probed, "--candidate")
    assert asked.code == GateExit.USAGE
    assert asked.reason.startswith("the gate's options ask for what the server at "
                                   "http://box:1 cannot do")
    # The same words under another stop: an outage stays exit 3.
    down = runner.result_of(1, _junit(tmp_path), _record(tmp_path, "outage", {}))
    assert down.code == GateExit.INFRASTRUCTURE


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECPERF_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["SPECPERF_LOCK_DIR"] = str(tmp_path / "locks")
    env["SPECPERF_REPORT_DIR"] = str(tmp_path / "reports")
    return env


def _specperf(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specperf.cli", *args], capture_output=True,
                          text=True, env=_env(tmp_path), cwd=tmp_path, timeout=240,
                          check=False)


@pytest.mark.slow  # a whole gate run: the gate, then pytest, in subprocesses
def test_the_gate_at_a_web_server_exits_2_with_one_sentence(tmp_path, web_server):
    done = _specperf(tmp_path, "gate", "--endpoint", web_server)
    out = done.stdout + done.stderr
    assert done.returncode == 2, out
    # the answer ends stdout (the pytest command the gate ran is progress, on stderr)
    assert done.stdout.splitlines()[-1] == (
        f"specperf gate: USAGE ERROR (exit 2): {web_server} is not an LLM server specperf can "
        "measure (the error above says what answered): point --endpoint at the SGLang, vLLM "
        "or llama.cpp server itself, then run the gate again.")
    # The probe's sentence in full once in pytest's error section (its short summary repeats
    # it whole when CI is set), then the gate's decision.
    errors = out.split("short test summary info")[0]
    assert errors.count("is not an LLM server: GET /health answered HTTP 404") == 1, out
    assert "the same error as test_smoke[reasoning-ctx3333] above." in out


def test_explain_at_a_web_server_says_it_is_no_llm_server_and_exits_2(capsys, web_server):
    parser = argparse.ArgumentParser(prog="specperf")
    explain.add_subcommand(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["explain", "--endpoint", web_server, "--window", "1"])
    assert args.run(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"specperf explain: {web_server} (from --endpoint) is not an LLM server: "
        "GET /health answered HTTP 404"), err
    assert "--enable-metrics" not in err


def test_the_sentence_names_the_flag_as_typed(web_server):
    for typed in ("--specperf-endpoint", "SPECPERF_ENDPOINT"):
        with pytest.raises(NotAnLlmServer) as err:
            check_reachable(Client(web_server, retries=0), typed)
        assert f"(from {typed}) is not an LLM server" in str(err.value)
        assert str(err.value).endswith(
            f"Point {typed} at the SGLang, vLLM or llama.cpp server itself.")


def test_an_old_flag_gets_one_notice_and_errors_name_the_flag_typed(perf_project, web_server):
    flag = "--endpoint"
    project = perf_project()
    result = project.run_inprocess("-m", "context_scaling", "--specperf-text-classes",
                                   "padding", "--specperf-contexts", "13", flag, web_server)
    out = result.stdout.str()
    result.assert_outcomes(errors=2)  # the case and the fit, both at setup
    # (the project's FAST flags spell --output-tokens by its old name too)
    notices = [line for line in out.splitlines() if "old name" in line]
    assert notices == [
        "specperf: --endpoint and --output-tokens are old names, kept for this release only: "
        "type --specperf-endpoint, --specperf-output-tokens instead (docs/options.md)."], out
    # once in the errors section (the short summary repeats it in full when CI is set)
    errors = out.split("short test summary info")[0]
    assert errors.count(f"(from {flag}) is not an LLM server") == 1, out
    assert f"Point {flag} at the SGLang, vLLM or llama.cpp server itself." in out
    assert "the same error as test_context_scaling[padding-ctx13] above." in out


def test_a_typo_of_a_flag_gets_did_you_mean(perf_project):
    project = perf_project()
    result = project.run_inprocess("--specperf-endpiont", "http://127.0.0.1:9")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unrecognized argument --specperf-endpiont: did you mean "
                                 "--specperf-endpoint?*"])


def test_the_spelling_sentences() -> None:
    assert renamed_notice({"endpoint": "--specperf-endpoint"}) is None
    assert renamed_notice({"endpoint": "--endpoint", "repeats": "--repeats"}) == (
        "specperf: --endpoint and --repeats are old names, kept for this release only: type "
        "--specperf-endpoint, --specperf-repeats instead (docs/options.md).")
    known = {"--specperf-endpoint", "--endpoint", "-k"}
    assert unknown_flag(["--endpiont=x"], known) == (
        "unrecognized argument --endpiont: did you mean --specperf-endpoint?")
    assert unknown_flag(["--specperf-nonsense"], known) == (
        "unrecognized argument --specperf-nonsense: specperf has no such flag; `pytest "
        "--help` lists them under 'specperf'.")
    # Someone else's flag, a known one and whatever follows "--" are pytest's business.
    assert unknown_flag(["--cov", "-k", "x", "--specperf-endpoint", "u", "--", "--endpiont"],
                        known) is None


def test_a_reference_is_the_same_server_however_its_url_is_spelled(tmp_path) -> None:
    from datetime import datetime, timezone

    from specperf.cli import reference

    now = datetime(2026, 12, 3, 10, 0, tzinfo=timezone.utc)
    ref = reference.Reference(tmp_path, now, "http://127.0.0.1:30000", "d", 1, ("c",), 600)
    for same in ("http://localhost:30000", "http://127.0.0.1:30000/", "http://LOCALHOST:30000"):
        assert reference.mismatch(ref, same, None, 4.0, now, "fix") is None, same
    other = reference.mismatch(ref, "http://127.0.0.1:30001", None, 4.0, now, "fix")
    assert other is not None and other.startswith(
        f"the reference in {tmp_path} was measured on http://127.0.0.1:30000, not on "
        "http://127.0.0.1:30001")


def test_a_typo_of_a_gate_option_gets_did_you_mean(capsys) -> None:
    from specperf.cli import main

    assert main(["gate", "--endpiont", "http://127.0.0.1:1"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "specperf gate: error: unrecognized arguments: --endpiont (did you mean --endpoint?)")


def test_an_ab_gate_stopped_by_its_settings_names_both_sides(tmp_path) -> None:
    record = _record(tmp_path, "config-error", {"url": "http://box:1"})
    doc = json.loads(record.read_text())
    doc["settings"]["compare_endpoint"] = "http://prod:2"
    record.write_text(json.dumps(doc))
    result = runner.result_of(1, _junit(tmp_path), record, "--candidate")
    assert result.code == GateExit.USAGE
    assert result.reason == (
        "http://box:1 or http://prod:2 is not an LLM server specperf can measure as asked (the "
        "error above says which, and why): fix the gate's call, then run it again.")
