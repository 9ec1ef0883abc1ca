"""Lines to the terminal while a case runs, past pytest's capture."""

from __future__ import annotations

import os

import pytest

from ..measure.sample import Sample
from ..views import summary


def write_line(config: pytest.Config, line: str) -> None:
    """One line to the terminal, past pytest's capture, while a case runs."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None:
        return
    if capture is None:
        reporter.write_line(line)
        return
    # Progress must reach the terminal while the case runs, past pytest's capture.
    with capture.global_and_fixture_disabled():
        reporter.write_line(line)


# The identity of a suite error raised again for later tests (the session's start error, a
# case's error its sweep meets): its process and object, as a report property (under xdist
# the controller sees the workers' reports, not their exceptions).
SAME_ERROR = "specperf_same_error"


def error_identity(error: BaseException) -> str:
    return f"{os.getpid()}:{id(error)}"


def say_once(config: pytest.Config) -> None:
    """An error raised again for every later test (a wrong endpoint: each test's setup meets
    the one session error) is shown in full once; each later test's error section points at
    the first. Run at session end, after the record kept every test's full error."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    first: dict[str, str] = {}
    for report in reporter.stats.get("error", []):
        same = dict(getattr(report, "user_properties", ())).get(SAME_ERROR)
        shown = first.setdefault(same, report.nodeid) if same else report.nodeid
        if shown != report.nodeid:
            report.longrepr = f"the same error as {shown.rsplit('::', 1)[-1]} above."


def show_sample(config: pytest.Config, sample: Sample, total: int) -> None:
    """One finished request's line, at -v and above."""
    if config.get_verbosity() >= 1:
        write_line(config, "  " + summary.sample_line(sample, total))
