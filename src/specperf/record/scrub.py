"""Secrets never reach a record: every string is scrubbed of the API key's value and of
``Authorization``/``Bearer`` credentials before a results document is written."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

REDACTED = "[redacted]"
_CREDENTIAL = re.compile(r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]+(\s+[^\s\"',}]+)?"
                         r"|(bearer\s+)[^\s\"',}]+")


def scrub(value: Any, secret_values: Iterable[str]) -> Any:
    """A copy of ``value`` with every secret and credential header replaced by [redacted]."""
    hidden = [s for s in secret_values if s]
    if isinstance(value, str):
        for s in hidden:
            value = value.replace(s, REDACTED)
        return _CREDENTIAL.sub(_redact_match, value)
    if isinstance(value, dict):
        return {scrub(k, hidden): scrub(v, hidden) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub(v, hidden) for v in value]
    return value


def _redact_match(match: re.Match[str]) -> str:
    return (match.group(1) or match.group(3)) + REDACTED
