"""How a flag was spelled: an old name's deprecation notice, and a did-you-mean for a typo.

pytest answers an unknown flag with a bare ``unrecognized arguments``; an old unprefixed
name (``--endpoint``) still works but goes in a later release. Both are said here in one
sentence each, naming the prefixed flag to type (the plugin prints them).
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping, Sequence

from .options import OPTIONS

# How close a typed flag must be to one of ours to be offered as "did you mean" (difflib's
# ratio: --specperf-endpiont against --specperf-endpoint is 0.95; --specperf-xyz against
# any is below 0.8).
_CLOSE = 0.8


def renamed_notice(sources: Mapping[str, str]) -> str | None:
    """'specperf: --endpoint is an old name: type --specperf-endpoint …' for every option
    the command line gave by its old unprefixed name (``Settings.sources``); None if none."""
    old = [(source, opt.flag) for opt in OPTIONS
           if opt.alias is not None and (source := sources.get(opt.name)) == opt.alias]
    if not old:
        return None
    typed = " and ".join(s for s, _ in old) if len(old) < 3 else ", ".join(s for s, _ in old)
    new = ", ".join(flag for _, flag in old)
    noun = "is an old name" if len(old) == 1 else "are old names"
    return (f"specperf: {typed} {noun}, kept for this release only: type {new} instead "
            f"(docs/options.md).")


def unknown_flag(args: Sequence[str], known: Collection[str]) -> str | None:
    """The sentence for the first ``--flag`` in ``args`` nobody registered that is close to
    one of specperf's (a typo such as ``--specperf-endpiont``); None when there is none.
    Words after a bare ``--`` are arguments, not flags."""
    ours = sorted({opt.flag for opt in OPTIONS} | {opt.alias for opt in OPTIONS if opt.alias})
    for arg in args:
        if arg == "--":
            break
        flag = arg.partition("=")[0]
        if not flag.startswith("--") or flag in known:
            continue
        close = difflib.get_close_matches(flag, ours, n=1, cutoff=_CLOSE)
        if not close and not flag.startswith("--specperf-"):
            continue
        if not close:
            return (f"unrecognized argument {flag}: specperf has no such flag; "
                    "`pytest --help` lists them under 'specperf'.")
        prefixed = next(o.flag for o in OPTIONS if close[0] in (o.flag, o.alias))
        return f"unrecognized argument {flag}: did you mean {prefixed}?"
    return None
