"""Hold a GPU lock from a separate process, for tests: ``lock_holder.py LOCKPATH SECONDS``.

Prints ``held`` once the lock is taken, so the test knows when to start
waiting, then holds it for SECONDS and releases it on the way out.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from specperf.measure.lock import GpuLock


def main(argv: list[str]) -> int:
    """Take the lock, announce it, hold it, release it."""
    path, seconds = Path(argv[0]), float(argv[1])
    with GpuLock(path, timeout_s=10.0, endpoint="http://127.0.0.1:30000"):
        print("held", flush=True)
        time.sleep(seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
