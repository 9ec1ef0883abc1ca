"""A fleet: several endpoints measured in one run, each with its own name, deployment and lock.

Pytest-free values: an :class:`Endpoint` per box, read from an endpoints file (TOML, one
``[[endpoint]]`` table per box) or from ``--endpoint NAME=URL`` given more than once, and the
per-endpoint :class:`~specperf.settings.config.Settings` a run measures it with. The plugin
wires it:
each endpoint's cases are one pytest-xdist group (``--dist loadgroup``), so endpoints are
measured in parallel, each one serially, and the worker measuring an endpoint holds that
endpoint's GPU lock for as long as it measures (see ``specperf/fleet/plugin.py``).

The endpoints file::

    [[endpoint]]
    name = "prod"                      # letters, digits, '_' and '.'; part of every test id
    url = "http://10.0.0.1:30000"
    deployment = "kimi-k26-prod"       # the baselines it is judged against (default: name)
    key_env = "PROD_API_KEY"           # optional: the variable holding its API key
    lock = "/shared/locks/prod.lock"   # optional: its GPU lock file (default: from the URL)
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError
from .config import Settings
from .hints import perf_command
from .options import OPTIONS_BY_NAME
from .parsers import http_url

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the package supports 3.10 through tomli
    import tomli as tomllib

_NAME = re.compile(r"^[A-Za-z0-9_.]+$")
_KEYS = ("name", "url", "deployment", "key_env", "lock")
NAME_FORM = "letters, digits, '_' and '.' only"


@dataclass(frozen=True)
class Endpoint:
    """One box of a fleet: how tests name it, where it is, what it is judged against."""

    name: str
    url: str
    deployment: str
    key_env: str | None = None
    lock: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "url": self.url, "deployment": self.deployment,
                "key_env": self.key_env, "lock": None if self.lock is None else str(self.lock)}


def split_endpoint_flags(values: Sequence[str] | None) -> tuple[str | None, list[str]]:
    """``--endpoint`` given once as a URL keeps its meaning; more, or NAME=URL, is a fleet."""
    flags = list(values or [])
    if len(flags) == 1 and "=" not in flags[0]:
        return flags[0], []
    return None, flags


def fleet_endpoints(settings: Settings, flags: Sequence[str]) -> tuple[Endpoint, ...]:
    """The fleet this run measures; empty when it measures one endpoint."""
    if settings.endpoints is not None and flags:
        raise ConfigError("a fleet is given either by --endpoints FILE or by --endpoint "
                          "NAME=URL more than once, not both: put every endpoint in the file.")
    if settings.endpoints is not None:
        return load_endpoints(settings.endpoints)
    return from_flags(flags) if flags else ()


def load_endpoints(path: Path, environ: Mapping[str, str] | None = None) -> tuple[Endpoint, ...]:
    """The endpoints of a TOML file; a ConfigError names the file, the entry and the fix."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"endpoints file {path} cannot be read ({exc.strerror or exc}): "
                          "check the path given to --endpoints.") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"endpoints file {path} is not valid TOML ({exc}): fix the syntax "
                          "(one [[endpoint]] table per box).") from None
    entries = data.get("endpoint")
    extra = sorted(set(data) - {"endpoint"})
    if extra:
        raise ConfigError(f"endpoints file {path} has unknown top-level key(s) "
                          f"{', '.join(extra)}: expected only [[endpoint]] tables.")
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"endpoints file {path} has no [[endpoint]] table: add one per box "
                          "with at least name and url.")
    env = os.environ if environ is None else environ
    found = tuple(_entry(path, i, e, env) for i, e in enumerate(entries, 1))
    return _unique(found, f"endpoints file {path}")


def _entry(path: Path, index: int, entry: Any, env: Mapping[str, str]) -> Endpoint:
    where = f"endpoints file {path}, endpoint #{index}"
    if not isinstance(entry, dict):
        raise ConfigError(f"{where} is not a table: write it as [[endpoint]] with name and url.")
    unknown = sorted(set(entry) - set(_KEYS))
    if unknown:
        raise ConfigError(f"{where} has unknown key(s) {', '.join(unknown)}: expected "
                          f"{', '.join(_KEYS)}.")
    name = entry.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(f"{where} has name {name!r}: expected a name of {NAME_FORM}, "
                          "e.g. name = \"box2\".")
    where = f"endpoints file {path}, endpoint {name!r}"
    url = _checked_url(where, entry.get("url"))
    values = {k: entry.get(k) for k in ("deployment", "key_env", "lock")}
    for key, value in values.items():
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ConfigError(f"{where} has {key} = {value!r}: expected a non-empty string.")
    key_env = values["key_env"]
    if key_env is not None and key_env not in env:
        raise ConfigError(f"{where} names key_env {key_env}, which is not set in the "
                          f"environment: export {key_env} with the key, or drop key_env.")
    lock = values["lock"]
    return Endpoint(name, url, values["deployment"] or name, key_env,
                    None if lock is None else Path(lock).expanduser())


def _checked_url(where: str, url: Any) -> str:
    try:
        return http_url(url) if isinstance(url, str) else http_url("")
    except ValueError:
        raise ConfigError(f"{where} has url {url!r}: expected an http(s) URL such as "
                          "http://127.0.0.1:30000.") from None


def from_flags(values: Sequence[str]) -> tuple[Endpoint, ...]:
    """``--endpoint NAME=URL`` given more than once; a bare URL is named by host and port."""
    found = []
    for raw in values:
        name, sep, url = raw.partition("=")
        if not sep:
            name, url = "", raw
        where = f"--endpoint {raw}"
        checked = _checked_url(where, url)
        if not sep:
            name = re.sub(r"[^A-Za-z0-9_.]", "_", checked.split("://", 1)[1])
        elif not _NAME.match(name):
            raise ConfigError(f"{where}: the name {name!r} is not valid: expected NAME=URL "
                              f"with a name of {NAME_FORM}, e.g. --specperf-endpoint box2=http://h:30000.")
        found.append(Endpoint(name, checked, name))
    return _unique(tuple(found), "--endpoint")


def _unique(found: tuple[Endpoint, ...], where: str) -> tuple[Endpoint, ...]:
    for attr in ("name", "url"):
        seen: set[str] = set()
        for ep in found:
            value = getattr(ep, attr)
            if value in seen:
                raise ConfigError(f"{where} names {attr} {value!r} twice: each box of a fleet "
                                  f"needs its own {attr}.")
            seen.add(value)
    return found


def check_combination(settings: Settings) -> None:
    """Options that name one endpoint cannot apply to a fleet: say which and what instead."""
    clashes = [("deployment", "give each endpoint its deployment in the endpoints file"),
               ("gpu_lock", "give each endpoint its lock in the endpoints file"),
               ("compare_endpoint", "run the A/B comparison as its own run")]
    for name, instead in clashes:
        if getattr(settings, name) is not None:
            flag = settings.sources.get(name, OPTIONS_BY_NAME[name].flag)
            raise ConfigError(f"{flag} names one endpoint and cannot apply to a fleet: "
                              f"{instead}.")
    if settings.update_baselines:
        flag = settings.sources.get("update_baselines", OPTIONS_BY_NAME["update_baselines"].flag)
        raise ConfigError(f"{flag} writes one deployment's "
                          "baseline and cannot run over a fleet: write each endpoint's baseline "
                          "with its own run, e.g. `"
                          + perf_command("-m", "context_scaling", "--specperf-endpoint", "URL",
                                         "--specperf-deployment", "NAME",
                                         "--specperf-update-baselines") + "`.")


def endpoint_settings(base: Settings, endpoint: Endpoint, source: str) -> Settings:
    """The settings one endpoint of the fleet is measured with."""
    sources = {**base.sources, "endpoint": source}
    return replace(base, endpoint=endpoint.url, deployment=endpoint.deployment,
                   api_key_env=endpoint.key_env or base.api_key_env, gpu_lock=endpoint.lock,
                   sources=sources)
