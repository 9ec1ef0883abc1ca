"""The exit codes every specperf command shares, and the one place a command's error becomes
one: a sentence on stderr naming the command, then 2 (the caller's input) or 3 (the store, a
file or a server failed). The gate adds 1 (a regression) and 4 (pytest refused its options),
cli/decision.py."""

from __future__ import annotations

import sys

from ..core.errors import ConfigError, NotAnLlmServer

USAGE_ERROR = 2
INFRASTRUCTURE = 3
# The errors the caller fixes with other input: a bad option, path or file, and a URL that
# answers but is not an LLM server (a wrong port).
CALLERS = (ConfigError, NotAnLlmServer)


def failed(command: str, exc: BaseException, *, usage_note: str = "") -> int:
    """Print ``specperf COMMAND: sentence`` and return the exit code of ``exc``: 2 for the
    caller's input (``usage_note``, when given, ends that sentence), else 3."""
    # the probe's errors, written for pytest's output, start with "specperf: " already
    said = str(exc).strip().removeprefix("specperf: ") or type(exc).__name__
    if isinstance(exc, CALLERS):
        if usage_note:
            said = f"{said.rstrip('.')}: {usage_note}"
        print(f"specperf {command}: {said}", file=sys.stderr)
        return USAGE_ERROR
    print(f"specperf {command}: {said}", file=sys.stderr)
    return INFRASTRUCTURE


def unwritable(command: str, flag: str, path: object, exc: OSError) -> int:
    """Print that the file ``flag`` names cannot be written, and why; 2: a path is the
    caller's to change."""
    # mkdir says "File exists" of a file standing where a directory should be
    why = f"{exc.filename} is not a directory" if isinstance(exc, FileExistsError) \
        else exc.strerror or str(exc)
    print(f"specperf {command}: {flag} {path} cannot be written ({why}): give a path in a "
          "writable directory.", file=sys.stderr)
    return USAGE_ERROR
