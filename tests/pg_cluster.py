"""A PostgreSQL cluster of a test's own, which the test may stop and start again (the shared
server of SPECPERF_TEST_PG_URL must stay up for every other test): initdb and pg_ctl as the
``postgres`` user in a temp directory, as .ci/postgres.sh starts the shared one."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


def _bin() -> Path | None:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin"),
                   key=lambda p: [int(x) for x in p.parent.name.split(".") if x.isdigit()])
    return found[-1] if found and os.geteuid() == 0 else None


class PgCluster:
    """One cluster on a free loopback port; ``stop`` and ``start`` wait until it is so."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin = bin_dir
        self.dir = Path(tempfile.mkdtemp(prefix="specperf-pg-test."))  # postgres must reach it
        shutil.chown(self.dir, "postgres")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self._as_postgres("initdb", "-D", str(self.dir / "data"), "-A", "trust", "-U",
                          "postgres")

    def stop_command(self) -> list[str]:
        """The command that stops it and returns once it is down."""
        return ["runuser", "-u", "postgres", "--", str(self.bin / "pg_ctl"), "-D",
                str(self.dir / "data"), "-m", "fast", "-w", "stop"]

    def start(self) -> None:
        self._as_postgres("pg_ctl", "-D", str(self.dir / "data"), "-o",
                          f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1",
                          "-l", str(self.dir / "log"), "-w", "start")

    def stop(self) -> None:
        subprocess.run(self.stop_command(), check=True, capture_output=True, timeout=60)

    def remove(self) -> None:
        subprocess.run(self.stop_command(), capture_output=True, timeout=60)
        shutil.rmtree(self.dir, ignore_errors=True)

    def _as_postgres(self, tool: str, *args: str) -> None:
        subprocess.run(["runuser", "-u", "postgres", "--", str(self.bin / tool), *args],
                       check=True, capture_output=True, timeout=120)


@pytest.fixture(name="pg_cluster")
def pg_cluster_fixture() -> Iterator[PgCluster]:
    """A started cluster of this test's own, removed after it."""
    bin_dir = _bin()
    if bin_dir is None:
        pytest.skip("no PostgreSQL to start (needs Debian's postgresql package and root, as "
                    ".ci/postgres.sh does)")
    cluster = PgCluster(bin_dir)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.remove()
