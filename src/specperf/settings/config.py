"""Settings: every option resolved once, CLI > SPECPERF_* env > ini > default.

The :class:`Settings` dataclass has one field per option of the table (``options.py``),
its default parsed from there, so a default is written once. :func:`resolve` turns raw
strings into a frozen :class:`Settings`; a bad value raises :class:`ConfigError` naming
where it came from and the accepted form.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

from ..core.errors import ConfigError
from .options import OPTIONS, OPTIONS_BY_NAME, AcceptanceMode, AcceptanceSource, Api, Option


def _default(name: str) -> Any:
    """The dataclass field of setting ``name``, its default parsed from OPTIONS (the one place
    a default is written; tests/test_config.py checks each against the field's type)."""
    opt = OPTIONS_BY_NAME[name]
    value = None if opt.default is None else opt.parse(opt.default)
    if isinstance(value, dict):  # mutable: every Settings its own copy, left out of the hash
        return field(default_factory=lambda: dict(value), hash=False)
    return field(default=value)


@dataclass(frozen=True)
class Settings:
    """The resolved settings of one session, with where each value came from.

    One field per option of OPTIONS, of the type its parser returns; defaults from there.
    """

    endpoint: str | None = _default("endpoint")
    endpoints: Path | None = _default("endpoints")
    compare_endpoint: str | None = _default("compare_endpoint")
    api: Api = _default("api")
    model: str | None = _default("model")
    api_key_env: str | None = _default("api_key_env")
    contexts: tuple[int, ...] = _default("contexts")
    text_classes: tuple[str, ...] = _default("text_classes")
    text_class_dir: Path | None = _default("text_class_dir")
    output_tokens: int = _default("output_tokens")
    case_output_tokens: Mapping[str, int] = _default("case_output_tokens")
    path_output_tokens: int | None = _default("path_output_tokens")
    repeats: int = _default("repeats")
    case_repeats: Mapping[str, int] = _default("case_repeats")
    max_repeats: int = _default("max_repeats")
    max_spread: float = _default("max_spread")
    warmup: int = _default("warmup")
    warmup_output_tokens: int | None = _default("warmup_output_tokens")
    acceptance_source: AcceptanceSource = _default("acceptance_source")
    log_command: str | None = _default("log_command")
    request_timeout: float = _default("request_timeout")
    sim_profile: str = _default("sim_profile")
    sim_time_scale: float = _default("sim_time_scale")
    baseline_dir: Path = _default("baseline_dir")
    deployment: str | None = _default("deployment")
    baseline_version: int | Literal["latest"] = _default("baseline_version")
    update_baselines: bool = _default("update_baselines")
    require_baseline: bool = _default("require_baseline")
    baseline_repeats: int = _default("baseline_repeats")
    accept: str | None = _default("accept")
    baseline_runs: int = _default("baseline_runs")
    fingerprint: Mapping[str, str] = _default("fingerprint")
    tolerances: Mapping[str, float] = _default("tolerances")
    sweep_tolerance: float = _default("sweep_tolerance")
    sweep_effect: float = _default("sweep_effect")
    acceptance_mode: AcceptanceMode = _default("acceptance_mode")
    concurrency_levels: tuple[int, ...] = _default("concurrency_levels")
    concurrency_class: str = _default("concurrency_class")
    concurrency_context: int | None = _default("concurrency_context")
    report_dir: Path = _default("report_dir")
    results_db: str | None = _default("results_db")
    prometheus_textfile: Path | None = _default("prometheus_textfile")
    pushgateway: str | None = _default("pushgateway")
    gpu_lock: Path | None = _default("gpu_lock")
    gpu_lock_timeout: float = _default("gpu_lock_timeout")
    run_noise: float = _default("run_noise")
    night_window: float = _default("night_window")
    same_night: bool = _default("same_night")
    detail: bool = _default("detail")
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)

    @property
    def baseline_version_number(self) -> int | None:
        """The baseline version to compare with, None for the latest (parsed at startup)."""
        version = self.baseline_version
        return version if isinstance(version, int) else None

    @property
    def simulated(self) -> bool:
        return self.endpoint is None

    def api_key(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The API key, read from the named environment variable only."""
        if not self.api_key_env:
            return None
        env = os.environ if environ is None else environ
        return env.get(self.api_key_env) or None

    def public_dict(self) -> dict[str, Any]:
        """Settings safe to print or store: never holds the key itself."""
        return {f.name: _jsonable(getattr(self, f.name)) for f in fields(self)
                if f.name != "sources"}


def _jsonable(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Mapping):
        return dict(value)
    return value


def resolve(cli: Mapping[str, Any], environ: Mapping[str, str],
            ini: Mapping[str, str | Sequence[str]],
            spelled: Mapping[str, str] | None = None) -> Settings:
    """Resolve every option: CLI > env > ini > default; errors name the source.

    One source gives an option its whole value (``tolerances`` too: no per-metric merge).
    Pure in its inputs: the environment is only what ``environ`` holds (the plugin passes
    ``os.environ``; tests pass a dict). ``spelled`` names the flag a CLI value was given
    with when it was not the prefixed name (an old alias such as ``--contexts``), so an
    error names what the user typed.
    """
    values, sources = _resolved(OPTIONS, cli, environ, ini, spelled or {})
    settings = Settings(**values, sources=sources)
    _check(settings, environ)
    return settings


def resolve_only(names: Sequence[str], cli: Mapping[str, Any], environ: Mapping[str, str],
                 ini: Mapping[str, str | Sequence[str]],
                 spelled: Mapping[str, str] | None = None) -> Settings:
    """Options ``names`` resolved as :func:`resolve` does (CLI > env > ini > default, errors
    naming the source), every other at its default: for a command outside pytest that reads
    a few settings the perf run reads too (the noise prior and the night window)."""
    values, sources = _resolved([OPTIONS_BY_NAME[n] for n in names], cli, environ, ini,
                                spelled or {})
    return Settings(**values, sources=sources)


def _resolved(options: Sequence[Option], cli: Mapping[str, Any], environ: Mapping[str, str],
              ini: Mapping[str, str | Sequence[str]], spelled: Mapping[str, str]
              ) -> tuple[dict[str, Any], dict[str, str]]:
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for opt in options:
        raw, source = _pick(opt, cli, environ, ini, spelled)
        sources[opt.name] = source
        if raw is None:
            continue
        if not isinstance(raw, str):
            values[opt.name] = raw
            continue
        try:
            values[opt.name] = opt.parse(raw)
        except ConfigError as exc:  # the parser said which item is wrong and how
            raise ConfigError(f"{source}: {exc}") from None
        except (ValueError, TypeError):
            raise ConfigError(
                f"{source} = {raw!r} is not valid: expected {opt.form}.") from None
    return values, sources


def _pick(opt: Option, cli: Mapping[str, Any], environ: Mapping[str, str],
          ini: Mapping[str, str | Sequence[str]], spelled: Mapping[str, str]) -> tuple[Any, str]:
    if cli.get(opt.name) is not None:
        return cli[opt.name], spelled.get(opt.name, opt.flag)
    if environ.get(opt.env):
        return environ[opt.env], opt.env
    if ini.get(opt.name):
        return _ini_text(ini[opt.name]), f"ini {opt.ini}"
    return opt.default, "default"


def _ini_text(raw: str | Sequence[str]) -> str:
    """An ini value as the text its parser reads: a line list (pytest's getini gives a list)
    one item per line."""
    return raw if isinstance(raw, str) else "\n".join(raw)


def for_baseline(s: Settings) -> Settings:
    """The settings of a baseline-writing run: at least ``baseline_repeats`` per case."""
    if not s.update_baselines:
        return s
    repeats = max(s.repeats, s.baseline_repeats)
    return replace(s, repeats=repeats, max_repeats=max(s.max_repeats, repeats))


def _named(s: Settings, name: str) -> str:
    """Where a value came from, to name it in an error: its flag (as typed), variable or ini
    key, or the prefixed flag when it is the default."""
    source = s.sources.get(name, "default")
    return OPTIONS_BY_NAME[name].flag if source == "default" else source


def _check(s: Settings, environ: Mapping[str, str]) -> None:
    if s.max_repeats < s.repeats:
        raise ConfigError(
            f"{_named(s, 'max_repeats')} = {s.max_repeats} is below "
            f"{_named(s, 'repeats')} = {s.repeats}: expected max repeats >= repeats.")
    if s.sweep_effect <= s.sweep_tolerance:
        raise ConfigError(
            f"{_named(s, 'sweep_effect')} = {s.sweep_effect:g} is not above "
            f"{_named(s, 'sweep_tolerance')} = {s.sweep_tolerance:g}: "
            "expected the change to catch above the change to let pass.")
    if s.log_command is not None and "{since}" not in s.log_command:
        raise ConfigError(
            f"{s.sources.get('log_command')} = {s.log_command!r} has no {{since}} "
            "placeholder: expected a command line containing {since}.")
    if s.compare_endpoint is not None and s.endpoint is None:
        raise ConfigError(
            f"{s.sources.get('compare_endpoint')} = {s.compare_endpoint} needs a candidate: "
            "set --specperf-endpoint to the candidate's URL as well.")
    if s.compare_endpoint is not None and s.update_baselines:
        raise ConfigError("--specperf-update-baselines cannot be combined with "
                          "--specperf-compare-endpoint: an "
                          "A/B run compares two live endpoints and writes no baseline.")
    if s.api_key_env and s.api_key_env not in environ:
        raise ConfigError(
            f"{s.sources.get('api_key_env')} names {s.api_key_env}, which is not set in the "
            f"environment: export {s.api_key_env} with the key, or drop --specperf-api-key-env.")
