"""Perf sessions run once and read by several tests: a project directory like
:class:`perf_project.PerfProject` that is not tied to the function-scoped ``pytester``, and a
session-wide store that runs a producer once whichever xdist worker asks first.

``pytest -n 2`` hands a module's tests to both workers in turn, so a module-scoped fixture
would run its session twice; :func:`once` keeps one result on disk (under the session's
shared base temp, behind a file lock) and every worker reads it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock

from perf_project import FAST, ROOT

PERF_FILES = ("test_context_scaling.py", "test_text_classes.py")


class Project:
    """The real perf tests in a directory of their own, run as a pytest subprocess with the
    same ini, arguments and environment as :class:`perf_project.PerfProject`."""

    def __init__(self, path: Path, lock_dir: Path, files: tuple[str, ...] = PERF_FILES) -> None:
        self.path = path
        self.lock_dir = lock_dir
        path.mkdir(parents=True, exist_ok=True)
        (path / "pytest.ini").write_text(
            "[pytest]\nfilterwarnings = error\naddopts = --strict-markers\n")
        for name in files:
            (path / name).write_text((ROOT / "perf_tests" / name).read_text())
        self._runs = 0

    def run(self, *args: str, env: dict[str, str] | None = None,
            timeout: float = 240) -> pytest.RunResult:
        """``pytest FAST *args`` in the project directory (as ``runpytest_subprocess``)."""
        self._runs += 1
        basetemp = self.path / f"runpytest-{self._runs}"
        full = {k: v for k, v in os.environ.items()
                if k not in ("PYTEST_ADDOPTS", "TOX_ENV_DIR")}
        full.update({"SPECPERF_LOCK_DIR": str(self.lock_dir), "SPECPERF_BASELINE_REPEATS": "5",
                     "HOME": str(self.path), "USERPROFILE": str(self.path), "PY_COLORS": "0",
                     "PYTHONPATH": os.pathsep.join(
                         filter(None, [str(self.path), os.environ.get("PYTHONPATH", "")]))})
        full.update(env or {})
        start = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "pytest", f"--basetemp={basetemp}", *FAST,
                               *args], cwd=self.path, env=full, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL, check=False)
        return pytest.RunResult(done.returncode, done.stdout.splitlines(),
                                done.stderr.splitlines(), time.monotonic() - start)


def save(result: pytest.RunResult, path: Path) -> None:
    """Keep a run's exit code and output for :func:`load`."""
    path.write_text(json.dumps({"ret": int(result.ret), "out": result.outlines,
                                "err": result.errlines, "duration": result.duration}))


def load(path: Path) -> pytest.RunResult:
    """A run kept by :func:`save`, with ``parseoutcomes``, ``stdout.fnmatch_lines`` and all."""
    data = json.loads(path.read_text())
    return pytest.RunResult(data["ret"], data["out"], data["err"], data["duration"])


def session_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The base temp shared by this session's xdist workers (gw0/, gw1/… live inside it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def once(tmp_path_factory: pytest.TempPathFactory, name: str,
         produce: Callable[[Path], None]) -> Path:
    """``produce(directory)`` run once per test session; every later caller (any worker)
    waits for it and gets the same directory. A producer that failed is not kept: the next
    caller runs it again and fails the same way, in its own test."""
    root = session_dir(tmp_path_factory) / f"slowa-{name}"
    with FileLock(f"{root}.lock"):
        if not (root / ".done").is_file():
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir()
            produce(root)
            (root / ".done").write_text("ok\n")
    return root
