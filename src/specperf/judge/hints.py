"""The advice a verdict sentence ends with: what to check, or how to refresh the baseline.

Shared by the case, fit, sweep and concurrency verdicts, so one regression reads the same
wherever it is found.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable

ACCEPTANCE_HINT = "acceptance regression: check the drafter and the text"
STEP_HINT = "step-time regression: check the kernels, attention backend and KV cache"
PREFILL_HINT = ("prefill regression: check prompt processing (the batch size, e.g. llama.cpp "
                "-ub; chunked prefill; the prefix and attention kernels)")
REFRESH_HINT = "refresh it with --specperf-update-baselines if this is intended"

# The command that measures again, given the arguments after its ``-m`` marker and flags. The
# plugin passes one built from the run's own flags (settings/hints.py ``rerun_command``), so
# the advice acts on the same server, deployment and baselines; ``plain_rerun`` is for callers
# outside a run (a notebook, a benchmark).
Rerun = Callable[..., str]


def plain_rerun(*args: str, marker: str = "context_scaling") -> str:
    """``pytest perf_tests -m MARKER ARGS…``: the bare suite, no run's flags."""
    return shlex.join(["pytest", "perf_tests", "-m", marker, *args])
