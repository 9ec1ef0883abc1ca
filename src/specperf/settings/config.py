"""Settings: every option defined once, resolved once, CLI > SPECPERF_* env > ini > default.

Each :class:`Option` carries its help text, used for the command-line flag and
the ini key alike, and its default: the :class:`Settings` dataclass takes its defaults
from this table (parsed), so a default is written once. :func:`resolve` turns raw strings
into a frozen :class:`Settings`; a bad value raises :class:`ConfigError` naming where it
came from and the accepted form.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal, get_args
from urllib.parse import urlsplit

from ..core.errors import ConfigError
from ..core.limits import check_tolerance

# The closed choices, typed once: parsed here, so later code never meets an unknown value.
Api = Literal["auto", "sglang", "openai", "openai-chat", "llamacpp"]
AcceptanceSource = Literal["auto", "response", "metrics", "log", "none"]
AcceptanceMode = Literal["tolerance", "identical"]

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


def _noise(text: str) -> float:
    value = float(text)
    if not 0 <= value < 1:
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


def _baseline_version(text: str) -> int | Literal["latest"]:
    return "latest" if text.strip() == "latest" else _positive_int(text)


def _tolerances(text: str) -> dict[str, float]:
    """'metric = fraction' items, comma separated or one per line; each checked, a bad one
    a ConfigError naming it (resolve puts the source in front)."""
    out: dict[str, float] = {}
    for item in (part.strip() for line in text.splitlines() for part in line.split(",")):
        if not item:
            continue
        key, sep, value = (x.strip() for x in item.partition("="))
        out[key] = check_tolerance(key, value if sep else None, repr(item))
    return out


def _declared(text: str) -> dict[str, str]:
    """'key=value' items, comma separated or one per line (what a server does not report)."""
    out: dict[str, str] = {}
    for item in (part.strip() for line in text.splitlines() for part in line.split(",")):
        if not item:
            continue
        key, sep, value = (x.strip() for x in item.partition("="))
        if not sep or not key.isidentifier() or not value:
            raise ConfigError(f"{item!r} is not key=value (e.g. draft_model=draft.gguf)")
        out[key] = value
    return out


# The options that had an unprefixed flag before every flag was prefixed (--specperf-NAME):
# those names stay aliases for at least one release. An option added since has none.
OLD_NAMES = frozenset((
    "endpoint", "endpoints", "compare_endpoint", "api", "model", "api_key_env", "contexts",
    "text_classes", "text_class_dir", "output_tokens", "repeats", "max_repeats", "max_spread",
    "warmup", "acceptance_source", "log_command", "request_timeout", "sim_profile",
    "sim_time_scale", "baseline_dir", "deployment", "baseline_version", "update_baselines",
    "require_baseline", "baseline_repeats", "tolerances", "sweep_tolerance", "sweep_effect",
    "acceptance_mode", "concurrency_levels", "concurrency_class", "concurrency_context",
    "report_dir", "gpu_lock", "gpu_lock_timeout"))


@dataclass(frozen=True)
class Option:
    """One setting: its name, how to parse it, its default and its one help text."""

    name: str
    parse: Parser
    default: str | None
    help: str
    form: str
    flag_only: bool = False
    lines: bool = False  # the ini key is a line list (one item per line, or a TOML list)
    # The unprefixed name the flag had before 0.x prefixed every flag: kept as an alias for
    # at least one release (docs/options.md); options added since have none.
    has_alias: bool = True

    @property
    def flag(self) -> str:
        """Its name on pytest's command line, prefixed so that no other plugin's collides."""
        return "--specperf-" + self.name.replace("_", "-")

    @property
    def alias(self) -> str | None:
        """Its old unprefixed name (``--model``), accepted while no other plugin claims it."""
        aliased = self.has_alias and self.name in OLD_NAMES
        return "--" + self.name.replace("_", "-") if aliased else None

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
           "--specperf-endpoint NAME=URL given more than once does the same.", "a file path"),
    Option("compare_endpoint", _url, None,
           "A/B mode: production's base URL; --specperf-endpoint is then the candidate, requests "
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
           "Text classes to measure, comma separated (built-in or from --specperf-text-class-dir).",
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
           "Largest relative MAD a cell may keep at --specperf-max-repeats before it errors as "
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
    Option("baseline_version", _baseline_version, "latest", "Baseline version to compare with.",
           "a positive integer or 'latest'"),
    Option("update_baselines", _bool, "false",
           "Write a new baseline version from this run if every case was clean and stable.",
           "a flag", flag_only=True),
    Option("require_baseline", _bool, "false",
           "A case without a baseline is an error, not a skip (nightly job and deploy gate); "
           "the baselines are checked before the first generation request.",
           "a flag", flag_only=True),
    Option("baseline_repeats", _positive_int, "10",
           "Minimum measured requests per case when writing a baseline: its own error "
           "limits every later verdict, and it is paid once.", "a positive integer"),
    Option("baseline_runs", _positive_int, "1",
           "Runs a new baseline is written from: this one and the last N-1 of the same "
           "deployment and fingerprint in the report directory's history, merged request "
           "slot by slot (median), so one night's luck is not the baseline.",
           "a positive integer", has_alias=False),
    Option("fingerprint", _declared, "",
           "What the server does not report about itself, declared: 'key=value' comma "
           "separated (in ini also one per line), e.g. draft_model=noisy.gguf; it enters "
           "the fingerprint, so a change shows as a fingerprint difference.",
           "'key=value' items, comma separated", lines=True, has_alias=False),
    Option("tolerances", _tolerances, "",
           "Tolerance overrides, 'metric=fraction' comma separated (in ini also one per "
           "line), e.g. step_ms=0.15,tok_s=0.08; metrics tok_s, avg_commit, step_ms, "
           "decode_tok_s, ttft_ms (prefill), slope; a fraction in (0, 1]. The flag, the "
           "variable or the ini key replaces the others' whole value (no per-metric merge); "
           "the baseline file's tolerances and a test's tolerance marker take precedence "
           "over it.",
           "'metric=fraction' items, comma separated", lines=True),
    Option("sweep_tolerance", _fraction, "0.02",
           "The sweep-level test's tolerance: a step-time or acceptance change across the "
           "whole sweep up to this fraction passes (a sure change inside it is noted, never a "
           "failure); README 'The verdict contract'.", "a fraction in (0, 1]"),
    Option("sweep_effect", _fraction, "0.05",
           "The sweep-wide change the sweep-level test must catch (its power is stated for "
           "it); above --specperf-sweep-tolerance.", "a fraction in (0, 1]"),
    Option("acceptance_mode", _choice(*get_args(AcceptanceMode)), "tolerance",
           "Exact acceptance: 'tolerance' fails only when a case's avg commit moves beyond its "
           "tolerance (a smaller exact change is noted); 'identical' fails on any prompt whose "
           "verify steps changed (deploys that must not touch decoding, e.g. a parser).",
           "one of tolerance, identical"),
    Option("concurrency_levels", _int_list, "1,2,4,8",
           "Concurrency levels of the concurrency_scaling test, comma separated: each level "
           "is a burst of C concurrent requests of one case, started together.",
           "comma-separated positive integers"),
    Option("concurrency_class", _text, "reasoning",
           "Text class of the concurrency_scaling test's case.", "a class name"),
    Option("concurrency_context", _positive_int, None,
           "Prompt length of the concurrency_scaling test's case (default: the smallest of "
           "--specperf-contexts).", "a positive integer"),
    Option("report_dir", _path, "reports",
           "Where each run writes <run-id>/results.json, report.html and history.jsonl.",
           "a directory path"),
    Option("gpu_lock", _path, None,
           "Lock file guarding the GPU (default: derived from the endpoint).", "a file path"),
    Option("gpu_lock_timeout", _positive_float, "1800",
           "Seconds to wait for another run's GPU lock.", "a positive number"),
    Option("run_noise", _noise, "0.03",
           "The run-to-run noise to assume while the history has too few runs to tell it: "
           "the relative σ of one case's figures between two runs on different nights "
           "(half of it common to every case of a run). 3 % is what the drift model is "
           "calibrated for on a shared box; the history of full runs of the same endpoint "
           "corrects it night by night (docs/benchmarks.md). 0 states a box with none.",
           "a fraction in [0, 1)"),
    Option("same_night", _bool, "false",
           "Judge against a reference measured on the same box the same night, just before "
           "a deploy (`specperf gate --reference DIR` sets it): the run-to-run noise cancels "
           "and only the requests' own spread counts. Never for a baseline of another night.",
           "a flag", flag_only=True, has_alias=False),
)

OPTIONS_BY_NAME = {o.name: o for o in OPTIONS}


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
    repeats: int = _default("repeats")
    max_repeats: int = _default("max_repeats")
    max_spread: float = _default("max_spread")
    warmup: int = _default("warmup")
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
    gpu_lock: Path | None = _default("gpu_lock")
    gpu_lock_timeout: float = _default("gpu_lock_timeout")
    run_noise: float = _default("run_noise")
    same_night: bool = _default("same_night")
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
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for opt in OPTIONS:
        raw, source = _pick(opt, cli, environ, ini, spelled or {})
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
    settings = Settings(**values, sources=sources)
    _check(settings, environ)
    return settings


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
