"""Shared fixtures of the suite's own tests: real simulator processes on loopback."""

from __future__ import annotations

import os

# Imported before any test: pytester restores sys.modules after each test that uses it, so
# a module first imported inside such a test (httpx loads httpcore lazily) would be
# imported again later with new exception classes that httpx no longer recognises.
import httpcore  # noqa: F401

from perf_project import perf_project  # noqa: F401
from sim_fixtures import clean_sim, module_sim, sim_server, start_sim  # noqa: F401
from workflow_fixture import workflow  # noqa: F401

# The suite's own perf sessions must not write to the job summary of a GitHub Actions job
# running these tests, nor annotate it with their deliberate regressions: a test that wants
# a summary sets its own (tests/test_dashboards_e2e.py).
os.environ.pop("GITHUB_STEP_SUMMARY", None)
# The perf sessions the tests start print the closing block's detail under its first screen
# (--specperf-detail): most end-to-end tests check a verdict's line there. The first screen
# alone is tested by tests/test_first_screen.py (rendered directly) and the gate's tests.
os.environ["SPECPERF_DETAIL"] = "1"
