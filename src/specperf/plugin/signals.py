"""Stopping on a signal: the run ends like Ctrl-C, and the interrupt is reported cleanly."""

from __future__ import annotations

import os
from typing import Any

from ..core import stop


class StopOnce:
    """SIGTERM (a cancelled CI job, `kill`) and SIGINT end the run like Ctrl-C: pytest then
    finishes the session, so the lock is released and what was measured is written out.

    Only the first signal interrupts. `timeout -s INT` signals the process and then its whole
    group, so a second one arrives while the session is closing; raising again there would
    abort the cleanup with a long traceback. Later ones are acknowledged and ignored.
    The first is also kept as a stop request (core/stop.py), which the measuring loops raise
    again if the interrupt was swallowed before pytest saw it.
    """

    def __init__(self) -> None:
        self.stopping = False

    def __call__(self, signum: int, frame: object) -> None:
        if not self.stopping:
            self.stopping = True
            stop.request(signum)  # kept: a finalizer may swallow the raise (core/stop.py)
            raise KeyboardInterrupt(f"specperf: stopped by signal {signum}")
        os.write(2, b"specperf: already stopping: releasing the GPU lock and writing the "
                    b"report (SIGKILL ends it at once)\n")


def has_line(entry: Any) -> bool:
    """Whether a traceback entry has a line number (a signal can land where none maps)."""
    try:
        return entry.lineno is not None
    except TypeError:  # tb_lineno is None: ``lineno`` is tb_lineno - 1
        return False
