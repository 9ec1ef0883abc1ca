"""The baseline write lock (baselines/writelock.py): busy while another process holds it, free the
moment that process dies -- the lock file left behind is never in the way."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from specperf.baselines.writelock import write_lock
from specperf.core.errors import BaselineError

HOLD = ("import sys, time, filelock\n"
        "lock = filelock.FileLock(sys.argv[1]); lock.acquire()\n"
        "print('held', flush=True); time.sleep(120)\n")


def test_a_held_write_lock_times_out_with_one_sentence_and_frees_when_its_holder_dies(
        tmp_path: Path) -> None:
    path = tmp_path / ".write.lock"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(BaselineError) as caught, \
                write_lock(path, 0.2, "a baseline", BaselineError):
            pass
        assert str(caught.value) == (
            f"another run has held {path} for more than 0.2 s while writing a baseline: wait "
            f"for it to finish and run again (the lock frees itself when that run exits; never "
            f"delete the file).")
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    assert path.exists()  # a crashed holder leaves its file behind ...
    with write_lock(path, 5.0, "a baseline", BaselineError):  # ... and it is free at once
        pass
