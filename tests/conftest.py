"""Shared fixtures of the suite's own tests: real simulator processes on loopback."""

from __future__ import annotations

# Imported before any test: pytester restores sys.modules after each test that uses it, so
# a module first imported inside such a test (httpx loads httpcore lazily) would be
# imported again later with new exception classes that httpx no longer recognises.
import httpcore  # noqa: F401

from perf_project import perf_project  # noqa: F401
from sim_fixtures import clean_sim, module_sim, sim_server, start_sim  # noqa: F401
from workflow_fixture import workflow  # noqa: F401
