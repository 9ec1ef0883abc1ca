"""Shared fixtures of the suite's own tests: real simulator processes on loopback."""

from __future__ import annotations

import os

# Imported before any test: pytester restores sys.modules after each test that uses it, so
# a module first imported inside such a test (httpx loads httpcore lazily) would be
# imported again later with new exception classes that httpx no longer recognises.
import httpcore  # noqa: F401

# Every pytest this suite starts in a subprocess (perf sessions, gate runs) skips hypothesis's
# plugin: it imports hypothesis at every terminal summary, about 1.3 s of CPU per run, which
# the suite's hundreds of subprocess runs paid on a 2-core machine. The property tests of this
# process are unaffected (xdist workers run them with hypothesis imported by the tests).
os.environ["PYTEST_ADDOPTS"] = " ".join(
    filter(None, [os.environ.get("PYTEST_ADDOPTS"), "-p no:hypothesispytest"]))

from perf_project import perf_project  # noqa: F401
from sim_fixtures import sim_server, start_sim  # noqa: F401
from workflow_fixture import workflow  # noqa: F401
