"""The baselines' write lock: two runs writing the next version of one deployment's files
take turns, so they pick different version numbers.

Like the GPU lock (measure/lock.py) it is an ``fcntl.flock`` through ``filelock``, whose
timeout is translated here into the caller's error.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import filelock

from ..core.errors import SpecperfError

LOCK_NAME = ".write.lock"


def write_lock_path(directory: Path) -> Path:
    """The lock a writer of ``directory``'s versions holds: ``<directory>/.write.lock``."""
    return directory / LOCK_NAME


@contextmanager
def write_lock(path: Path, timeout_s: float, what: str,
               error: type[SpecperfError]) -> Iterator[None]:
    """Hold ``path`` exclusively while writing ``what`` (e.g. a baseline); ``error`` when
    another run holds it past ``timeout_s``.

    The kernel frees an flock when its holder exits, so a lock file left behind by a
    crashed run never blocks anyone and is never deleted.
    """
    try:
        with filelock.FileLock(str(path), timeout=timeout_s, mode=0o666, thread_local=False):
            yield
    except filelock.Timeout as exc:
        raise error(f"another run has held {path} for more than {timeout_s:g} s while "
                    f"writing {what}: wait for it to finish and run again (the lock frees "
                    f"itself when that run exits; never delete the file).") from exc
