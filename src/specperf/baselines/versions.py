"""The versions of one kind of baseline file of one deployment: ``<dir>/v<N>.json``, N ≥ 1,
each written once, whole, and never replaced.

Every baseline dimension (the main job's context cases in ``<root>/<deployment>/``, the
concurrency levels in ``<root>/<deployment>/concurrency/``, and whatever comes next) keeps
its versions in one :class:`Versions`; only the file's contents differ.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

from ..core.errors import BaselineError
from .writelock import write_lock, write_lock_path

REPAIR = "restore it from git or write a new version with --specperf-update-baselines"
WRITE_LOCK_TIMEOUT_S = 60.0
_ATTEMPTS = 100
# Strict: "v0.json" and "v01.json" are not versions (a leading zero would give two names
# for one number).
_VERSION_FILE = re.compile(r"^v([1-9][0-9]*)\.json$")


def version_of(name: str) -> int | None:
    """The version a file name holds (``v12.json`` → 12), None when it is not a version."""
    found = _VERSION_FILE.match(name)
    return int(found.group(1)) if found else None


class Versions:
    """The ``v<N>.json`` files of one directory, named in sentences as ``noun``.

    Reading needs no lock: files appear whole (linked into place after fsync) and are never
    rewritten. Writing takes ``<dir>/.write.lock`` so two updates pick different numbers;
    the exclusive link is a second guard for writers whose locks do not see each other
    (e.g. some network filesystems).
    """

    def __init__(self, directory: Path, noun: str) -> None:
        self.directory = directory
        self.noun = noun

    def path(self, version: int) -> Path:
        return self.directory / f"v{version}.json"

    def numbers(self) -> list[int]:
        """The version numbers present, ascending."""
        if not self.directory.is_dir():
            return []
        found = (version_of(p.name) for p in self.directory.iterdir())
        return sorted(v for v in found if v is not None)

    def latest(self) -> int | None:
        numbers = self.numbers()
        return numbers[-1] if numbers else None

    def read(self, version: int) -> str:
        """The text of one version; unreadable is a BaselineError naming the file."""
        path = self.path(version)
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise BaselineError(f"{self.noun} {path} cannot be read ({exc}): {REPAIR}.") from exc

    def write_next(self, render: Callable[[int], str]) -> Path:
        """Write ``render(N)`` as v<N>, N = latest + 1; return the new file's path."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            with write_lock(write_lock_path(self.directory), WRITE_LOCK_TIMEOUT_S,
                            f"a {self.noun}", BaselineError):
                return self._write_unlocked(render)
        except OSError as exc:
            raise BaselineError(f"cannot write a {self.noun} in {self.directory} ({exc}): "
                                f"check that the directory is writable, or choose another "
                                f"with --specperf-baseline-dir.") from exc

    def _write_unlocked(self, render: Callable[[int], str]) -> Path:
        # The lock makes the first attempt succeed; the loop covers writers it cannot see.
        for _ in range(_ATTEMPTS):
            version = (self.latest() or 0) + 1
            target = self.path(version)
            if publish(target, render(version).encode("utf-8")):
                return target
        raise BaselineError(f"could not find a free version number in {self.directory} after "
                            f"{_ATTEMPTS} attempts: other writers keep taking them; try again.")


def publish(target: Path, data: bytes) -> bool:
    """Make ``target`` appear with ``data`` whole, never replacing a file; False if taken."""
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), 0o644)  # mkstemp's 0600 would hide it from other users
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(tmp, target)  # fails if target exists: never overwrites
        except FileExistsError:
            return False
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
                raise
            return _publish_exclusive(target, data)  # filesystems without hard links
        _fsync_directory(target.parent)
        return True
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _publish_exclusive(target: Path, data: bytes) -> bool:
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    _fsync_directory(target.parent)
    return True


def _fsync_directory(directory: Path) -> None:
    # The new directory entry must survive a crash too, not only the file's bytes.
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
