"""Settings: every option defined once, resolved once, CLI > SPECPERF_* env > ini > default.

Each :class:`Option` carries its help text, used for the command-line flag and
the ini key alike. :func:`resolve` turns raw strings into a frozen
:class:`Settings`; a bad value raises :class:`ConfigError` naming where it came
from and the accepted form.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal, get_args
from urllib.parse import urlsplit

from ..core.errors import ConfigError

# The closed choices, typed once: parsed here, so later code never meets an unknown value.
Api = Literal["auto", "sglang", "openai", "openai-chat", "llamacpp"]
AcceptanceSource = Literal["auto", "response", "metrics", "log", "none"]

Parser = Callable[[str], Any]


def _int_list(text: str) -> tuple[int, ...]:
    # Every item must be a number: "13,,20" is a typo, not two contexts.
    values = tuple(int(v) for v in text.replace(" ", "").split(","))
    if not values or any(v <= 0 for v in values):
        raise ValueError(text)
    return values


def _name_list(text: str) -> tuple[str, ...]:
    values = tuple(v.strip() for v in text.split(","))
    if not values or not all(values):
        raise ValueError(text)
    return values


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def _nonneg_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise ValueError(text)
    return value


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 < value <= 1:
        raise ValueError(text)
    return value


def _bool(text: str) -> bool:
    low = text.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(text)


def _url(text: str) -> str:
    parts = urlsplit(text.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(text)
    return text.strip().rstrip("/")


def _choice(*choices: str) -> Parser:
    def parse(text: str) -> str:
        if text not in choices:
            raise ValueError(text)
        return text

    return parse


def _text(text: str) -> str:
    return text


def _path(text: str) -> Path:
    return Path(text).expanduser()


@dataclass(frozen=True)
class Option:
    """One setting: its name, how to parse it, its default and its one help text."""

    name: str
    parse: Parser
    default: str | None
    help: str
    form: str
    flag_only: bool = False

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def env(self) -> str:
        return "SPECPERF_" + self.name.upper()

    @property
    def ini(self) -> str:
        return "specperf_" + self.name


OPTIONS: tuple[Option, ...] = (
    Option("endpoint", _url, None,
           "Base URL of the server to measure; unset starts the embedded simulator.",
           "an http(s) URL such as http://127.0.0.1:30000"),
    Option("endpoints", _path, None,
           "Fleet: a TOML file of endpoints ([[endpoint]] tables with name, url, and optional "
           "deployment, key_env, lock) measured in one run, in parallel under -n; "
           "--endpoint NAME=URL given more than once does the same.", "a file path"),
    Option("compare_endpoint", _url, None,
           "A/B mode: production's base URL; --endpoint is then the candidate, requests "
           "alternate between the two and the verdict is on their ratio (no baseline file).",
           "an http(s) URL such as http://127.0.0.1:30001"),
    Option("api", _choice(*get_args(Api)), "auto",
           "Route to measure: SGLang native /generate, /v1/completions, /v1/chat/completions "
           "or llama.cpp native /completion.",
           "one of auto, sglang, openai, openai-chat, llamacpp"),
    Option("model", _text, None, "Model name sent on OpenAI routes (default: the server's).",
           "a model name"),
    Option("api_key_env", _text, None,
           "Name of the environment variable holding the API key (the key itself is never "
           "taken from the command line).", "an environment variable name"),
    Option("contexts", _int_list, "13,1663,3333,5553",
           "Prompt lengths in tokens, comma separated.", "comma-separated positive integers"),
    Option("text_classes", _name_list, "padding,reasoning",
           "Text classes to measure, comma separated (built-in or from --text-class-dir).",
           "comma-separated class names"),
    Option("text_class_dir", _path, None,
           "Directory of extra text classes, one TOML file each.", "a directory path"),
    Option("output_tokens", _positive_int, "600",
           "Tokens generated per request (ignore_eos forces exactly this many).",
           "a positive integer"),
    Option("repeats", _positive_int, "3", "Measured requests per case (minimum).",
           "a positive integer"),
    Option("max_repeats", _positive_int, "8",
           "Upper bound on repeats when a case is noisy or near its limit.",
           "a positive integer"),
    Option("max_spread", _fraction, "0.10",
           "Largest relative MAD a cell may keep at --max-repeats before it errors as "
           "unstable; widen it only for a server whose own jitter is known to be larger "
           "(a shared CPU box).", "a number in (0, 1]"),
    Option("warmup", _nonneg_int, "1", "Unmeasured warm-up requests per case.",
           "a non-negative integer"),
    Option("acceptance_source", _choice(*get_args(AcceptanceSource)), "auto",
           "Where verify-step counts come from; auto picks the most trusted that works.",
           "one of auto, response, metrics, log, none"),
    Option("log_command", _text, None,
           "Command printing the server log since {since}, e.g. "
           "'journalctl -u sglang --since {since} -o cat'; run without a shell.",
           "a command line containing {since}"),
    Option("request_timeout", _positive_float, "600",
           "Seconds one request may take before it is an error.", "a positive number"),
    Option("sim_profile", _text, "kimi-k26-ddtree",
           "Simulator profile (name or TOML path) for the embedded simulator.",
           "a profile name or path"),
    Option("sim_time_scale", _positive_float, "0.05",
           "Embedded simulator speed: 0.05 runs 20x faster than real time; figures are "
           "reported in simulated time.", "a positive number"),
    Option("baseline_dir", _path, "baselines", "Directory of versioned baselines.",
           "a directory path"),
    Option("deployment", _text, None,
           "Baseline deployment name (default: a slug of the server fingerprint).",
           "a name"),
    Option("baseline_version", _text, "latest", "Baseline version to compare with.",
           "a positive integer or 'latest'"),
    Option("update_baselines", _bool, "false",
           "Write a new baseline version from this run if every case was clean and stable.",
           "a flag", flag_only=True),
    Option("require_baseline", _bool, "false",
           "A case without a baseline is an error, not a skip (nightly job and deploy gate); "
           "the baselines are checked before the first generation request.",
           "a flag", flag_only=True),
    Option("baseline_repeats", _positive_int, "5",
           "Minimum measured requests per case when writing a baseline: its own error "
           "limits every later verdict, and it is paid once.", "a positive integer"),
    Option("report_dir", _path, "reports",
           "Where each run writes <run-id>/results.json, report.html and history.jsonl.",
           "a directory path"),
    Option("gpu_lock", _path, None,
           "Lock file guarding the GPU (default: derived from the endpoint).", "a file path"),
    Option("gpu_lock_timeout", _positive_float, "1800",
           "Seconds to wait for another run's GPU lock.", "a positive number"),
)

OPTIONS_BY_NAME = {o.name: o for o in OPTIONS}


@dataclass(frozen=True)
class Settings:
    """The resolved settings of one session, with where each value came from."""

    endpoint: str | None = None
    endpoints: Path | None = None
    compare_endpoint: str | None = None
    api: Api = "auto"
    model: str | None = None
    api_key_env: str | None = None
    contexts: tuple[int, ...] = (13, 1663, 3333, 5553)
    text_classes: tuple[str, ...] = ("padding", "reasoning")
    text_class_dir: Path | None = None
    output_tokens: int = 600
    repeats: int = 3
    max_repeats: int = 8
    max_spread: float = 0.10
    warmup: int = 1
    acceptance_source: AcceptanceSource = "auto"
    log_command: str | None = None
    request_timeout: float = 600.0
    sim_profile: str = "kimi-k26-ddtree"
    sim_time_scale: float = 0.05
    baseline_dir: Path = Path("baselines")
    deployment: str | None = None
    baseline_version: str = "latest"
    update_baselines: bool = False
    require_baseline: bool = False
    baseline_repeats: int = 5
    report_dir: Path = Path("reports")
    gpu_lock: Path | None = None
    gpu_lock_timeout: float = 1800.0
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)

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
    return value


def resolve(cli: Mapping[str, Any], environ: Mapping[str, str],
            ini: Mapping[str, str]) -> Settings:
    """Resolve every option: CLI > env > ini > default; errors name the source.

    Pure in its inputs: the environment is only what ``environ`` holds (the plugin passes
    ``os.environ``; tests pass a dict).
    """
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for opt in OPTIONS:
        raw, source = _pick(opt, cli, environ, ini)
        sources[opt.name] = source
        if raw is None:
            continue
        if not isinstance(raw, str):
            values[opt.name] = raw
            continue
        try:
            values[opt.name] = opt.parse(raw)
        except (ValueError, TypeError):
            raise ConfigError(
                f"{source} = {raw!r} is not valid: expected {opt.form}.") from None
    settings = Settings(**values, sources=sources)
    _check(settings, environ)
    return settings


def _pick(opt: Option, cli: Mapping[str, Any], environ: Mapping[str, str],
          ini: Mapping[str, str]) -> tuple[Any, str]:
    if cli.get(opt.name) is not None:
        return cli[opt.name], opt.flag
    if environ.get(opt.env):
        return environ[opt.env], opt.env
    if ini.get(opt.name):
        return ini[opt.name], f"ini {opt.ini}"
    return opt.default, "default"


def parse_tolerances(lines: Sequence[str], source: str) -> dict[str, float]:
    """Tolerance overrides 'metric = fraction', one per line or comma separated; a bad name or
    value is a ConfigError naming ``source`` (e.g. the ini key) once, at startup."""
    from ..core.limits import DEFAULT_TOLERANCES

    out: dict[str, float] = {}
    for item in (part.strip() for line in lines for part in line.split(",")):
        if not item:
            continue
        key, sep, value = (x.strip() for x in item.partition("="))
        if key not in DEFAULT_TOLERANCES:
            known = ", ".join(sorted(DEFAULT_TOLERANCES))
            raise ConfigError(f"{source}: {item!r} names no tolerance: expected one of {known} "
                              "as 'metric = fraction', e.g. step_ms = 0.15.")
        try:
            number = float(value) if sep else float("nan")
        except ValueError:
            number = float("nan")
        if not 0.0 < number <= 1.0:
            raise ConfigError(f"{source}: {item!r} is not valid: expected 'metric = fraction' "
                              "with a fraction in (0, 1], e.g. step_ms = 0.15 for 15%.")
        out[key] = number
    return out


def for_baseline(s: Settings) -> Settings:
    """The settings of a baseline-writing run: at least ``baseline_repeats`` per case."""
    if not s.update_baselines:
        return s
    repeats = max(s.repeats, s.baseline_repeats)
    return replace(s, repeats=repeats, max_repeats=max(s.max_repeats, repeats))


def _check(s: Settings, environ: Mapping[str, str]) -> None:
    if s.max_repeats < s.repeats:
        raise ConfigError(
            f"{s.sources.get('max_repeats', '--max-repeats')} = {s.max_repeats} is below "
            f"--repeats = {s.repeats}: expected max repeats >= repeats.")
    if s.baseline_version != "latest" and not s.baseline_version.isdigit():
        raise ConfigError(
            f"{s.sources.get('baseline_version')} = {s.baseline_version!r} is not valid: "
            "expected a positive integer or 'latest'.")
    if s.log_command is not None and "{since}" not in s.log_command:
        raise ConfigError(
            f"{s.sources.get('log_command')} = {s.log_command!r} has no {{since}} "
            "placeholder: expected a command line containing {since}.")
    if s.compare_endpoint is not None and s.endpoint is None:
        raise ConfigError(
            f"{s.sources.get('compare_endpoint')} = {s.compare_endpoint} needs a candidate: "
            "set --endpoint to the candidate's URL as well.")
    if s.compare_endpoint is not None and s.update_baselines:
        raise ConfigError("--update-baselines cannot be combined with --compare-endpoint: an "
                          "A/B run compares two live endpoints and writes no baseline.")
    if s.api_key_env and s.api_key_env not in environ:
        raise ConfigError(
            f"{s.sources.get('api_key_env')} names {s.api_key_env}, which is not set in the "
            f"environment: export {s.api_key_env} with the key, or drop --api-key-env.")
