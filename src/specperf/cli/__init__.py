"""The ``specperf`` command: subcommands that work outside a pytest run.

``specperf report RESULTS`` re-renders the HTML of a run, ``specperf trend`` renders the
nightly history, ``specperf gate`` runs the deploy gate, ``specperf import`` and ``specperf
export`` load and export the results store (docs/store.md), ``specperf bisect`` finds the deploy
that made a deployment slower (``bisect/``). Each subcommand lives in its own module and
registers here; exit codes are the gate's (0 pass, 1 regression, 2 usage, 3 infrastructure;
bisect adds 5 and 6, bisect/command.py).

May import: core, store, measure, record, views, bisect
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

Command = Callable[[argparse.Namespace], int]
USAGE_ERROR = 2


def _parser() -> argparse.ArgumentParser:
    # Imported here, not at module level: report pulls in matplotlib, which `specperf gate`
    # does not need before it has parsed its arguments.
    from ..bisect import command as bisect
    from ..views import report
    from . import explain, gate, store

    # Plain text in --help: the docstring's RST literals (``x``) read as x.
    summary = __doc__.split("\n\n")[0].replace("``", "")
    parser = argparse.ArgumentParser(prog="specperf", description=summary)
    sub = parser.add_subparsers(dest="command", required=True)
    for module in (report, gate, explain, bisect, store):
        module.add_subcommand(sub)
    parser.set_defaults(subcommands=sub.choices)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``specperf`` console script."""
    parser = _parser()
    try:
        args, unknown = parser.parse_known_args(argv)
        if unknown:
            # `specperf gate --bogus` answers with the gate's usage, not the top level's.
            args.subcommands[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    run: Command = args.run
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
