"""The ends of a bisect read from the run history (``--from-history``).

The good end is the version whose fingerprint the last passing night reported, the bad end
the one of the first failing night after it; only runs of the bisected endpoint count (the
history line's label, as the probe names the server: its URL, or ``SIMULATED (URL)`` for a
simulator). A version matches a night's fingerprint when every field its line's
``"fingerprint"`` declares that the night's fingerprint also has is equal (the comparison the
deploy waits on, ``deploylog.fingerprint_matches``). Anything short of one version per end is
a usage error saying what was found and to pass ``--good``/``--bad`` instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import ConfigError
from .deploylog import Version, fingerprint_matches

INSTEAD = "pass --good V --bad V instead"


@dataclass(frozen=True)
class Night:
    """One run of the history: its id, when it was written, what the server reported."""

    run_id: str
    created: str
    fingerprint: Mapping[str, Any] = field(default_factory=dict)
    failed: tuple[str, ...] = ()

    @classmethod
    def of(cls, entry: Mapping[str, Any]) -> Night:
        fingerprint = entry.get("fingerprint")
        return cls(str(entry.get("run_id", "")), str(entry.get("created", "")),
                   fingerprint if isinstance(fingerprint, dict) else {},
                   tuple(str(c) for c in entry.get("failed") or ()))

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "created": self.created,
                "fingerprint": dict(self.fingerprint), "failed": list(self.failed)}


@dataclass(frozen=True)
class HistoryEnds:
    """The two nights chosen and the versions they ran."""

    good: Version
    bad: Version
    passing: Night
    failing: Night
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {"history": self.source,
                "good": {"version": self.good.name, **self.passing.to_dict()},
                "bad": {"version": self.bad.name, **self.failing.to_dict()}}


def labels(endpoint: str) -> tuple[str, str]:
    """The history labels of ``endpoint``'s runs (servers/probe.py ``ServerInfo.label``)."""
    url = endpoint.strip().rstrip("/")
    return url, f"SIMULATED ({url})"


def passing(entry: Mapping[str, Any]) -> bool:
    """A complete full run that found no regression."""
    return (str(entry.get("kind") or "full") == "full" and not entry.get("interrupted")
            and not entry.get("outage") and not entry.get("stopped_by")
            and not entry.get("failed"))


def nights(entries: Sequence[Mapping[str, Any]], endpoint: str, source: str
           ) -> tuple[Night, Night]:
    """The last passing run of ``endpoint`` followed by a failing one, and that failing run."""
    mine = [e for e in entries if str(e.get("label", "")) in labels(endpoint)]
    if not mine:
        found = sorted({str(e.get("label", "")) for e in entries})
        seen = f" (it holds runs of {', '.join(found[:4])})" if found else ""
        raise ConfigError(f"--from-history {source} holds {len(entries)} runs but none of "
                          f"{labels(endpoint)[0]}{seen}: {INSTEAD}.")
    pair: tuple[Mapping[str, Any], Mapping[str, Any]] | None = None
    last_pass: Mapping[str, Any] | None = None
    for entry in mine:
        if passing(entry):
            last_pass = entry
        elif entry.get("failed") and last_pass is not None:
            pair, last_pass = (last_pass, entry), None  # the first failure after that pass
    if pair is None:
        passed = sum(1 for e in mine if passing(e))
        failed = sum(1 for e in mine if e.get("failed"))
        raise ConfigError(f"--from-history {source}: the {len(mine)} runs of "
                          f"{labels(endpoint)[0]} ({passed} passing, {failed} failing) hold no "
                          f"passing full run followed by a failing one: {INSTEAD}.")
    return Night.of(pair[0]), Night.of(pair[1])


def matching(versions: Sequence[Version], fingerprint: Mapping[str, Any]) -> list[Version]:
    """The versions whose declared fingerprint fields the night's fingerprint holds."""
    return [v for v in versions if not fingerprint_matches(
        {k: want for k, want in v.expected_fingerprint.items() if k in fingerprint},
        fingerprint)]


def version_of(versions: Sequence[Version], night: Night, role: str, source: str) -> Version:
    """The one version ``night`` ran; ConfigError when none or several match."""
    found = matching(versions, night.fingerprint)
    if len(found) == 1:
        return found[0]
    declared = sorted({k for v in versions for k in v.expected_fingerprint
                       if k in night.fingerprint})
    said = ", ".join(f"{k}={night.fingerprint[k]!r}" for k in declared) or \
        "no field any version's \"fingerprint\" declares"
    what = (f"matches {len(found)} versions ({', '.join(v.name for v in found[:6])}"
            f"{' …' if len(found) > 6 else ''})" if found else "matches no version")
    raise ConfigError(f"--from-history {source}: the {role} run {night.run_id} "
                      f"({night.created}) reported {said} and {what} of the versions file: "
                      f"{INSTEAD}.")


def ends_from_history(entries: Sequence[Mapping[str, Any]], endpoint: str,
                      versions: Sequence[Version], source: str) -> HistoryEnds:
    """The good and bad versions of the last pass → fail of ``endpoint`` in ``entries``."""
    good_night, bad_night = nights(entries, endpoint, source)
    good = version_of(versions, good_night, "last passing", source)
    bad = version_of(versions, bad_night, "first failing", source)
    if good.index >= bad.index:
        raise ConfigError(f"--from-history {source}: the last passing run "
                          f"{good_night.run_id} ran {good.name} and the first failing run "
                          f"{bad_night.run_id} ran {bad.name}, which is not a later version "
                          f"of the versions file: {INSTEAD}.")
    return HistoryEnds(good, bad, good_night, bad_night, source)
