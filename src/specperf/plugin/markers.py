"""The markers perf tests use, registered in ``pytest_configure`` (the run is strict)."""

from __future__ import annotations

MARKERS = (
    "context_scaling: step time and acceptance across context lengths (the main job)",
    "concurrency_scaling: tok/s per user and aggregate, acceptance and step time across "
    "concurrency levels (bursts of C concurrent requests)",
    "text_class: acceptance per text class at equal context",
    "smoke: the short deploy-gate subset",
    "parser: the chat route with reasoning and tool-call parsers engaged",
    "streaming: streaming measured against non-streaming",
    "tolerance(**limits): per-test tolerance overrides, e.g. tolerance(step_ms=0.15)",
    "perf_cases(*(text_class, context)): measure these cases instead of the planned matrix",
)
