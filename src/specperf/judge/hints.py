"""The advice a verdict sentence ends with: what to check, or how to refresh the baseline.

Shared by the case, fit, sweep and concurrency verdicts, so one regression reads the same
wherever it is found.
"""

from __future__ import annotations

ACCEPTANCE_HINT = "acceptance regression: check the drafter and the text"
STEP_HINT = "step-time regression: check the kernels, attention backend and KV cache"
PREFILL_HINT = ("prefill regression: check prompt processing (the batch size, e.g. llama.cpp "
                "-ub; chunked prefill; the prefix and attention kernels)")
REFRESH_HINT = "refresh it with --specperf-update-baselines if this is intended"
