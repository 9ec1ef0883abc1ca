"""specperf: a pytest performance regression suite for speculative-decoding LLM endpoints."""

from __future__ import annotations

__version__ = "0.1.0"
