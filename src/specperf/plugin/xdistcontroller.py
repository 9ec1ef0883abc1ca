"""The xdist controller's hold on the endpoint's GPU lock for the whole session."""

from __future__ import annotations

from typing import Any

import pytest

from ..core.errors import SpecperfError
from ..measure.lock import GpuLock, across_hosts, lock_path
from ..settings.config import Settings
from .terminal import write_line


class XdistController:
    """Under pytest-xdist the controller holds the endpoint's session GPU lock.

    Taken at session start, before any worker measures, released when the session ends.
    Workers are told (``workerinput``) and serialise among themselves per case. Only for a
    configured endpoint: with the embedded simulator each worker runs its own simulator.
    """

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self.lock: GpuLock | None = None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        assert self.settings.endpoint is not None
        def progress(line: str) -> None:
            write_line(self.config, line)

        lock = GpuLock(lock_path(self.settings), timeout_s=self.settings.gpu_lock_timeout,
                       endpoint=self.settings.endpoint, progress=progress,
                       across=across_hosts(self.settings, self.settings.endpoint, progress))
        try:
            lock.acquire()
        except SpecperfError as exc:
            pytest.exit(f"{type(exc).__name__}: {exc}", returncode=pytest.ExitCode.INTERNAL_ERROR)
        self.lock = lock

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["specperf_lock_held"] = self.lock is not None

    def pytest_sessionfinish(self) -> None:
        if self.lock is not None:
            self.lock.release()
