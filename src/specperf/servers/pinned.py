"""Pinned (synthetic) acceptance: a llama-server started with ``--spec-synth-len`` or
``--spec-synth-rates`` accepts drafts at a dialled rate, not the drafter's, so its avg commit
says nothing about the deployment and only step time (and prefill) can be judged.

The server reports neither flag in ``/props`` or ``/slots`` (checked on build 0c1e570; it only
logs ``synthetic acceptance: n_max = …``), so they are read from the command line of the
process listening on a loopback endpoint's port (``/proc``). Only the two flags are kept,
never the rest of the command line (it may hold an ``--api-key``). A remote server, or one
whose process this user cannot see, is "unknown". llama.cpp also takes every flag from an
environment variable (``llama-server --help``: ``LLAMA_ARG_SPEC_SYNTH_LEN``,
``LLAMA_ARG_SPEC_SYNTH_RATES``); those are read from the same process's environment, and a
flag on the command line wins over its variable, as in llama.cpp.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

SYNTH_FLAGS = ("--spec-synth-len", "--spec-synth-rates")
SYNTH_ENV = {"LLAMA_ARG_SPEC_SYNTH_LEN": "--spec-synth-len",
             "LLAMA_ARG_SPEC_SYNTH_RATES": "--spec-synth-rates"}
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
_LISTEN = "0A"
_PROC = Path("/proc")


def pinned_acceptance(url: str) -> str | bool | None:
    """The synthetic-acceptance flags of the server behind ``url`` (e.g. ``--spec-synth-len
    2``), False when its command line has none, None when it cannot be read."""
    pid = _listener_pid(url)
    argv = None if pid is None else _argv(pid)
    if pid is None or argv is None:
        return None
    found: dict[str, str] = {}
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if name in SYNTH_FLAGS:
            found[name] = value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
    for variable, value in _environ(pid).items():
        flag = SYNTH_ENV.get(variable)
        if flag is not None and flag not in found:
            found[flag] = value
    text = [f"{name} {found[name]}".strip() for name in SYNTH_FLAGS if name in found]
    return " ".join(text) if text else False


def _environ(pid: str) -> dict[str, str]:
    """The process's synthetic-acceptance variables only (never the rest: it may hold keys);
    none when it cannot be read (another user's process)."""
    try:
        raw = (_PROC / pid / "environ").read_bytes()
    except OSError:
        return {}
    out = {}
    for item in raw.split(b"\0"):
        name, _, value = item.decode(errors="replace").partition("=")
        if name in SYNTH_ENV:
            out[name] = value
    return out


def _listener_pid(url: str) -> str | None:
    parts = urlsplit(url)
    if parts.hostname not in _LOOPBACK or parts.port is None:
        return None
    inode = _listening_inode(parts.port)
    if inode is None:
        return None
    target = f"socket:[{inode}]"
    for pid in (p for p in _safe_list(_PROC) if p.isdigit()):
        for fd in _safe_list(_PROC / pid / "fd"):
            try:
                if os.readlink(_PROC / pid / "fd" / fd) == target:
                    return pid
            except OSError:
                continue
    return None


def _listening_inode(port: int) -> str | None:
    """The socket inode listening on ``port`` (IPv4 or IPv6), from /proc/net/tcp*."""
    for table in ("tcp", "tcp6"):
        try:
            lines = (_PROC / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == _LISTEN \
                    and int(fields[1].rsplit(":", 1)[1], 16) == port:
                return fields[9]
    return None


def _argv(pid: str) -> list[str] | None:
    try:
        raw = (_PROC / pid / "cmdline").read_bytes()
    except OSError:
        return None
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def _safe_list(path: Path) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []
