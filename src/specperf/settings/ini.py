"""The project's ini keys read outside pytest, where pytest would read them: a command that is
no pytest session (``specperf explain``, ``specperf trend``) resolves its settings from the same
``[tool.pytest.ini_options]`` (or pytest.ini, tox.ini, setup.cfg) as the perf run beside it.

The first directory from the working directory up holding one of pytest's ini files, in
pytest's order, is the project's; its ``specperf_*`` keys are returned by option name.
"""

from __future__ import annotations

import configparser
import sys
from pathlib import Path

from ..core.errors import ConfigError
from .options import OPTIONS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the package supports 3.10 through tomli
    import tomli as tomllib

Ini = dict[str, str]
# pytest's order within one directory, and the section holding its keys in each.
_FILES = (("pytest.ini", "pytest"), (".pytest.ini", "pytest"), ("pyproject.toml", ""),
          ("tox.ini", "pytest"), ("setup.cfg", "tool:pytest"))


def project_ini(start: Path | None = None) -> Ini:
    """The ``specperf_*`` keys of the project holding ``start`` (default: the working
    directory), by option name; none when no ini file is found."""
    here = (start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        for name, section in _FILES:
            found = _read(directory / name, section)
            if found is not None:
                return found
    return {}


def _read(path: Path, section: str) -> Ini | None:
    """The keys of ``path``'s pytest section; None when the file is no pytest ini."""
    if not path.is_file():
        return None
    try:
        keys = _toml(path) if path.suffix == ".toml" else _cfg(path, section)
    except (OSError, ValueError, configparser.Error) as exc:
        raise ConfigError(f"{path} cannot be read ({exc}): fix it, or run from another "
                          "directory.") from None
    if keys is None:
        return None
    return {o.name: _text(keys[o.ini]) for o in OPTIONS if o.ini in keys}


def _toml(path: Path) -> dict[str, object] | None:
    tool = tomllib.loads(path.read_text(encoding="utf-8")).get("tool") or {}
    found = (tool.get("pytest") or {}).get("ini_options")
    return dict(found) if isinstance(found, dict) else None


def _cfg(path: Path, section: str) -> dict[str, object] | None:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(path, encoding="utf-8")
    if not parser.has_section(section):  # pytest.ini counts even without its section
        return {} if path.name in ("pytest.ini", ".pytest.ini") else None
    return dict(parser.items(section))


def _text(value: object) -> str:
    if isinstance(value, list):
        return "\n".join(str(v) for v in value)
    return str(value)
