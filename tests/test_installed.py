"""specperf installed like any pytest plugin: a wheel of this checkout in a fresh venv.

A wheel is built from a copy of the working tree (``pip wheel --no-deps``; the copy keeps
``build/`` and the egg-info out of the checkout) and installed, not editable, into a venv
made in a temporary directory, without ``--system-site-packages``, so the checkout's own
editable install cannot leak in. Its dependencies are not downloaded and unpacked again (most
of the minute this took): the venv sees exactly the distributions the wheel's own
``Requires-Dist`` needs, and theirs, through one ``.pth`` to a directory of links into this
session's environment, each one checked against the version the wheel asks for; nothing
else of that environment (not specperf, not the dev tools) is visible. Every command then
runs from a directory outside the checkout, with no conftest and no ``-p``: pytest finds
the plugin through its ``pytest11`` entry point and the perf cases through
``--pyargs specperf.perf_tests``."""

from __future__ import annotations

import importlib.metadata
import os
import queue
import re
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from filelock import FileLock
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
# The main job at two short contexts against the embedded simulator. The simulator at 0.5
# (as tests/perf_project.py): no cell errors as unstable because the box is loaded. An
# empty baseline directory makes the outcome fixed: every case measured, then skipped for
# want of a baseline, exit code 0.
MAIN_JOB = ("-m", "pytest", "--pyargs", "specperf.perf_tests", "-m", "context_scaling",
            "--specperf-contexts", "13,1663", "--output-tokens", "100", "-q", "-p",
            "no:cacheprovider", "--specperf-sim-time-scale=0.5", "-rs")
READY_PREFIX = "specperf-sim listening on "


@dataclass(frozen=True)
class Installed:
    """The fresh venv with specperf installed from the wheel, and a directory to run in."""

    venv: Path
    work: Path

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def site_packages(self) -> Path:
        return next((self.venv / "lib").glob("python3*/site-packages"))

    def env(self) -> dict[str, str]:
        """The environment of an ordinary shell in the venv: nothing of this test session."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SPECPERF_", "PYTEST_", "PYTHON", "COV_"))
               and k != "VIRTUAL_ENV"}
        env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["VIRTUAL_ENV"] = str(self.venv)
        env["PYTHONUNBUFFERED"] = "1"
        env["SPECPERF_LOCK_DIR"] = str(self.work / "locks")  # not the box's GPU lock
        return env

    def run(self, *args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """A command of the venv (``python`` or a script in its bin/), cwd outside the checkout."""
        program, *rest = args
        exe = self.python if program == "python" else self.venv / "bin" / str(program)
        return subprocess.run([str(exe), *map(str, rest)], cwd=self.work, env=self.env(),
                              capture_output=True, text=True, timeout=timeout, check=False)


def _check(cmd: Sequence[str | Path], timeout: float) -> None:
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                          timeout=timeout, check=False,
                          env={k: v for k, v in os.environ.items()
                               if not k.startswith(("PYTHON", "PYTEST_"))})
    assert done.returncode == 0, f"{cmd}:\n{done.stdout}\n{done.stderr}"


def _build(root: Path) -> None:
    source, wheels, venv = root / "source", root / "wheels", root / "venv"
    shutil.copytree(ROOT / "src", source / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    _check([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", wheels, source], 300)
    [wheel] = wheels.glob("specperf-*.whl")
    _check([sys.executable, "-m", "venv", "--without-pip", venv], 120)
    _check([sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "-q",
            "--no-deps", wheel], 300)
    site = next((venv / "lib").glob("python3*/site-packages"))
    [info] = site.glob("specperf-*.dist-info")
    deps = root / "deps"
    deps.mkdir()
    for dist in _needed(importlib.metadata.PathDistribution(info).requires or []):
        for top in {Path(f).parts[0] for f in dist.files or ()} - {"..", "__pycache__"}:
            if not (deps / top).exists():
                (deps / top).symlink_to(Path(str(dist.locate_file(top))))
    (site / "specperf-test-deps.pth").write_text(f"{deps}\n")


def _needed(requires: list[str]) -> list[importlib.metadata.Distribution]:
    """The distributions of this environment that ``requires`` needs, and theirs, each in a
    version its requirement accepts."""
    found: dict[str, importlib.metadata.Distribution] = {}
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [(text, frozenset({""})) for text in requires]
    while todo:
        text, extras = todo.pop()
        req = Requirement(text)
        if req.marker is not None and not any(req.marker.evaluate({"extra": e}) for e in extras):
            continue
        dist = importlib.metadata.distribution(req.name)
        assert req.specifier.contains(dist.version, prereleases=True), (text, dist.version)
        key, wanted = canonicalize_name(req.name), frozenset({"", *req.extras})
        found[key] = dist
        if (key, wanted) not in seen:
            seen.add((key, wanted))
            todo += [(t, wanted) for t in dist.requires or []]
    return list(found.values())


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """Built and installed once per session, shared by xdist workers (under a file lock)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # gw0/, gw1/…: their parent is this session's
        base = base.parent
    root = base / "specperf-installed"
    with FileLock(f"{root}.lock"):
        if not (root / "done").is_file():
            shutil.rmtree(root, ignore_errors=True)
            _build(root)
            (root / "done").write_text("ok\n")
    work = tmp_path_factory.mktemp("outside-checkout")
    return Installed(root / "venv", work)


@pytest.fixture
def sim_url(installed: Installed) -> Iterator[str]:
    """The installed package's simulator as a server (the gate never judges the embedded one)."""
    proc = subprocess.Popen(
        [str(installed.python), "-m", "specperf.sim", "--port", "0", "--time-scale", "0.2"],
        cwd=installed.work, env=installed.env(), stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True)
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in proc.stdout or ():
            lines.put(line)
        lines.put("")  # EOF: it died before announcing itself

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        try:
            line = lines.get(timeout=30)
        except queue.Empty:
            line = ""
        assert line.startswith(READY_PREFIX), f"the simulator did not start: {line!r}"
        yield line[len(READY_PREFIX):].strip()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        reader.join(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.mark.slow  # builds a wheel and a venv (README: test commands)
def test_the_venv_imports_the_wheel_not_the_checkout(installed: Installed) -> None:
    done = installed.run("python", "-c",
                         "import importlib.metadata as m, specperf; print(specperf.__file__); "
                         "print(sorted(e.name for e in m.entry_points(group='pytest11') "
                         "if e.value.startswith('specperf')))")
    assert done.returncode == 0, done.stderr
    where, plugins = done.stdout.splitlines()
    assert Path(where).is_relative_to(installed.site_packages), where
    assert not Path(where).resolve().is_relative_to(ROOT), where
    assert plugins == "['specperf', 'specperf_fleet']"


@pytest.mark.slow
def test_the_main_job_runs_from_outside_the_checkout(installed: Installed) -> None:
    reports, no_baselines = installed.work / "reports", installed.work / "no-baselines"
    done = installed.run("python", *MAIN_JOB, "--specperf-report-dir", reports,
                         "--baseline-dir", no_baselines)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    # Measured against the embedded simulator: the closing table has all four cells.
    assert "SIMULATED" in out
    for context, text_class in (("13", "padding"), ("1663", "padding"), ("13", "reasoning"),
                                ("1663", "reasoning")):
        assert re.search(rf"^ +{context} \| {text_class} +\|", out, re.MULTILINE), out
    # ...then every test skipped for want of a baseline, the perf cases the venv's own.
    assert re.search(r"^\d+ skipped, \d+ deselected(, \d+ warnings?)? in ", done.stdout,
                     re.MULTILINE), out
    assert not re.search(r"\b(passed|failed|errors?)\b", done.stdout.splitlines()[-1]), out
    skips = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]
    assert skips, out
    assert all("no baseline for deployment 'sim-kimi-k26-ddtree'" in line for line in skips), out
    assert list(reports.glob("*/report.html")), out


@pytest.mark.slow
def test_the_gate_runs_the_shipped_smoke_cases(installed: Installed, sim_url: str) -> None:
    helped = installed.run("specperf", "gate", "--help")
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("usage: specperf gate"), helped.stdout
    assert "--perf-tests" in helped.stdout
    # No baseline: exit 3 before any request, naming every smoke case: a fixed outcome that
    # still goes the gate's whole way (find the tests, run pytest, read its JUnit XML).
    done = installed.run("specperf", "gate", "--endpoint", sim_url, "--deployment", "installed",
                         "--baseline-dir", installed.work / "no-baselines", "--",
                         "--specperf-report-dir", installed.work / "gate-reports")
    out = done.stdout + done.stderr
    assert done.returncode == 3, out
    # The command it ran is progress, on stderr; stdout holds the answer alone.
    [command] = [line for line in done.stderr.splitlines()
                 if line.startswith("specperf gate: python -m pytest ")]
    assert "python -m pytest" not in done.stdout
    tests = Path(shlex.split(command.removeprefix("specperf gate: "))[3])
    assert tests.resolve() == (installed.site_packages / "specperf" / "perf_tests").resolve()
    for case in ("reasoning-ctx3333", "padding-ctx3333", "padding-ctx13"):
        assert re.search(rf"^  ERROR {case}: ", done.stdout, re.MULTILINE), out
    assert re.search(r"^specperf gate: INFRASTRUCTURE PROBLEM \(exit 3\): (\d+) of \1 smoke "
                     r"checks have no baseline", done.stdout, re.MULTILINE), out
