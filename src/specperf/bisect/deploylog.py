"""The deploy log bisect walks: the versions that landed on the box, oldest first.

One version a line (its name), or JSON lines with a ``"name"`` and free fields (an image tag,
a draft model path, the fingerprint the server should report once it runs the version,
a simulator's knobs). Blank lines and ``#`` comments are skipped. Names are unique.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError


@dataclass(frozen=True)
class Version:
    """One deploy of the log: its position (0 = oldest), its name and its free fields."""

    index: int
    name: str
    fields: Mapping[str, Any] = field(default_factory=dict)

    @property
    def expected_fingerprint(self) -> Mapping[str, Any]:
        """Fingerprint keys the server must report once this version runs ({} when unsaid)."""
        found = self.fields.get("fingerprint")
        return found if isinstance(found, dict) else {}


def parse_versions(text: str, source: str) -> list[Version]:
    """The versions of a deploy log's text; ConfigError naming the line otherwise."""
    versions: list[Version] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, fields = _line(line, f"{source} line {number}")
        if name in seen:
            raise ConfigError(f"{source} line {number}: version {name!r} is already on line "
                              f"{seen[name]}: each deploy of the log needs its own name.")
        seen[name] = number
        versions.append(Version(len(versions), name, fields))
    if len(versions) < 2:
        raise ConfigError(f"{source} holds {len(versions)} version(s): a bisect needs at least "
                          "a good and a bad one, oldest first, one a line.")
    return versions


def _line(line: str, where: str) -> tuple[str, dict[str, Any]]:
    if not line.startswith("{"):
        return line, {}
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where}: not a JSON object ({exc.msg}): write one version name "
                          "a line, or one JSON object with a \"name\" a line.") from None
    name = data.get("name") if isinstance(data, dict) else None
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{where}: a JSON line needs a non-empty string \"name\".")
    return name.strip(), {k: v for k, v in data.items() if k != "name"}


def load_versions(path: Path) -> list[Version]:
    """The deploy log in ``path`` (ConfigError when unreadable or malformed)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"--versions {path}: cannot read it ({exc.strerror or exc}).") from None
    return parse_versions(text, f"--versions {path}")


def pick(versions: Sequence[Version], name: str | None, default: int, flag: str) -> Version:
    """The version named ``name`` (``--good``/``--bad``), else the list's ``default`` end."""
    if name is None:
        return versions[default]
    for version in versions:
        if version.name == name:
            return version
    names = ", ".join(v.name for v in versions[:8]) + (" …" if len(versions) > 8 else "")
    raise ConfigError(f"{flag} {name!r} is not in the versions file ({names}).")


def check_ends(good: Version, bad: Version) -> None:
    """The good end must come before the bad end in the log."""
    if good.index >= bad.index:
        raise ConfigError(f"--good {good.name!r} (line position {good.index + 1}) must come "
                          f"before --bad {bad.name!r} (position {bad.index + 1}): the versions "
                          "file is oldest first.")


def fingerprint_matches(expected: Mapping[str, Any], actual: Mapping[str, Any]) -> list[str]:
    """The expected fingerprint keys the server reports otherwise, as ``key: want ≠ got``."""
    return [f"{key}: {want!r} ≠ {actual.get(key)!r}" for key, want in sorted(expected.items())
            if str(actual.get(key)) != str(want)]
