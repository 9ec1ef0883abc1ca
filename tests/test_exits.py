"""One place turns a command's error into its exit code and sentence (cli/exits.py): the
caller's input is 2, the store, a file or a server failing is 3, and no other command module
keeps its own copy of those numbers."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from specperf.cli.exits import INFRASTRUCTURE, USAGE_ERROR, failed
from specperf.core.errors import ConfigError, NotAnLlmServer, StoreError

CLI = Path(__file__).resolve().parents[1] / "src" / "specperf" / "cli"


@pytest.mark.parametrize(("exc", "code", "line"), [
    (ConfigError("--db is not a store URL."), USAGE_ERROR,
     "specperf import: --db is not a store URL: nothing was imported."),
    (NotAnLlmServer("specperf: http://x/ answers but is no LLM server."), USAGE_ERROR,
     "specperf import: http://x/ answers but is no LLM server: nothing was imported."),
    (StoreError("the store at db is down."), INFRASTRUCTURE,
     "specperf import: the store at db is down."),
    (OSError(28, "No space left on device"), INFRASTRUCTURE,
     "specperf import: [Errno 28] No space left on device"),
])
def test_an_error_becomes_one_sentence_and_its_exit_code(exc, code, line, capsys):
    assert failed("import", exc, usage_note="nothing was imported.") == code
    assert capsys.readouterr().err.splitlines() == [line]


def test_no_command_keeps_its_own_exit_numbers():
    own = []
    for path in sorted(CLI.glob("*.py")):
        if path.name in ("exits.py", "decision.py"):  # decision.py: the gate's 1-4, built on it
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Assign) and isinstance(node.value, (ast.Constant, ast.Tuple)):
                names = [n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
                if any("USAGE" in n or "INFRA" in n for n in names):
                    own.append(f"{path.name}:{node.lineno} {', '.join(names)}")
    assert not own, own
