"""An SGLang-speaking speculative-decoding server simulator (``python -m specperf.sim``).

It serves SGLang's HTTP API (``/generate``, the OpenAI routes, ``/tokenize``,
``/server_info``, ``/metrics``, ...) from one asyncio scheduler loop whose physics come from
a profile (``specperf/sim/profiles/*.toml``); ``--time-scale`` runs it faster than real time.
A fault API under ``/_sim/`` injects errors and regressions (see ``specperf.sim.faults``).
With the profile's ``reasoning_parser`` / ``tool_call_parser`` (``[model]`` table) the raw
output carries Kimi K2 think and tool-call markers, parsed on the chat route
(``specperf.sim.parsers``); streams carry one chunk per verify step (``openai_api``, ``native``).

Public surface: :func:`main` (the CLI), :func:`load_profile`, :class:`Profile`,
:data:`READY_PREFIX` (the first stdout line starts with it, followed by the URL).
"""

from __future__ import annotations

from specperf.sim.profile import DEFAULT_PROFILE, Profile, load_profile

# Here, not in server.py: a process that only reads profiles (the suite's plugin, every pytest
# run) then never imports the HTTP server (uvicorn, starlette).
READY_PREFIX = "specperf-sim listening on "

__all__ = ["DEFAULT_PROFILE", "READY_PREFIX", "Profile", "load_profile"]
