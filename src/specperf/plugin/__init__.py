"""The pytest plugin: registers options, ini keys, markers and fixtures, and wires the hooks.

Real work lives in the rooms before this one; this file only connects pytest to them, with
``fixtures`` and ``sweepfixtures`` (what perf tests receive), ``runstate`` (one run's state:
cases, baseline, verdicts), ``sweeprun`` (the sweep-level test) and ``reporting`` (writing
the record and the report at the end of the run).

May import: core, settings, plan, servers, measure, baselines, judge, record, views
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
from collections.abc import Generator
from typing import Any

import pytest

from ..baselines.preflight import Judged
from ..core.errors import ConfigError, SpecperfError
from ..measure.lock import GpuLock, LockMode, lock_path
from ..measure.loop import Sample
from ..plan.workload import Case, load_text_classes
from ..servers import simulated
from ..settings import endpoints
from ..settings.config import OPTIONS, Option, Settings, for_baseline, resolve
from ..views import summary
from ..views.report import report_dir
from . import reporting
from .burstfixtures import (  # noqa: F401  (the concurrency test's fixtures)
    BurstPlugin,
    concurrency_level,
    concurrency_levels,
    specperf_concurrency,
)
from .fixtures import (  # noqa: F401  (fixtures are registered by being importable here)
    FLEET_REQUEST,
    STATE,
    FleetRequest,
    chat_stream_paths,
    class_measurements,
    largest_context_by_class,
    measurement,
    parser_paths,
    path_sampler,
    perf_case,
    specperf,
    specperf_baseline,
    specperf_endpoint,
    specperf_paths,
    specperf_session,
    specperf_settings,
    stream_paths,
)
from .runstate import RunState
from .sweepfixtures import specperf_sweep  # noqa: F401  (the sweep-level test's fixture)

MARKERS = (
    "context_scaling: step time and acceptance across context lengths (the main job)",
    "concurrency_scaling: tok/s per user and aggregate, acceptance and step time across "
    "concurrency levels (bursts of C concurrent requests)",
    "text_class: acceptance per text class at equal context",
    "smoke: the short deploy-gate subset",
    "parser: the chat route with reasoning and tool-call parsers engaged",
    "streaming: streaming measured against non-streaming",
    "tolerance(**limits): per-test tolerance overrides, e.g. tolerance(step_ms=0.15)",
    "perf_cases(*(text_class, context)): measure these cases instead of the planned matrix",
)
_PREVIOUS_SIGTERM = pytest.StashKey[Any]()
GROUP = "specperf"


class _ValueRequired(argparse.Action):
    """An option whose value may start with '-' (``--specperf-contexts -5,13``): argparse
    takes such a word for an option and leaves the flag without a value; say how to write it
    instead of argparse's bare 'expected one argument'."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        if values is None:
            flag = option_string or self.dest
            raise argparse.ArgumentError(self, (
                f"expected one value. A value that starts with '-' reads as an option: attach "
                f"it with '=', e.g. {flag}=-5,13 (not {flag} -5,13)"))
        setattr(namespace, self.dest, values)
        _note_spelling(namespace, self.dest, option_string)


# The flags given by an old unprefixed name, by setting: an error names what was typed.
_SPELLED = "specperf_spelled"


def _note_spelling(namespace: argparse.Namespace, dest: str, option_string: str | None) -> None:
    if option_string is not None and not option_string.startswith("--specperf-"):
        spelled = dict(getattr(namespace, _SPELLED, None) or {})
        spelled[dest.removeprefix("specperf_")] = option_string
        setattr(namespace, _SPELLED, spelled)


class _Store(argparse.Action):
    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, values)
        _note_spelling(namespace, self.dest, option_string)


class _Flag(argparse.Action):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["nargs"] = 0
        super().__init__(*args, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, True)
        _note_spelling(namespace, self.dest, option_string)


class _Append(argparse.Action):
    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, [*(getattr(namespace, self.dest, None) or []), values])
        _note_spelling(namespace, self.dest, option_string)


def _option_kwargs(opt: Option) -> dict[str, Any]:
    """How argparse reads one option (the same for its prefixed name and its alias)."""
    dest = f"specperf_{opt.name}"
    if opt.flag_only:
        return {"action": _Flag, "default": None, "dest": dest}
    kwargs: dict[str, Any] = {"default": None, "dest": dest, "metavar": opt.name.upper(),
                              "action": _Store}
    if opt.name == "endpoint":  # given more than once (NAME=URL): a fleet (specperf.fleet)
        kwargs["action"] = _Append
    elif opt.name == "contexts":  # "-5,13" looks like an option to argparse
        kwargs.update(nargs="?", action=_ValueRequired)
    return kwargs


def _help(opt: Option) -> str:
    default = f" Default: {opt.default}." if opt.default and not opt.flag_only else ""
    text = opt.help
    if opt.name == "endpoint":
        text += " Given more than once as NAME=URL: a fleet (see --specperf-endpoints)."
    also = f"; old name {opt.alias}" if opt.alias else ""
    # argparse expands %-formats in help ("3 %" would end --help with a TypeError).
    return f"{text}{default} [env {opt.env}, ini {opt.ini}{also}]".replace("%", "%%")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup(GROUP, "specperf: speculative-decoding performance")
    for opt in OPTIONS:
        group.addoption(opt.flag, help=_help(opt), **_option_kwargs(opt))
        if opt.lines:  # one item per line, or a TOML list (specperf_tolerances)
            parser.addini(opt.ini, help=opt.help, type="linelist", default=[])
        else:
            parser.addini(opt.ini, help=opt.help, default="")


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser,
                                  args: list[str]) -> Generator[None, None, None]:
    """The old unprefixed names (``--model``, ``--repeats`` …) as aliases, registered last and
    only where no other plugin or conftest registered the same flag: theirs wins, and ours
    stays reachable by its prefixed name (pytest refuses to start on a duplicate flag)."""
    yield  # the initial conftests have now registered their options
    taken = _registered_flags(parser)
    group = parser.getgroup(GROUP)
    for opt in OPTIONS:
        if opt.alias is not None and opt.alias not in taken:
            group.addoption(opt.alias, help=argparse.SUPPRESS, **_option_kwargs(opt))


def _registered_flags(parser: pytest.Parser) -> set[str]:
    """Every flag registered with pytest so far. pytest lists its options only privately
    (``Parser._anonymous`` and ``Parser._groups``, stable since pytest 3)."""
    groups = [getattr(parser, "_anonymous", None), *getattr(parser, "_groups", [])]
    return {name for group in groups if group is not None
            for option in group.options for name in option.names()}


def pytest_configure(config: pytest.Config) -> None:
    for marker in MARKERS:
        config.addinivalue_line("markers", marker)
    cli = {o.name: config.getoption(f"specperf_{o.name}") for o in OPTIONS}
    cli["endpoint"], fleet_flags = endpoints.split_endpoint_flags(cli["endpoint"])
    ini = {o.name: config.getini(o.ini) or "" for o in OPTIONS}
    workerinput = getattr(config, "workerinput", None)
    # An xdist worker whose controller holds the session lock locks per case instead.
    held = bool(workerinput and workerinput.get("specperf_lock_held"))
    lock_mode: LockMode = "case" if held else "session"
    try:
        spelled = getattr(config.option, _SPELLED, None) or {}
        settings = for_baseline(resolve(cli, os.environ, ini, spelled))
        if settings.endpoint is None:
            simulated.check_profile(settings.sim_profile,
                                    settings.sources["sim_profile"])
        classes = load_text_classes(settings.text_class_dir)
        fleet = endpoints.fleet_endpoints(settings, fleet_flags)
        if fleet:  # several endpoints: the fleet plugin (specperf.fleet.plugin) takes over
            config.stash[FLEET_REQUEST] = FleetRequest(settings, fleet, classes)
        else:
            config.stash[STATE] = RunState(
                settings, classes,
                progress=lambda line: write_line(config, line),
                on_sample=lambda s, total: _progress(config, s, total), lock_mode=lock_mode)
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    if settings.update_baselines and (workerinput is not None
                                      or config.getoption("dist", "no") != "no"):
        raise pytest.UsageError(
            "--specperf-update-baselines needs the whole sweep in one process: run it without -n "
            "(pytest-xdist), so one run writes one complete baseline.")
    config.pluginmanager.register(summary.Collector(), summary.COLLECTOR_NAME)
    if not fleet:
        config.pluginmanager.register(BurstPlugin(config), "specperf-bursts")
    if fleet:  # one report over every endpoint, written by the fleet plugin
        return
    config.pluginmanager.register(reporting.ReportPlugin(config), "specperf-report")
    if workerinput is None and config.pluginmanager.hasplugin("xdist") \
            and config.getoption("dist", "no") != "no" and settings.endpoint is not None:
        config.pluginmanager.register(XdistController(config, settings), "specperf-xdist")


class XdistController:
    """Under pytest-xdist the controller holds the endpoint's session GPU lock.

    Taken at session start, before any worker measures, released when the session ends.
    Workers are told (``workerinput``) and serialise among themselves per case. Only for a
    configured endpoint: with the embedded simulator each worker runs its own simulator.
    """

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self.lock: GpuLock | None = None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        assert self.settings.endpoint is not None
        lock = GpuLock(lock_path(self.settings), timeout_s=self.settings.gpu_lock_timeout,
                       endpoint=self.settings.endpoint,
                       progress=lambda line: write_line(self.config, line))
        try:
            lock.acquire()
        except SpecperfError as exc:
            pytest.exit(f"{type(exc).__name__}: {exc}", returncode=pytest.ExitCode.INTERNAL_ERROR)
        self.lock = lock

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["specperf_lock_held"] = self.lock is not None

    def pytest_sessionfinish(self) -> None:
        if self.lock is not None:
            self.lock.release()


def write_line(config: pytest.Config, line: str) -> None:
    """One line to the terminal, past pytest's capture, while a case runs."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None:
        return
    if capture is None:
        reporter.write_line(line)
        return
    # Progress must reach the terminal while the case runs, past pytest's capture.
    with capture.global_and_fixture_disabled():
        reporter.write_line(line)


def _progress(config: pytest.Config, sample: Sample, total: int) -> None:
    if config.get_verbosity() >= 1:
        write_line(config, "  " + summary.sample_line(sample, total))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    state = metafunc.config.stash[STATE]
    if "perf_case" in metafunc.fixturenames:
        cases = _planned_cases(metafunc, state)
        metafunc.parametrize("perf_case", cases, ids=[c.id for c in cases], indirect=True)
    if "text_class" in metafunc.fixturenames:
        names = list(state.settings.text_classes)
        metafunc.parametrize("text_class", names, ids=names)


@pytest.hookimpl(trylast=True)  # after -m and -k have deselected: only what will run
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Note what the run will judge against a baseline (for --specperf-require-baseline's check)."""
    state = config.stash.get(STATE, None)
    if state is None:
        return
    cases: list[Case] = []
    classes: list[str] = []
    for item in items:
        names = getattr(item, "fixturenames", ())
        params = getattr(getattr(item, "callspec", None), "params", {})
        if "specperf_session" in names:  # a perf test: its record says what kind of run it was
            case = params.get("perf_case")
            item.user_properties.append(
                ("specperf_case", case.id if isinstance(case, Case) else item.name))
        if "specperf" not in names:
            continue
        if "measurement" in names and isinstance(params.get("perf_case"), Case):
            cases.append(params["perf_case"])
        if "class_measurements" in names and isinstance(params.get("text_class"), str):
            classes.append(params["text_class"])
    state.judged = Judged(tuple(cases), tuple(classes))


def _planned_cases(metafunc: pytest.Metafunc, state: RunState) -> list[Case]:
    """The run's matrix, or the fixed cases a ``perf_cases`` marker names (the smoke subset)."""
    marker = metafunc.definition.get_closest_marker("perf_cases")
    if marker is None:
        return state.cases
    output = state.settings.output_tokens
    return [Case(text_class, int(context), output) for text_class, context in marker.args]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    # One clear sentence instead of a traceback for the suite's own errors.
    if call.excinfo is not None and isinstance(call.excinfo.value, SpecperfError):
        report.longrepr = f"{type(call.excinfo.value).__name__}: {call.excinfo.value}"
    return report


class _StopOnce:
    """SIGTERM (a cancelled CI job, `kill`) and SIGINT end the run like Ctrl-C: pytest then
    finishes the session, so the lock is released and what was measured is written out.

    Only the first signal interrupts. `timeout -s INT` signals the process and then its whole
    group, so a second one arrives while the session is closing; raising again there would
    abort the cleanup with a long traceback. Later ones are acknowledged and ignored.
    """

    def __init__(self) -> None:
        self.stopping = False

    def __call__(self, signum: int, frame: object) -> None:
        if not self.stopping:
            self.stopping = True
            raise KeyboardInterrupt(f"specperf: stopped by signal {signum}")
        os.write(2, b"specperf: already stopping: releasing the GPU lock and writing the "
                    b"report (SIGKILL ends it at once)\n")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    if FLEET_REQUEST in config.stash and STATE not in config.stash:
        raise pytest.UsageError(
            "a fleet run needs specperf's fleet plugin, which is not loaded (it is the "
            "pytest11 entry point specperf_fleet): reinstall specperf (pip install .) or add "
            "-p specperf.fleet.plugin.")
    if threading.current_thread() is threading.main_thread():
        handler = _StopOnce()
        session.config.stash[_PREVIOUS_SIGTERM] = [
            (signum, signal.signal(signum, handler)) for signum in (signal.SIGTERM,
                                                                     signal.SIGINT)]


@pytest.hookimpl(tryfirst=True)
def pytest_keyboard_interrupt(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """Drop traceback entries without a line number before pytest renders the interrupt.

    A signal can land on an instruction Python 3.11 maps to no line (``tb_lineno`` None);
    pytest's report of the KeyboardInterrupt then dies with a TypeError and a second
    traceback, and the run ends with exit 1 instead of 2 (interrupted).
    """
    excinfo.traceback = excinfo.traceback.filter(_has_line)


def _has_line(entry: Any) -> bool:
    try:
        return entry.lineno is not None
    except TypeError:  # tb_lineno is None: ``lineno`` is tb_lineno - 1
        return False


def pytest_unconfigure(config: pytest.Config) -> None:
    for signum, previous in config.stash.get(_PREVIOUS_SIGTERM, None) or []:
        signal.signal(signum, previous)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    state = session.config.stash.get(STATE, None)
    if state is None:
        return
    collected = summary.collected(session.config)
    if state.settings.update_baselines and state.judged:
        try:
            report = session.config.pluginmanager.get_plugin("specperf-report")
            lines = state.update_baseline(
                clean=collected.errors == 0, run_id=getattr(report, "run_id", None),
                history=report_dir(state.settings.report_dir, session.config.invocation_params.dir))
        except SpecperfError as exc:
            lines = [f"specperf: baseline NOT updated: {exc}"]
        collected.footer.extend(lines)
        if state.baseline_written is None and session.exitstatus == pytest.ExitCode.OK:
            # Asked to write a baseline and wrote none: that run did not do its job.
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    state.close_session()


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int,
                            config: pytest.Config) -> None:
    collected = summary.collected(config)
    state = config.stash.get(STATE, None)
    if state is None or FLEET_REQUEST in config.stash:  # a fleet: the fleet plugin's block
        return
    # The footer (e.g. "baseline NOT updated: …") is shown even when nothing was measured;
    # a run of path tests alone has verdicts (paths keep their own measurements) to show.
    lines = (summary.render(collected, state.settings)
             if collected.measurements or collected.verdicts or collected.concurrency
             else collected.footer)
    for line in lines:
        terminalreporter.write_line(line)
