"""Every command fails well (issue 49): each subcommand, run as the installed ``specperf``
script, against the bad inputs that apply to it — a results store nothing listens on, a URL
that is no LLM server (``python3 -m http.server``), a refused port, a corrupt file, a missing
file, a password in a database URL, and Ctrl-C while it waits on a server that accepts and
never answers — ends with the documented exit code (2 usage, 3 infrastructure, 130
interrupted: cli/__init__.py, docs/store.md, docs/bisect.md), no traceback, only specperf's own
lines, and its error in one sentence on its last line of its own. ``pytest -s`` prints the table.
(``specperf baselines`` reads no server: its bad inputs are its directory and its files.)"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from test_report import make_doc

SPECPERF = str(Path(sys.executable).with_name("specperf"))
USAGE, INFRA, INTERRUPTED = 2, 3, 130
DEADLINE_S = 60.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Silent:
    """A TCP server that accepts and never answers: a command waiting on it is waiting."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.sock.getsockname()[1])
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


@dataclass(frozen=True)
class Where:
    """The bad inputs of one module: servers and files."""

    dir: Path
    web: str  # python3 -m http.server: answers HTTP, is no LLM server
    refused: str  # nothing listens
    silent: Silent

    @property
    def down_db(self) -> str:
        return f"postgresql://specperf@{self.refused.split('//')[1]}/specperf"


def _files(d: Path) -> None:
    (d / "corrupt.json").write_text('{"run_id": "cut')
    (d / "corrupt.jsonl").write_text("not json\n")
    (d / "versions.txt").write_text("v1\nv2\n")
    (d / "one-version.txt").write_text("[[[\n")
    (d / "baselines" / "d").mkdir(parents=True)
    (d / "baselines" / "d" / "v1.json").write_text('{"cases": ')
    (d / "good.jsonl").write_text('{"run_id": "r1", "created": "2026-12-01T02:00:00Z", '
                                  '"label": "box", "cells": {}}\n')
    (d / "results.json").write_text(json.dumps(make_doc()))
    (d / "a-file").write_text("stands where a directory should be")


@pytest.fixture(scope="module")
def where(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Where]:
    d = tmp_path_factory.mktemp("bad")
    _files(d)
    port = _free_port()
    web = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind",
                            "127.0.0.1"], cwd=d, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    silent = Silent()
    try:
        _wait_listening(port, web)
        yield Where(d, f"http://127.0.0.1:{port}", f"http://127.0.0.1:{_free_port()}", silent)
    finally:
        silent.close()
        web.terminate()
        web.wait(timeout=30)


def _wait_listening(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, "python3 -m http.server ended"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)  # polling an observable state (the port) with a deadline
    pytest.fail(f"python3 -m http.server did not listen on {port} within {DEADLINE_S} s")


@dataclass(frozen=True)
class Case:
    """One command against one bad input, and the code it must end with."""

    command: str
    given: str
    argv: tuple[str, ...]
    code: int
    env: tuple[tuple[str, str], ...] = ()
    ctrl_c: bool = False

    @property
    def interrupts(self) -> bool:
        return self.ctrl_c or self.code == INTERRUPTED


PW_DB = "postgresql://perf:secret@127.0.0.1:5432/specperf"
OFFLINE = ("--deployment", "d", "--class", "reasoning", "--context", "100",
           "--observed-tok-s", "3")
BISECT = ("--versions", "{d}/versions.txt", "--deploy", "true {{version}}", "--good", "v1",
          "--bad", "v2", "--deploy-timeout", "2", "--restore", "none")
EXPORT = ("export", "--format", "pytorch-v3", "--out", "{d}/out")
CASES = (
    Case("gate", "refused port", ("gate", "--endpoint", "{refused}"), INFRA),
    Case("gate", "no LLM server", ("gate", "--endpoint", "{web}"), USAGE),
    Case("gate", "missing file", ("gate", "--endpoint", "{web}", "--reference", "{d}/nowhere"),
         USAGE),
    Case("gate", "password in DB URL", ("gate", "--endpoint", "{web}"), USAGE,
         (("SPECPERF_RESULTS_DB", PW_DB),)),
    # The gate's documented code for an interrupted suite is 3 (cli/decision.py): nothing
    # could be concluded about the deploy, so someone is paged, the deploy not blamed.
    Case("gate", "Ctrl-C", ("gate", "--endpoint", "{silent}"), INFRA, ctrl_c=True),
    Case("explain", "refused port", ("explain", "--endpoint", "{refused}"), INFRA),
    Case("explain", "no LLM server", ("explain", "--endpoint", "{web}"), USAGE),
    Case("explain", "missing file", ("explain", *OFFLINE, "--history", "{d}/nowhere.jsonl"),
         USAGE),
    Case("explain", "corrupt file", ("explain", *OFFLINE, "--baseline-dir", "{d}/baselines"),
         INFRA),
    Case("explain", "password in DB URL", ("explain", *OFFLINE), USAGE,
         (("SPECPERF_RESULTS_DB", PW_DB),)),
    Case("explain", "Ctrl-C", ("explain", "--endpoint", "{silent}"), INTERRUPTED),
    Case("bisect", "refused port", ("bisect", "--endpoint", "{refused}", *BISECT), INFRA),
    Case("bisect", "no LLM server", ("bisect", "--endpoint", "{web}", *BISECT), USAGE),
    Case("bisect", "missing file", ("bisect", "--endpoint", "{web}", *BISECT,
                                    "--versions", "{d}/nowhere.txt"), USAGE),
    Case("bisect", "corrupt file", ("bisect", "--endpoint", "{web}", *BISECT,
                                    "--versions", "{d}/one-version.txt"), USAGE),
    Case("bisect", "Ctrl-C", ("bisect", "--endpoint", "{silent}", *BISECT), INTERRUPTED),
    Case("trend", "unreachable store", ("trend", "--history", "{d}/good.jsonl", "--db",
                                        "{down_db}"), INFRA),
    Case("trend", "password in DB URL", ("trend", "--history", "{d}/good.jsonl", "--db",
                                         PW_DB), USAGE),
    Case("trend", "missing file", ("trend", "--history", "{d}/nowhere.jsonl"), USAGE),
    Case("trend", "corrupt file", ("trend", "--history", "{d}/corrupt.jsonl"), USAGE),
    Case("trend", "Ctrl-C", ("trend", "--history", "{d}/good.jsonl", "--db", "{silent_db}"),
         INTERRUPTED),
    Case("import", "unreachable store", ("import", "{d}/good.jsonl", "--db", "{down_db}"),
         INFRA),
    Case("import", "password in DB URL", ("import", "{d}/good.jsonl", "--db", PW_DB), USAGE),
    Case("import", "missing file", ("import", "{d}/nowhere.json"), USAGE),
    Case("import", "corrupt file", ("import", "{d}/corrupt.json"), USAGE),
    Case("import", "Ctrl-C", ("import", "{d}/good.jsonl", "--db", "{silent_db}"), INTERRUPTED),
    Case("export", "unreachable store", (*EXPORT, "--db", "{down_db}"), INFRA),
    Case("export", "password in DB URL", (*EXPORT, "--db", PW_DB), USAGE),
    Case("export", "Ctrl-C", (*EXPORT, "--db", "{silent_db}"), INTERRUPTED),
    Case("report", "missing file", ("report", "{d}/nowhere.json"), USAGE),
    Case("report", "corrupt file", ("report", "{d}/corrupt.json"), USAGE),
    # An output path that cannot be written is the caller's to change, never a traceback.
    Case("report", "unwritable output", ("report", "{d}/results.json", "--out",
                                         "{d}/a-file/report.html"), USAGE),
    Case("trend", "unwritable output", ("trend", "--history", "{d}/good.jsonl", "--out",
                                        "{d}/a-file/trend.html"), USAGE),
    Case("export", "unwritable output", ("export", "--format", "pytorch-v3", "--out",
                                         "{d}/a-file/out", "--db", "sqlite:///{d}/s.db"),
         USAGE),
    # specperf baselines (cli/baselines.py): an unknown deployment or directory is the caller's
    # to fix; a baseline file that cannot be read is infrastructure, as explain says.
    Case("baselines", "missing file", ("baselines", "d", "--baseline-dir", "{d}/nowhere"),
         USAGE),
    Case("baselines", "corrupt file", ("baselines", "d", "--baseline-dir", "{d}/baselines"),
         INFRA),
)
TABLE: list[tuple[str, str, int, str]] = []


@pytest.fixture(scope="module", autouse=True)
def _table() -> Iterator[None]:
    """The rows as the cases ran, printed once at the end (visible with ``pytest -s``)."""
    yield
    width = max((len(f"{c} {g}") for c, g, _, _ in TABLE), default=0)
    print(f"\n{'command input'.ljust(width)}  code  sentence")
    for command, given, code, sentence in TABLE:
        print(f"{f'{command} {given}'.ljust(width)}  {code:>4}  {sentence}")


def _argv(case: Case, where: Where) -> list[str]:
    silent = f"127.0.0.1:{where.silent.port}"
    return [a.format(d=where.dir, web=where.web, refused=where.refused,
                     silent=f"http://{silent}", silent_db=f"postgresql://u@{silent}/x",
                     down_db=where.down_db) for a in case.argv]


def _run(case: Case, where: Where) -> tuple[int, str]:
    env = {**os.environ, "SPECPERF_LOCK_DIR": str(where.dir / "locks"), **dict(case.env)}
    if not case.env:  # the store each case names, never the one of the shell running it
        env.pop("SPECPERF_RESULTS_DB", None)
    proc = subprocess.Popen([SPECPERF, *_argv(case, where)], cwd=where.dir, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    if case.interrupts:  # Ctrl-C reaches the whole foreground group, as a terminal sends it
        before = len(where.silent.held)
        deadline = time.monotonic() + DEADLINE_S
        while len(where.silent.held) == before and proc.poll() is None:
            assert time.monotonic() < deadline, f"{case.command} never reached the server"
            time.sleep(0.05)  # polling an observable state (a connection) with a deadline
        os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    return proc.returncode, out


# The gate runs the perf suite in a pytest subprocess: more than 10 s on a loaded box.
PARAMS = [pytest.param(c, id=f"{c.command}-{c.given}",
                       marks=[pytest.mark.slow] if c.command == "gate" and
                       c.given != "missing file" else [])
          for c in CASES]


@pytest.mark.parametrize("case", PARAMS)
def test_a_bad_input_is_one_sentence_and_the_documented_code(case: Case, where: Where) -> None:
    code, out = _run(case, where)
    lines = [line for line in out.splitlines() if line.strip()]
    mine = f"specperf {case.command}:"
    last = next((line for line in reversed(lines) if line.startswith(mine)), "")
    TABLE.append((case.command, case.given, code, last))
    assert "Traceback" not in out, out[-3000:]
    assert code == case.code, out[-3000:]
    # The error is the last line of its own: the gate's closing block opens with it and only
    # its indented lines (the checks, the report, pytest's output) follow.
    after = lines[len(lines) - 1 - lines[::-1].index(last) + 1:] if last else []
    assert last and all(line.startswith("  ") for line in after), out[-3000:]
    assert last.rstrip().endswith(".") and "\n" not in last
    if case.command != "gate":  # the gate shows pytest's own output above its sentence
        assert all(line.startswith(("specperf ", "specperf:")) for line in lines), out
