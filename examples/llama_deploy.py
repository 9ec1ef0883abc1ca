"""Deploy a version of a deploy log on a llama.cpp box: restart ``llama-server`` with the
version's draft model, so `specperf bisect` walks drafter checkpoints on a real server.

Each line of the versions file names a version and its ``"draft"`` (a GGUF path); the target
model, binary, port and flags are the box's own (``--target``, ``--binary``, ``--port``,
``-- EXTRA``). A deploy stops the server this script started last (its pid is kept in
``--state DIR``), then starts the new one detached and returns: bisect waits for ``/health``.
A draft file that does not exist fails the deploy (exit 1), as a broken checkpoint would::

    specperf bisect --endpoint http://127.0.0.1:8090 --versions drafts.jsonl \\
        --deploy "python examples/llama_deploy.py --state /tmp/llama-box deploy \\
                  --binary llama-server --target t.gguf --port 8090 \\
                  --versions drafts.jsonl {version}"

``python examples/llama_deploy.py --state /tmp/llama-box stop`` stops it (when the bisect
is done, before redeploying what should run).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def _line(versions: Path, name: str) -> dict[str, Any] | None:
    for raw in versions.read_text(encoding="utf-8").splitlines():
        if raw.strip().startswith("{"):
            data = json.loads(raw)
            if data.get("name") == name:
                return dict(data)
    return None


def stop(state: Path, timeout_s: float = 15.0) -> None:
    """Stop the server this script started last, if it still runs."""
    pid_file = state / "llama.pid"
    if not pid_file.is_file():
        return
    pid = int(pid_file.read_text())
    pid_file.unlink()
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:  # the port must be free before the next server binds
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)


def deploy(args: argparse.Namespace) -> int:
    line = _line(args.versions, args.version)
    if line is None:
        print(f"llama_deploy: no version {args.version!r} in {args.versions}", file=sys.stderr)
        return 2
    draft = Path(str(line.get("draft", "")))
    if not draft.is_file():
        print(f"llama_deploy: draft model {draft} of {args.version} does not exist",
              file=sys.stderr)
        return 1
    args.state.mkdir(parents=True, exist_ok=True)
    stop(args.state)
    argv = [str(args.binary), "-m", str(args.target), "-md", str(draft), "--spec-type",
            "draft-simple", "--host", "127.0.0.1", "--port", str(args.port), "--metrics",
            "--no-webui", *args.extra]
    log = (args.state / f"llama-{args.version}.log").open("wb")
    process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, start_new_session=True)
    log.close()
    (args.state / "llama.pid").write_text(str(process.pid))
    print(f"llama_deploy: {args.version} starting (draft {draft}, pid {process.pid})")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--state", type=Path, required=True,
                        help="where the running server's pid and logs are kept")
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("deploy", help="restart llama-server with a version's draft")
    d.add_argument("--binary", type=Path, required=True)
    d.add_argument("--target", type=Path, required=True)
    d.add_argument("--port", type=int, required=True)
    d.add_argument("--versions", type=Path, required=True)
    d.add_argument("version")
    d.add_argument("extra", nargs="*", help="more llama-server flags (after --)")
    sub.add_parser("stop", help="stop the server")
    args = parser.parse_args(argv)
    if args.command == "stop":
        stop(args.state)
        return 0
    return deploy(args)


if __name__ == "__main__":
    sys.exit(main())
