"""A pytester project holding the real perf_tests, run as a separate pytest session."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from inprocess import NO_HYPOTHESIS

ROOT = Path(__file__).resolve().parents[1]
# Small and fast, but the real workflow: 2 contexts x 2 classes, 64 output tokens.
# The embedded simulator at 0.5 (see sim_fixtures.start_sim): no cell errors as unstable
# because the box is loaded.
# Without hypothesis's plugin: it imports hypothesis at every terminal summary (about 1.3 s of
# CPU a run; tests/inprocess.py).
FAST = ("--specperf-contexts=13,1663", "--output-tokens=64", "--specperf-repeats=3",
        "--specperf-warmup=1", "-p", "no:cacheprovider", "--specperf-sim-time-scale=0.5",
        *NO_HYPOTHESIS)


class PerfProject:
    """Writes the real perf tests into a pytester dir and runs pytest on them."""

    def __init__(self, pytester: pytest.Pytester, lock_dir: Path) -> None:
        self.pytester = pytester
        self.lock_dir = lock_dir
        pytester.makeini("[pytest]\nfilterwarnings = error\naddopts = --strict-markers\n")
        for name in ("test_context_scaling.py", "test_text_classes.py"):
            pytester.path.joinpath(name).write_text((ROOT / "perf_tests" / name).read_text())

    def run(self, *args: str, env: dict[str, str] | None = None,
            timeout: float = 240) -> pytest.RunResult:
        with self._environment(env):
            return self.pytester.runpytest_subprocess(*FAST, *args, timeout=timeout)

    def run_inprocess(self, *args: str, env: dict[str, str] | None = None) -> pytest.RunResult:
        """``run`` in this process: for runs that stop before measuring (collection, usage
        errors), where a subprocess is not the point and would cost an interpreter start."""
        with self._environment(env):
            return self.pytester.runpytest_inprocess(*FAST, *args)

    @contextlib.contextmanager
    def _environment(self, env: dict[str, str] | None) -> Iterator[None]:
        mp = pytest.MonkeyPatch()
        try:
            mp.setenv("SPECPERF_LOCK_DIR", str(self.lock_dir))
            # The tests' baselines are written for what they compare, not for the sweep
            # test's power (the default 10, docs/benchmarks.md §6): half the requests.
            mp.setenv("SPECPERF_BASELINE_REPEATS", "5")
            for key, value in (env or {}).items():
                mp.setenv(key, value)
            yield
        finally:
            mp.undo()


@pytest.fixture
def perf_project(pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory
                 ) -> Callable[[], PerfProject]:
    """Factory for a project with the real perf tests and its own lock directory."""
    lock_dir = tmp_path_factory.mktemp("locks")
    return lambda: PerfProject(pytester, lock_dir)
