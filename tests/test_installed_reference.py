"""README's from-any-directory command after ``pip install``: the embedded simulator is judged
against the reference baseline shipped in the package, not left NOT JUDGED (tests/
test_installed.py builds the venv; this reuses it)."""

from __future__ import annotations

import re

import pytest

from test_installed import Installed, installed  # noqa: F401  (the shared venv fixture)

# One short case at the reference's own output length (600 tokens), so it is judged.
REFERENCE_JOB = ("-m", "pytest", "--pyargs", "specperf.perf_tests", "-m", "context_scaling",
                 "--specperf-contexts", "13", "--specperf-text-classes", "padding", "-q", "-p",
                 "no:cacheprovider", "--specperf-sim-time-scale=0.5", "-rs",
                 "-v", "-v")  # verbosity 1 (after -q): the detail names the baseline


@pytest.mark.slow  # builds a wheel and a venv, then a perf session (README: test commands)
def test_the_installed_main_job_reads_the_shipped_reference(installed: Installed) -> None:  # noqa: F811
    done = installed.run("python", *REFERENCE_JOB, "--specperf-report-dir", installed.work / "ref")
    out = done.stdout + done.stderr
    shipped = installed.site_packages / "specperf" / "baselines" / "reference"
    header = next((line for line in done.stdout.splitlines() if line.startswith("specperf — ")),
                  "")
    assert re.search(r"baseline sim-kimi-k26-ddtree v\d+ \(the simulator's reference shipped "
                     rf"with specperf, in {re.escape(str(shipped.resolve()))}, as no "
                     r"--baseline-dir was given and baselines/ holds none; created ",
                     header), out
    assert "NOT JUDGED" not in out and "no baseline for deployment" not in out, out
    # The case was judged (passed, or failed on a loaded box): not skipped for want of one.
    assert re.search(r"\b(1 passed|1 failed)\b", done.stdout.splitlines()[-1]), out
