"""Commands printed in advice: built from the flags of the run that needs them.

A hint followed as printed must act on the same server, deployment and baselines as the
run that printed it (the gate's "no baseline" advice once omitted ``--endpoint`` and, run
as printed, measured the embedded simulator instead).
"""

from __future__ import annotations

import shlex
from pathlib import Path

from .config import Settings
from .options import OPTIONS_BY_NAME


def _default(name: str) -> str | None:
    return OPTIONS_BY_NAME[name].default


def _flag(name: str) -> str:
    """The option's prefixed flag (``--specperf-endpoint``): a hint works whatever other
    plugins the user's pytest has (the old unprefixed names yield to theirs)."""
    return OPTIONS_BY_NAME[name].flag


def run_flags(settings: Settings, deployment: str | None = None) -> list[str]:
    """The flags that pick this run's server, baselines and case shape."""
    s = settings
    flags: list[str] = []
    if s.endpoint is not None:
        flags += [_flag("endpoint"), s.endpoint]
    elif s.sim_profile != _default("sim_profile"):
        flags += [_flag("sim_profile"), s.sim_profile]
    for name, value in (("api", s.api), ("model", s.model), ("api_key_env", s.api_key_env)):
        if value is not None and value != _default(name):
            flags += [_flag(name), value]
    named = deployment or s.deployment
    if named:
        flags += [_flag("deployment"), named]
    if s.baseline_dir != Path(str(_default("baseline_dir"))):
        flags += [_flag("baseline_dir"), str(s.baseline_dir)]
    if s.output_tokens != int(str(_default("output_tokens"))):
        flags += [_flag("output_tokens"), str(s.output_tokens)]
    if s.text_class_dir is not None:
        flags += [_flag("text_class_dir"), str(s.text_class_dir)]
    return flags


def perf_tests_args(cwd: Path | None = None) -> list[str]:
    """How pytest finds the perf tests from ``cwd``: a checkout's ``perf_tests/`` when there
    is one, else the copy installed with the package (``--pyargs specperf.perf_tests``)."""
    here = Path.cwd() if cwd is None else cwd
    return ["perf_tests"] if (here / "perf_tests").is_dir() else ["--pyargs",
                                                                  "specperf.perf_tests"]


def perf_command(*args: str, cwd: Path | None = None) -> str:
    """``pytest <the perf tests> ARGS…``, a command that works as printed from ``cwd``."""
    return shlex.join(["pytest", *perf_tests_args(cwd), *args])


def measuring_flags(settings: Settings) -> list[str]:
    """The flags that shape what a baseline run measures and how noisy it may be (a small
    model's contexts, a CPU box's spread and tolerances), when not the defaults."""
    s = settings
    flags: list[str] = []
    for name, value in (("contexts", ",".join(map(str, s.contexts))),
                        ("text_classes", ",".join(s.text_classes)),
                        ("max_spread", f"{s.max_spread:g}"),
                        ("max_repeats", str(s.max_repeats)),
                        ("tolerances", ",".join(f"{k}={v:g}" for k, v in
                                                sorted(s.tolerances.items())))):
        default = OPTIONS_BY_NAME[name].default or ""
        same = (value == f"{float(default):g}") if name == "max_spread" else value == default
        if not same:
            flags.append(f"{_flag(name)}={value}")
    return flags


def update_command(settings: Settings, deployment: str | None = None, *,
                   measuring: bool = False) -> str:
    """The main job writing a new baseline version for this run's server; ``measuring``
    adds this run's case shape and noise limits (:func:`measuring_flags`)."""
    extra = measuring_flags(settings) if measuring else []
    return perf_command("-m", "context_scaling", *run_flags(settings, deployment), *extra,
                        _flag("update_baselines"))


def rerun_command(settings: Settings, *args: str, marker: str = "context_scaling") -> str:
    """This run's tests measuring again on its server, deployment and baselines, with
    ``args`` after its flags (an A/B run keeps its other arm; a concurrency run its levels,
    class and context when not the defaults)."""
    s = settings
    extra = [] if s.compare_endpoint is None else [_flag("compare_endpoint"), s.compare_endpoint]
    if marker == "concurrency_scaling":
        levels = ",".join(map(str, s.concurrency_levels))
        if levels != _default("concurrency_levels"):
            extra.append(f"{_flag('concurrency_levels')}={levels}")
        if s.concurrency_class != _default("concurrency_class"):
            extra += [_flag("concurrency_class"), s.concurrency_class]
        if s.concurrency_context is not None:
            extra += [_flag("concurrency_context"), str(s.concurrency_context)]
    return perf_command("-m", marker, *run_flags(s), *extra, *args)


def create_hint(settings: Settings, deployment: str | None = None) -> str:
    """'create one with `…`', the advice for a missing baseline."""
    return f"create one with `{update_command(settings, deployment)}`"


def accept_command(settings: Settings, deployment: str | None = None,
                   reason: str = "REASON") -> str:
    """The baseline update that writes a version judged a regression anyway, with ``reason``."""
    return shlex.join([*shlex.split(update_command(settings, deployment, measuring=True)),
                       _flag("accept"), reason])
