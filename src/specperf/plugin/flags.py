"""How specperf's options appear on pytest's command line: argparse actions, help, aliases.

The option table itself is ``settings/options.py``; this module only says how argparse reads
each option (the same for its prefixed flag and its old alias), the ``--help`` text of each,
and which flags other plugins have already taken. The hooks in ``plugin/__init__.py`` register
them.
"""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from ..settings.options import Option

GROUP = "specperf"


class _ValueRequired(argparse.Action):
    """An option whose value may start with '-' (``--specperf-contexts -5,13``): argparse
    takes such a word for an option and leaves the flag without a value; say how to write it
    instead of argparse's bare 'expected one argument'."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        if values is None:
            flag = option_string or self.dest
            raise argparse.ArgumentError(self, (
                f"expected one value. A value that starts with '-' reads as an option: attach "
                f"it with '=', e.g. {flag}=-5,13 (not {flag} -5,13)"))
        setattr(namespace, self.dest, values)
        _note_spelling(namespace, self.dest, option_string)


# The flags given by an old unprefixed name, by setting: an error names what was typed.
SPELLED = "specperf_spelled"


def _note_spelling(namespace: argparse.Namespace, dest: str, option_string: str | None) -> None:
    if option_string is not None and not option_string.startswith("--specperf-"):
        spelled = dict(getattr(namespace, SPELLED, None) or {})
        spelled[dest.removeprefix("specperf_")] = option_string
        setattr(namespace, SPELLED, spelled)


class _Store(argparse.Action):
    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, values)
        _note_spelling(namespace, self.dest, option_string)


class _Flag(argparse.Action):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["nargs"] = 0
        super().__init__(*args, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, True)
        _note_spelling(namespace, self.dest, option_string)


class _Append(argparse.Action):
    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, [*(getattr(namespace, self.dest, None) or []), values])
        _note_spelling(namespace, self.dest, option_string)


def option_kwargs(opt: Option) -> dict[str, Any]:
    """How argparse reads one option (the same for its prefixed name and its alias)."""
    dest = f"specperf_{opt.name}"
    if opt.flag_only:
        return {"action": _Flag, "default": None, "dest": dest}
    kwargs: dict[str, Any] = {"default": None, "dest": dest, "metavar": opt.name.upper(),
                              "action": _Store}
    if opt.name == "endpoint":  # given more than once (NAME=URL): a fleet (specperf.fleet)
        kwargs["action"] = _Append
    elif opt.name == "contexts":  # "-5,13" looks like an option to argparse
        kwargs.update(nargs="?", action=_ValueRequired)
    return kwargs


def help_text(opt: Option) -> str:
    default = f" Default: {opt.default}." if opt.default and not opt.flag_only else ""
    text = opt.help
    if opt.name == "endpoint":
        text += " Given more than once as NAME=URL: a fleet (see --specperf-endpoints)."
    also = f"; old name {opt.alias}" if opt.alias else ""
    # argparse expands %-formats in help ("3 %" would end --help with a TypeError).
    return f"{text}{default} [env {opt.env}, ini {opt.ini}{also}]".replace("%", "%%")


def registered_flags(parser: pytest.Parser) -> set[str]:
    """Every flag registered with pytest so far. pytest lists its options only privately
    (``Parser._anonymous`` and ``Parser._groups``, stable since pytest 3)."""
    groups = [getattr(parser, "_anonymous", None), *getattr(parser, "_groups", [])]
    return {name for group in groups if group is not None
            for option in group.options for name in option.names()}
