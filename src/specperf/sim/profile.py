"""Simulator profiles: TOML data files that fix a simulated deployment.

A profile has four tables. ``[model]`` and ``[server]`` are what ``/model_info`` and
``/server_info`` report (flattened SGLang server args). ``[physics]`` holds every number the
scheduler uses (step time ``a + b * sum(context) + c * (running - 1)``, prefill cost, noise,
acceptance knots). ``[switches]`` emulates server variants (spec field spelling, timing
fields, /metrics, /tokenize, log format). Profiles ship in ``specperf/sim/profiles``; a path
to any other TOML file works too.

Release profiles add ``kind`` ("sglang" or "vllm"), ``release`` and a ``[flags]`` table (the
startup flags, see release.py); the switches then follow from them, and an explicit
``[switches]`` entry still wins. ``inherit = "other-profile"`` starts from another profile:
each top-level table the file gives replaces the inherited one, except ``[flags]``, which
is merged key by key (so a test can restart a release "without --enable-metrics").
"""

from __future__ import annotations

import bisect
import sys
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from specperf.sim.release import KINDS, Flags, Release, parse_flags, version_tuple

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the package supports 3.10 through tomli
    import tomli as tomllib

DEFAULT_PROFILE = "kimi-k26-ddtree"
SPEC_FIELD_STYLES = ("current", "aliased", "legacy", "legacy-0.5.8", "absent")
LOG_FORMATS = ("current", "legacy")
# When busy gauges are re-published on an idle server: at once when they disagree with the
# scheduler (SGLang >= 0.5.19, scheduler_components/metrics_reporter.py
# _maybe_log_idle_metrics), or only 30 s after the last publication (0.5.14).
GAUGE_IDLE_REFRESH = ("at-once", "every-30s")


class ProfileError(ValueError):
    """A profile file is missing or has a bad value."""


@dataclass(frozen=True)
class Knots:
    """A piecewise-linear function of the window fill n, flat outside the knots."""

    n: tuple[float, ...]
    value: tuple[float, ...]

    def __call__(self, x: float) -> float:
        i = bisect.bisect_right(self.n, x)
        if i == 0:
            return self.value[0]
        if i == len(self.n):
            return self.value[-1]
        x0, x1 = self.n[i - 1], self.n[i]
        y0, y1 = self.value[i - 1], self.value[i]
        return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


@dataclass(frozen=True)
class Physics:
    """Every number of the simulated hardware and drafter (see scheduler/physics docs)."""

    a_ms: float
    b_ms_per_token: float
    c_ms: float
    prefill_ms: float
    prefill_ms_per_token: float
    noise: float
    window: int
    max_commit: int
    commit_sd: float
    rep_floor: float
    m_free: Knots
    m_rep: Knots
    eos_rate: float


@dataclass(frozen=True)
class Switches:
    """Which real-server variant the simulator emulates."""

    spec_fields: str = "current"
    server_timings: bool = True
    metrics: bool = True
    tokenize: bool = True
    log_format: str = "current"
    # /metrics semantics (see sim/metrics.py): the per-iteration sglang:realtime_tokens_total
    # counter, and when the running/queued gauges are re-published on an idle server.
    realtime_tokens: bool = True
    gauge_idle_refresh: str = "at-once"


@dataclass(frozen=True)
class Profile:
    """One simulated deployment."""

    name: str
    model: dict[str, Any]
    server: dict[str, Any]
    physics: Physics
    switches: Switches
    seed: int = 0
    version: str = "0.5.23-sim"
    extra: dict[str, Any] = field(default_factory=dict)
    kind: str = "sglang"
    release: str = "0.5.23"
    flags: Flags = field(default_factory=Flags)

    @property
    def facts(self) -> Release:
        """Release- and flag-dependent shapes (release.py)."""
        return Release(self.kind, self.release, self.flags)

    @property
    def context_length(self) -> int:
        return int(self.server.get("context_length", 262144))

    @property
    def decode_log_interval(self) -> int:
        return int(self.server.get("decode_log_interval", 40))

    @property
    def served_model_name(self) -> str:
        return str(self.model.get("served_model_name", self.model.get("model_path", "sim")))

    def as_dict(self) -> dict[str, Any]:
        """All parameters, JSON-ready (for /_sim/truth)."""
        return asdict(self)


def load_profile(name_or_path: str) -> Profile:
    """Load a shipped profile by name, or any profile TOML by path."""
    path = Path(name_or_path)
    data = _load_data(name_or_path, set())
    return _build(data, fallback_name=path.stem)


def _load_data(name_or_path: str, seen: set[str]) -> dict[str, Any]:
    """The profile's TOML tables with its ``inherit`` chain resolved."""
    path = Path(name_or_path)
    if path.suffix == ".toml" or path.exists():
        if not path.is_file():
            raise ProfileError(f"profile file {path} does not exist")
        text = path.read_text(encoding="utf-8")
    else:
        text = _shipped_text(name_or_path)
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"profile {name_or_path}: invalid TOML: {exc}") from exc
    base_name = data.pop("inherit", None)
    if base_name is None:
        return data
    if base_name in seen:
        raise ProfileError(f"profile {name_or_path}: inherit loops back to {base_name}")
    base = _load_data(str(base_name), seen | {str(base_name)})
    base.pop("name", None)
    flags = {**base.get("flags", {}), **data.get("flags", {})}
    merged = {**base, **data}
    if flags:
        merged["flags"] = flags
    return merged


def shipped_profiles() -> list[str]:
    """Names of the profiles shipped with the package."""
    folder = resources.files("specperf.sim") / "profiles"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".toml"))


def _shipped_text(name: str) -> str:
    resource = resources.files("specperf.sim") / "profiles" / f"{name}.toml"
    if not resource.is_file():
        known = ", ".join(shipped_profiles())
        raise ProfileError(f"unknown profile {name!r}; shipped profiles: {known}")
    return resource.read_text(encoding="utf-8")


def _build(data: dict[str, Any], fallback_name: str) -> Profile:
    version = str(data.get("version", "0.5.23-sim"))
    kind = str(data.get("kind", "sglang"))
    release = str(data.get("release", ".".join(map(str, version_tuple(version))) or "0.5.23"))
    try:
        physics = _physics(data["physics"])
        flags = parse_flags(dict(data.get("flags", {})))
        facts = Release(kind, release, flags)
        switches = Switches(**{**_derived_switches(facts, data), **data.get("switches", {})})
    except (KeyError, TypeError, ValueError) as exc:
        raise ProfileError(f"profile {fallback_name}: bad or missing value: {exc}") from exc
    if kind not in KINDS:
        raise ProfileError(f"kind must be one of {KINDS}")
    if switches.spec_fields not in SPEC_FIELD_STYLES:
        raise ProfileError(f"spec_fields must be one of {SPEC_FIELD_STYLES}")
    if switches.log_format not in LOG_FORMATS:
        raise ProfileError(f"log_format must be one of {LOG_FORMATS}")
    if switches.gauge_idle_refresh not in GAUGE_IDLE_REFRESH:
        raise ProfileError(f"gauge_idle_refresh must be one of {GAUGE_IDLE_REFRESH}")
    return Profile(
        name=str(data.get("name", fallback_name)),
        model=dict(data.get("model", {})),
        server=dict(data.get("server", {})),
        physics=physics,
        switches=switches,
        seed=int(data.get("seed", 0)),
        version=version,
        kind=kind,
        release=release,
        flags=flags,
    )


def _derived_switches(facts: Release, data: dict[str, Any]) -> dict[str, Any]:
    """Switches a release profile implies; profiles without ``[flags]`` keep the defaults."""
    if "flags" not in data:
        return {}
    if not facts.sglang:
        return {"spec_fields": "current", "server_timings": facts.vllm_timings,
                "metrics": True, "tokenize": True}
    return {"spec_fields": facts.spec_style, "server_timings": facts.flags.enable_metrics,
            "metrics": facts.flags.enable_metrics,
            "log_format": "current" if facts.at_least("0.5.8") else "legacy"}


def _physics(raw: dict[str, Any]) -> Physics:
    values = dict(raw)
    m_free = _knots(values.pop("m_free"))
    m_rep = _knots(values.pop("m_rep"))
    values.setdefault("noise", 0.01)
    values.setdefault("window", 2048)
    values.setdefault("c_ms", 0.0)
    values.setdefault("commit_sd", 1.0)
    values.setdefault("rep_floor", 0.0)
    values.setdefault("eos_rate", 0.0)
    return Physics(m_free=m_free, m_rep=m_rep, **values)


def _knots(raw: dict[str, Any]) -> Knots:
    n = tuple(float(x) for x in raw["n"])
    value = tuple(float(x) for x in raw["mean"])
    if len(n) != len(value) or not n or list(n) != sorted(n):
        raise ValueError("knots need equal-length n and mean lists, n ascending")
    return Knots(n=n, value=value)
