"""Shared fixtures of the suite's own tests: real simulator processes on loopback."""

from __future__ import annotations

from perf_project import perf_project  # noqa: F401
from sim_fixtures import sim_server, start_sim  # noqa: F401
