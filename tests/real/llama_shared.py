"""Runs of the suite that several tests of the real-server tier assert on.

A perf session against a real server costs tens of seconds on 2 cores, and many tests only
read different things out of the same session (its output, its results.json, the exchanges a
recording proxy saw). :class:`SharedRuns` runs each such session once per pytest session, the
first time a test asks for it, whichever test that is (``-k`` still works: a test alone runs
what it needs), and hands the same record to every later test.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from perf_project import PerfProject

from .helpers import run_suite
from .llama import LlamaServer
from .recorder import Exchange, Recorder

T = TypeVar("T")


class SharedRuns:
    """Session-wide memo of expensive runs, by name. A run that raised is not repeated: the
    test that ran it reports the error, and every later test asking for it fails naming it."""

    def __init__(self) -> None:
        self._done: dict[str, Any] = {}
        self._broken: dict[str, str] = {}

    def get(self, name: str, make: Callable[[], T]) -> T:
        """The record of run ``name``, made by ``make()`` the first time."""
        if name in self._broken:
            pytest.fail(f"the shared run {name!r} broke in an earlier test of this session "
                        f"({self._broken[name]}): see that test's report.")
        if name not in self._done:
            try:
                self._done[name] = make()
            except BaseException as exc:
                self._broken[name] = f"{type(exc).__name__}: {str(exc)[:200]}"
                raise
        value: T = self._done[name]
        return value


@dataclass(frozen=True)
class RecordedRun:
    """One run of the suite through a recording proxy: its output, its report directory and
    every exchange between the suite and the server, in order."""

    result: pytest.RunResult
    report_dir: Path
    exchanges: list[Exchange]
    url: str  # the proxy's URL, the one the suite was given


def recorded(url: str, report_dir: Path, run: Callable[[str, Path], pytest.RunResult]
             ) -> RecordedRun:
    """``run(proxy_url, report_dir)`` with a recording proxy in front of ``url``."""
    with Recorder(url) as rec:
        result = run(rec.url, report_dir)
    return RecordedRun(result, report_dir, list(rec.exchanges), rec.url)


# Three contexts, so the residual of the context fit says something (the step-time-rises test
# reads it); 2000 is where attention costs as much as the tiny model's weights.
MAIN_CONTEXTS = "--specperf-contexts=16,500,2000"
MAIN_CASES = frozenset(f"{c}-ctx{n}" for c in ("padding", "reasoning") for n in (16, 500, 2000))


@dataclass(frozen=True)
class MainJob:
    """The main job against a llama-server with the tiny draft: a baseline run, then a rerun
    against that baseline, both recorded. The baseline is the acceptance regression's too."""

    baseline_dir: Path
    first: RecordedRun  # --specperf-update-baselines
    second: RecordedRun  # judged against the first's baseline


def run_main_job(project: Callable[[], PerfProject], server: LlamaServer, root: Path
                 ) -> MainJob:
    """The main job's two runs against ``server``, under ``root``."""
    perf = project()
    baseline = root / "b"

    def first(url: str, report_dir: Path) -> pytest.RunResult:
        return run_suite(perf, url, report_dir, baseline, "--specperf-update-baselines", "-v",
                         MAIN_CONTEXTS)

    def second(url: str, report_dir: Path) -> pytest.RunResult:
        return run_suite(perf, url, report_dir, baseline, "-v", "-rA", MAIN_CONTEXTS)

    return MainJob(baseline, recorded(server.url, root / "r1", first),
                   recorded(server.url, root / "r2", second))
