"""Shared fixtures of the suite's own tests: real simulator processes on loopback."""

from __future__ import annotations

import os

# Imported before any test: pytester restores sys.modules after each test that uses it, so
# a module first imported inside such a test (httpx loads httpcore lazily) would be
# imported again later with new exception classes that httpx no longer recognises.
import httpcore  # noqa: F401

# The pytest runs this suite starts as plain subprocesses (gate runs, the main job) skip
# hypothesis's plugin, which imports hypothesis at every terminal summary: about 1.3 s of CPU a
# run on a 2-core machine. (pytester clears PYTEST_ADDOPTS: its runs get the flag from
# perf_project.FAST or inprocess.NO_HYPOTHESIS.) This process's property tests are unaffected.
os.environ["PYTEST_ADDOPTS"] = " ".join(
    filter(None, [os.environ.get("PYTEST_ADDOPTS"), "-p no:hypothesispytest"]))

from perf_project import perf_project  # noqa: F401
from sim_fixtures import sim_server, start_sim  # noqa: F401
from workflow_fixture import workflow  # noqa: F401
