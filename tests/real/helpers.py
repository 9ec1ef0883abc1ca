"""Running the real suite against a real server, and reading what it printed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from perf_project import ROOT, PerfProject

# Contexts that fit the tiny model's 4096-token slots with room for the output.
CONTEXTS = "16,2000"
# Long enough that one request's decode outlasts the jitter of a shared 2-core machine.
OUTPUT = "256"
TABLE_ROW = re.compile(
    r"^\s*(\d+) \| (\w+)\s*\|([^|\n]+)\|([^|\n]+)\|([^|\n]+)\|([^|\n]+)\|", re.M)
FIT = re.compile(r"^fit (\w+): step_ms = (-?[0-9.]+) \+ (-?[0-9.]+)(?: ± [0-9.]+)? ms per 1k "
                 r"context \(residual ([0-9.]+) ms", re.M)


# Timing on 2 shared cores moves ~20 % between runs (measured on the CI machine), and a random
# tiny model's acceptance differs from prompt to prompt, so a cell spreads more than on the
# real box (which keeps the default 10 % limits and 0.10 spread). The tier's regressions are
# several times larger than these limits. Prefill (TTFT) is timing too and takes the same limit:
# the default +25 % was the tier's narrowest timing limit, and a clean local rerun of the main
# job moved one case's TTFT +24 % (its step time +22 %: the machine, not the case); a clean CI
# rerun failed one case of the main job outright (2026-12-07).
def tier_ini(*, spread: float = 0.3, timing: float = 0.4, step: float | None = None,
             ttft: float | None = -1.0) -> str:
    """A tier's ini: the noise limits and tolerances its servers need (acceptance 15 %).
    ``ttft`` is prefill's limit: the timing limit by default, None for the default +25 %."""
    prefill = "" if ttft is None else f"    ttft_ms = {timing if ttft < 0 else ttft:g}\n"
    return f"""[pytest]
filterwarnings = error
addopts = --strict-markers
specperf_max_spread = {spread:g}
specperf_tolerances =
    tok_s = {timing:g}
    decode_tok_s = {timing:g}
    step_ms = {timing if step is None else step:g}
    avg_commit = 0.15
    slope = 0.6
{prefill}"""


TOLERANCES = tier_ini()


def run_suite(project: PerfProject, url: str, report_dir: Path, baseline_dir: Path,
              *args: str, timeout: float = 900, ini_text: str = TOLERANCES) -> pytest.RunResult:
    """The main job (``-m context_scaling``) against ``url``, as a user runs it."""
    ini = project.pytester.makeini(ini_text)
    # -c: pytest picks its rootdir from the existing paths among the arguments (the baseline
    # directory of an earlier run), which would leave this ini unread.
    return project.run("-c", str(ini), "-m", "context_scaling", "--endpoint", url,
                       f"--specperf-contexts={CONTEXTS}",
                       f"--output-tokens={OUTPUT}", "--specperf-report-dir", str(report_dir),
                       "--baseline-dir", str(baseline_dir), "--deployment", "tiny-llama",
                       "--specperf-max-repeats=20",
                       *args, timeout=timeout)


# The concurrency tier's case: the short context at each level, with the main job's output
# length (a 64-token request lasts ~40 ms on the tiny model: its tok/s moved 50 % between
# runs); a -np 4 server's burst of 4 still lasts well under a second on 2 cores.
CONCURRENCY = ("--specperf-concurrency-class", "reasoning", "--specperf-concurrency-context", "16")
CONCURRENCY_OUTPUT = OUTPUT


# A 256-token request lasts ~0.1 s on the tiny model (1.5 ms steps), and a burst under 1 s:
# with other work on the 2 cores (load 4-7 measured while another suite ran), a level's step
# time moved +53 % and its tok/s -32 % between clean runs. The concurrency tier asserts counts
# (steps, counters), which are exact; its timing limits only keep a clean rerun from failing
# on that noise. Acceptance is deterministic (temperature 0, seeds) and keeps its limit.
CONCURRENCY_TOLERANCES = tier_ini(spread=0.5, timing=0.75)


def run_concurrency(project: PerfProject, url: str, report_dir: Path, baseline_dir: Path,
                    levels: str, *args: str, timeout: float = 600,
                    ini_text: str = CONCURRENCY_TOLERANCES) -> pytest.RunResult:
    """The concurrency tests (``-m concurrency_scaling``) against ``url`` at ``levels``."""
    ini = project.pytester.makeini(ini_text)
    project.pytester.path.joinpath("test_concurrency.py").write_text(
        (ROOT / "perf_tests" / "test_concurrency.py").read_text())
    return project.run("-c", str(ini), "-m", "concurrency_scaling", "--endpoint", url,
                       "--specperf-concurrency-levels", levels, *CONCURRENCY,
                       f"--output-tokens={CONCURRENCY_OUTPUT}", "--specperf-report-dir",
                       str(report_dir), "--baseline-dir", str(baseline_dir), "--deployment",
                       "tiny-llama", *args, timeout=timeout)


def table_rows(text: str) -> dict[str, list[float | None]]:
    """The closing table: {'padding-ctx16': [tok/s, avg commit, step ms, decode tok/s]}."""
    rows: dict[str, list[float | None]] = {}
    for m in TABLE_ROW.finditer(text):
        rows[f"{m[2]}-ctx{m[1]}"] = [_num(m[i]) for i in range(3, 7)]
    return rows


def fits(text: str) -> dict[str, tuple[float, float, float]]:
    """Each class's fit line: {'padding': (a ms, b ms per 1k, residual ms)}."""
    return {m[1]: (float(m[2]), float(m[3]), float(m[4])) for m in FIT.finditer(text)}


def _num(cell: str) -> float | None:
    try:
        return float(cell.strip())
    except ValueError:
        return None


def assert_skips_undetermined(out: str) -> None:
    """Every skip of a judged run (``-rA`` or ``-rs``) is an undetermined verdict with its
    sentence: what straddled the limit, neither a pass nor a fail."""
    outcomes = re.search(r"^=+ .*\b(\d+) skipped\b.* in [0-9.]+s", out, re.M)
    skipped = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    assert len(skipped) == (int(outcomes[1]) if outcomes else 0), out[-3000:]
    assert all(" undetermined: " in line and "neither a pass nor a fail" in line
               for line in skipped), skipped
