"""The ``specperf`` command: subcommands that work outside a pytest run.

``specperf report RESULTS`` re-renders the HTML of a run, ``specperf trend`` renders the
nightly history, ``specperf gate`` runs the deploy gate, ``specperf import`` and ``specperf
export`` load and export the results store (docs/store.md), ``specperf bisect`` finds the deploy
that made a deployment slower (``bisect/``), ``specperf baselines`` lists a deployment's
baseline versions and why each was written. Each subcommand lives in its own module and
registers here; exit codes are the gate's (0 pass, 1 regression, 2 usage, 3 infrastructure;
bisect adds 5 and 6, bisect/command.py); Ctrl-C is one line saying what it left, exit 130.

The use-case layer: a command orchestrates the rooms it needs (explain: the server, the
baseline, the judge, ``explainrun.py``), and the views only render what it hands them.

May import: core, store, settings, servers, measure, judge, record, views, bisect
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Callable, Sequence

Command = Callable[[argparse.Namespace], int]
INTERRUPTED = 130  # as a shell reports a process ended by SIGINT (128 + 2)
# What Ctrl-C leaves behind, per command that has no handler of its own (bisect and the
# gate do: bisect says what the box runs; the gate waits for pytest to close its session).
AFTER_CTRL_C = {
    "import": "the runs imported so far stay (one transaction each); run it again to import "
              "the rest, each run id once",
    "export": "the files written so far stay; run it again to write every file",
    "trend": "the page may be missing or old; run it again",
    "report": "the page may be missing or old; run it again",
    "explain": "nothing was judged; run it again",
}


def _parser() -> argparse.ArgumentParser:
    # Imported here, not at module level: report pulls in matplotlib, which `specperf gate`
    # does not need before it has parsed its arguments.
    from ..bisect import command as bisect
    from . import baselines, explain, gate, report, store, trend

    # Plain text in --help: the docstring's RST literals (``x``) read as x.
    summary = __doc__.split("\n\n")[0].replace("``", "")
    parser = argparse.ArgumentParser(prog="specperf", description=summary)
    sub = parser.add_subparsers(dest="command", required=True)
    for module in (report, trend, gate, explain, bisect, store, baselines):
        module.add_subcommand(sub)
    parser.set_defaults(subcommands=sub.choices)
    return parser


def _unrecognized(unknown: Sequence[str], parser: argparse.ArgumentParser) -> str:
    """argparse's sentence, with a "did you mean" for a flag close to one of the command's."""
    # argparse lists a parser's flags only privately (``_actions``, stable since Python 3.2).
    known = [flag for action in parser._actions for flag in action.option_strings]
    said = f"unrecognized arguments: {' '.join(unknown)}"
    for arg in unknown:
        close = difflib.get_close_matches(arg.partition("=")[0], known, n=1, cutoff=0.8)
        if arg.startswith("--") and close:
            return f"{said} (did you mean {close[0]}?)"
    return said


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``specperf`` console script."""
    parser = _parser()
    try:
        args, unknown = parser.parse_known_args(argv)
        if unknown:
            # `specperf gate --bogus` answers with the gate's usage, not the top level's.
            sub = args.subcommands[args.command]
            sub.error(_unrecognized(unknown, sub))
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    run: Command = args.run
    try:
        return run(args)
    except KeyboardInterrupt:
        after = AFTER_CTRL_C.get(args.command, "run it again")
        print(f"specperf {args.command}: interrupted (Ctrl-C): {after}.", file=sys.stderr)
        return INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
