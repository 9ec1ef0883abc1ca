"""A second process writing to a results store, for tests/test_store.py.

``python store_writer.py URL runs PREFIX N``: writes runs PREFIX-0 … PREFIX-(N-1) and the
shared runs shared-0 … shared-4 (the other process writes those too), one transaction each,
then prints ``done``. ``python store_writer.py URL lock SERVER``: takes the advisory lock on
SERVER, prints ``held``, releases it on a line of stdin. ``python store_writer.py URL hold
RUN_ID``: writes that run inside a transaction, prints ``inside`` and waits on stdin before
committing (the test kills it there).
"""

from __future__ import annotations

import os
import socket
import sys

from specperf.record.files import history_entry
from specperf.store import engine, ingest
from specperf.store.hostlock import HostLock
from store_fixtures import doc


def main(url: str, mode: str, *args: str) -> None:
    if mode == "runs":
        prefix, count = args[0], int(args[1])
        ids = [f"{prefix}-{i}" for i in range(count)]
        ids[::4] = [f"shared-{i}" for i in range(len(ids[::4]))]
        for run_id in ids:
            d = doc(run_id)
            ingest.put_runs(url, [(history_entry(d, f"{run_id}/results.json"), d)])
        print("done", flush=True)
    elif mode == "lock":
        lock = HostLock(url, args[0], (socket.gethostname(), os.getpid(), "store_writer.py"),
                        timeout_s=60.0)
        lock.acquire()
        print("held", flush=True)
        sys.stdin.readline()
        lock.release()
        print("released", flush=True)
    elif mode == "hold":
        d = doc(args[0])
        with engine.transaction(url) as connection:
            ingest.put_run(connection, history_entry(d, f"{args[0]}/results.json"), d)
            print("inside", flush=True)
            sys.stdin.readline()


if __name__ == "__main__":
    main(*sys.argv[1:])
