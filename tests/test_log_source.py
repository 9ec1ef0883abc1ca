"""The log acceptance source end to end: SGLang decode lines read through --specperf-log-command."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path

import pytest

import specperf.sim
from specperf.servers.acceptance import LogSource

PROFILES = Path(specperf.sim.__file__).parent / "profiles"


def test_the_since_placeholder_stays_one_argument(tmp_path):
    # The command records the argv it was given: the timestamp must arrive as one argument.
    seen = tmp_path / "argv.json"
    script = tmp_path / "argv.py"
    script.write_text(f"import sys, json; open({str(seen)!r}, 'w').write(json.dumps(sys.argv[1:]))")
    source = LogSource(f"{sys.executable} {script} --since {{since}} -o cat")
    assert source.read(datetime(2026, 11, 30, 4, 35, 0)) == []  # no decode lines, no windows
    assert json.loads(seen.read_text()) == ["--since", "2026-11-30 04:35:00", "-o", "cat"]


@pytest.mark.slow  # a whole perf session or gate run (README: test commands)
def test_acceptance_from_the_decode_log_matches_the_response_fields(perf_project, start_sim,
                                                                    tmp_path):
    # Real time (scale 1) so log timestamps (1 s resolution) fall inside requests; a short
    # log interval so every request spans several full windows.
    profile = tmp_path / "log10.toml"
    profile.write_text((PROFILES / "kimi-k26-ddtree.toml").read_text()
                       .replace("decode_log_interval = 40", "decode_log_interval = 10"))
    log = tmp_path / "decode.log"
    sim = start_sim(profile=str(profile), time_scale=1.0, log_file=log)
    command = f"{sys.executable} -c \"import sys; print(open(sys.argv[1]).read())\" {log} {{since}}"
    result = perf_project().run(
        "-m", "context_scaling", "--endpoint", sim.url, "--specperf-contexts=1663",
        "--specperf-text-classes=padding", "--output-tokens=400", "--specperf-repeats=2",
        "--specperf-max-repeats=2", "--specperf-warmup=0", "--specperf-acceptance-source=log",
        f"--specperf-log-command={command}", "--baseline-dir", str(tmp_path / "b"))
    out = result.stdout.str()
    assert "acceptance from log" in out, out
    row = [line for line in out.splitlines() if "| padding" in line]
    assert row, out
    commit = float(row[0].split("|")[3])
    # The response's own spec_verify_ct for this case gives ~7.1; windows agree within 10%.
    assert 6.0 < commit < 8.2, out
