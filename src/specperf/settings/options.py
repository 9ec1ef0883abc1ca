"""The option table: every setting defined once, with its parser, default and one help text.

Each :class:`Option` carries its help text, used for the command-line flag and the ini key
alike, and its default: the :class:`~specperf.settings.config.Settings` dataclass takes its
defaults from this table (parsed), so a default is written once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from .parsers import (
    Parser,
    any_text,
    baseline_version,
    case_counts,
    case_lengths,
    choice,
    database_url,
    declared_items,
    file_path,
    fraction,
    http_url,
    int_list,
    name_list,
    noise_fraction,
    nonneg_int,
    positive_float,
    positive_int,
    tolerance_items,
    yes_no,
)

# The closed choices, typed once: parsed here, so later code never meets an unknown value.
Api = Literal["auto", "sglang", "openai", "openai-chat", "llamacpp"]
AcceptanceSource = Literal["auto", "response", "metrics", "log", "none"]
AcceptanceMode = Literal["tolerance", "identical"]

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
    Option("endpoint", http_url, None,
           "Base URL of the server to measure; unset starts the embedded simulator.",
           "an http(s) URL such as http://127.0.0.1:30000"),
    Option("endpoints", file_path, None,
           "Fleet: a TOML file of endpoints ([[endpoint]] tables with name, url, and optional "
           "deployment, key_env, lock) measured in one run, in parallel under -n; "
           "--specperf-endpoint NAME=URL given more than once does the same.", "a file path"),
    Option("compare_endpoint", http_url, None,
           "A/B mode: production's base URL; --specperf-endpoint is then the candidate, requests "
           "alternate between the two and the verdict is on their ratio (no baseline file).",
           "an http(s) URL such as http://127.0.0.1:30001"),
    Option("api", choice(*get_args(Api)), "auto",
           "Route to measure: SGLang native /generate, /v1/completions, /v1/chat/completions "
           "or llama.cpp native /completion.",
           "one of auto, sglang, openai, openai-chat, llamacpp"),
    Option("model", any_text, None, "Model name sent on OpenAI routes (default: the server's).",
           "a model name"),
    Option("api_key_env", any_text, None,
           "Name of the environment variable holding the API key (the key itself is never "
           "taken from the command line).", "an environment variable name"),
    Option("contexts", int_list, "13,1663,3333,5553",
           "Prompt lengths in tokens, comma separated.", "comma-separated positive integers"),
    Option("text_classes", name_list, "padding,reasoning",
           "Text classes to measure, comma separated (built-in or from --specperf-text-class-dir).",
           "comma-separated class names"),
    Option("text_class_dir", file_path, None,
           "Directory of extra text classes, one TOML file each.", "a directory path"),
    Option("output_tokens", positive_int, "600",
           "Tokens generated per request (ignore_eos forces exactly this many).",
           "a positive integer"),
    Option("case_output_tokens", case_lengths, "",
           "Output length of named cases instead of --specperf-output-tokens, comma separated "
           "case=tokens (the gate's same-night reference decodes its step-time cases short).",
           "comma-separated case=tokens items, e.g. padding-ctx3333=128", lines=True,
           has_alias=False),
    Option("path_output_tokens", positive_int, None,
           "Output length of the path comparisons (chat route against native, stream against "
           "non-stream) instead of their case's: both paths decode it, so the comparison is "
           "at that length (a parser cost per response weighs more on a short response). The "
           "same-night gate's candidate phase decodes its parser path at 128.",
           "a positive integer", has_alias=False),
    Option("repeats", positive_int, "3", "Measured requests per case (minimum).",
           "a positive integer"),
    Option("case_repeats", case_counts, "",
           "Fewest measured requests of named cases instead of --specperf-repeats (and of "
           "--specperf-baseline-repeats in a baseline-writing run), comma separated case=n; "
           "the gate's same-night phases spend them where a request is cheapest.",
           "comma-separated case=requests items, e.g. padding-ctx13=32", lines=True,
           has_alias=False),
    Option("max_repeats", positive_int, "8",
           "Upper bound on repeats when a case is noisy or near its limit.",
           "a positive integer"),
    Option("max_spread", fraction, "0.10",
           "Largest relative MAD a cell may keep at --specperf-max-repeats before it errors as "
           "unstable; widen it only for a server whose own jitter is known to be larger "
           "(a shared CPU box).", "a number in (0, 1]"),
    Option("warmup", nonneg_int, "1", "Unmeasured warm-up requests per case.",
           "a non-negative integer"),
    Option("warmup_output_tokens", positive_int, None,
           "Output length of a case's warm-up where the case decodes more: the warm-up still "
           "warms the case's prompt, but no longer re-sends a whole measured request, so the "
           "run does not check the server repeats itself (an identical exact-acceptance result "
           "still settles acceptance; a changed one is left to the statistics). The same-night "
           "gate warms its long case at 128.", "a positive integer", has_alias=False),
    Option("acceptance_source", choice(*get_args(AcceptanceSource)), "auto",
           "Where verify-step counts come from; auto picks the most trusted that works.",
           "one of auto, response, metrics, log, none"),
    Option("log_command", any_text, None,
           "Command printing the server log since {since}, e.g. "
           "'journalctl -u sglang --since {since} -o cat'; run without a shell.",
           "a command line containing {since}"),
    Option("request_timeout", positive_float, "600",
           "Seconds one request may take before it is an error.", "a positive number"),
    Option("sim_profile", any_text, "kimi-k26-ddtree",
           "Simulator profile (name or TOML path) for the embedded simulator.",
           "a profile name or path"),
    Option("sim_time_scale", positive_float, "0.05",
           "Embedded simulator speed: 0.05 runs 20x faster than real time; figures are "
           "reported in simulated time.", "a positive number"),
    Option("baseline_dir", file_path, "baselines", "Directory of versioned baselines.",
           "a directory path"),
    Option("deployment", any_text, None,
           "Baseline deployment name (default: a slug of the server fingerprint).",
           "a name"),
    Option("baseline_version", baseline_version, "latest", "Baseline version to compare with.",
           "a positive integer or 'latest'"),
    Option("update_baselines", yes_no, "false",
           "Write a new baseline version from this run if every case was clean and stable.",
           "a flag", flag_only=True),
    Option("require_baseline", yes_no, "false",
           "A case without a baseline is an error, not a skip (nightly job and deploy gate); "
           "the baselines are checked before the first generation request.",
           "a flag", flag_only=True),
    Option("baseline_repeats", positive_int, "10",
           "Minimum measured requests per case when writing a baseline: its own error "
           "limits every later verdict, and it is paid once.", "a positive integer"),
    Option("accept", any_text, None,
           "With --specperf-update-baselines: write the new version even though it is "
           "judged a regression against the current one, recording this reason.",
           "a reason", has_alias=False),
    Option("baseline_runs", positive_int, "1",
           "Runs a new baseline is written from: this one and the last N-1 of the same "
           "deployment and fingerprint in the report directory's history, merged request "
           "slot by slot (median), so one night's luck is not the baseline.",
           "a positive integer", has_alias=False),
    Option("fingerprint", declared_items, "",
           "What the server does not report about itself, declared: 'key=value' comma "
           "separated (in ini also one per line), e.g. draft_model=noisy.gguf; it enters "
           "the fingerprint, so a change shows as a fingerprint difference.",
           "'key=value' items, comma separated", lines=True, has_alias=False),
    Option("tolerances", tolerance_items, "",
           "Tolerance overrides, 'metric=fraction' comma separated (in ini also one per "
           "line), e.g. step_ms=0.15,tok_s=0.08; metrics tok_s, avg_commit, step_ms, "
           "decode_tok_s, ttft_ms (prefill), slope; a fraction in (0, 1]. The flag, the "
           "variable or the ini key replaces the others' whole value (no per-metric merge); "
           "the baseline file's tolerances and a test's tolerance marker take precedence "
           "over it.",
           "'metric=fraction' items, comma separated", lines=True),
    Option("sweep_tolerance", fraction, "0.02",
           "The sweep-level test's tolerance: a step-time or acceptance change across the "
           "whole sweep up to this fraction passes (a sure change inside it is noted, never a "
           "failure); README 'The verdict contract'.", "a fraction in (0, 1]"),
    Option("sweep_effect", fraction, "0.05",
           "The sweep-wide change the sweep-level test must catch (its power is stated for "
           "it); above --specperf-sweep-tolerance.", "a fraction in (0, 1]"),
    Option("acceptance_mode", choice(*get_args(AcceptanceMode)), "tolerance",
           "Exact acceptance: 'tolerance' fails only when a case's avg commit moves beyond its "
           "tolerance (a smaller exact change is noted); 'identical' fails on any prompt whose "
           "verify steps changed (deploys that must not touch decoding, e.g. a parser).",
           "one of tolerance, identical"),
    Option("concurrency_levels", int_list, "1,2,4,8",
           "Concurrency levels of the concurrency_scaling test, comma separated: each level "
           "is a burst of C concurrent requests of one case, started together.",
           "comma-separated positive integers"),
    Option("concurrency_class", any_text, "reasoning",
           "Text class of the concurrency_scaling test's case.", "a class name"),
    Option("concurrency_context", positive_int, None,
           "Prompt length of the concurrency_scaling test's case (default: the smallest of "
           "--specperf-contexts).", "a positive integer"),
    Option("report_dir", file_path, "reports",
           "Where each run writes <run-id>/results.json, report.html and history.jsonl.",
           "a directory path"),
    Option("results_db", database_url, None,
           "The results store every run is written to and every cross-run reader reads "
           "(history, noise, drift, trend, baseline merge): postgresql://USER@HOST:PORT/DB for "
           "several hosts (password from PGPASSWORD or ~/.pgpass; its advisory lock then also "
           "guards the endpoint across hosts), or an SQLite file; default "
           "<report dir>/results.db (docs/store.md).",
           "postgresql://USER@HOST:PORT/DB, sqlite:///PATH or a file path", has_alias=False),
    Option("prometheus_textfile", file_path, None,
           "Also write the run's outcome as Prometheus text to this file (atomically), for "
           "node_exporter's textfile collector: the decision, the end time, each case's "
           "medians and verdicts (docs/dashboards.md).", "a file path ending in .prom",
           has_alias=False),
    Option("pushgateway", http_url, None,
           "Also push the run's outcome to this Prometheus Pushgateway (job specperf, grouped "
           "by deployment); one that cannot be reached makes the run's exit 3, infrastructure "
           "(docs/dashboards.md).", "an http(s) URL such as http://127.0.0.1:9091",
           has_alias=False),
    Option("gpu_lock", file_path, None,
           "Lock file guarding the GPU (default: derived from the endpoint).", "a file path"),
    Option("gpu_lock_timeout", positive_float, "1800",
           "Seconds to wait for another run's GPU lock.", "a positive number"),
    Option("run_noise", noise_fraction, "0.03",
           "The run-to-run noise of this box: the relative σ of one case's figures between "
           "two runs on different nights (half of it common to every case of a run). "
           "Stated, it is knowledge of this box (it weighs as 20 nights against the "
           "history); the default 3 % is a shared box's guess (3 nights). The history of "
           "full runs of the same endpoint corrects either night by night (docs/noise.md). "
           "0 states a box with none.",
           "a fraction in [0, 1)"),
    Option("night_window", positive_float, "12",
           "Hours after a night's first run within which later runs of the same endpoint "
           "share its night: the run-to-run noise counts them as one night, not several "
           "(back-to-back runs, CI retries).", "a positive number"),
    Option("same_night", yes_no, "false",
           "Judge against a reference measured on the same box the same night, just before "
           "a deploy (`specperf gate --reference DIR` sets it): the run-to-run noise cancels "
           "and only the requests' own spread counts. Never for a baseline of another night.",
           "a flag", flag_only=True, has_alias=False),
    Option("detail", yes_no, "false",
           "Print the closing block's detail under its first screen, as -v does: who was "
           "measured, the context fits and every verdict's one-line reason.",
           "a flag", flag_only=True, has_alias=False),
)

OPTIONS_BY_NAME = {o.name: o for o in OPTIONS}
