"""The pytest plugin: registers options, ini keys, markers and fixtures, and wires the hooks.

Real work lives in the rooms before this one; this file holds only the hooks that connect
pytest to them, with ``flags`` (how each option reads on the command line), ``markers``,
``fixtures`` and ``sweepfixtures`` (what perf tests receive), ``runstate`` (one run's state:
cases, baseline, verdicts), ``sweeprun`` (the sweep-level test), ``reporting`` (writing the
record and the report at the end of the run), ``publish`` (its Prometheus and GitHub
outputs), ``xdistcontroller`` (the session's GPU lock
under xdist), ``signals`` (stopping on SIGTERM) and ``terminal`` (progress lines).

May import: core, store, settings, plan, servers, measure, baselines, judge, record, views
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
from ..core import stop
from ..core.errors import ConfigError, SpecperfError
from ..measure.lock import LockMode
from ..plan.workload import Case, case_at, load_text_classes
from ..servers import simulated
from ..settings import endpoints
from ..settings.config import Settings, for_baseline, resolve
from ..settings.options import OPTIONS
from ..settings.reportdir import report_dir
from ..settings.spelling import renamed_notice, unknown_flag
from ..views import summary
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
from .flags import GROUP, SPELLED, help_text, option_kwargs, registered_flags
from .markers import MARKERS
from .runstate import RunState
from .signals import StopOnce, has_line
from .sweepfixtures import specperf_sweep  # noqa: F401  (the sweep-level test's fixture)
from .terminal import SAME_ERROR, error_identity, say_once, show_sample, write_line
from .xdistcontroller import XdistController

_PREVIOUS_SIGTERM = pytest.StashKey[Any]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup(GROUP, "specperf: speculative-decoding performance")
    for opt in OPTIONS:
        group.addoption(opt.flag, help=help_text(opt), **option_kwargs(opt))
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
    taken = registered_flags(parser)
    group = parser.getgroup(GROUP)
    for opt in OPTIONS:
        if opt.alias is not None and opt.alias not in taken:
            group.addoption(opt.alias, help=argparse.SUPPRESS, **option_kwargs(opt))
    # A typo of one of our flags: "did you mean", before pytest's bare "unrecognized".
    if (typo := unknown_flag(args, registered_flags(parser))) is not None:
        raise pytest.UsageError(typo)


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
        spelled = getattr(config.option, SPELLED, None) or {}
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
                on_sample=lambda s, total: show_sample(config, s, total), lock_mode=lock_mode)
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
        _no_fleet_outputs(settings)
        return
    config.pluginmanager.register(reporting.ReportPlugin(config), "specperf-report")
    if workerinput is None and config.pluginmanager.hasplugin("xdist") \
            and config.getoption("dist", "no") != "no" and settings.endpoint is not None:
        config.pluginmanager.register(XdistController(config, settings), "specperf-xdist")


def _no_fleet_outputs(settings: Settings) -> None:
    """The Prometheus outputs render one endpoint's record (plugin/publish.py): a fleet's
    record has several, so asking for them there is a usage error, not a silent no-op."""
    asked = [o.flag for o in OPTIONS if o.name in ("prometheus_textfile", "pushgateway")
             and getattr(settings, o.name) is not None]
    if asked:
        raise pytest.UsageError(
            f"{' and '.join(asked)} cannot be combined with a fleet (--specperf-endpoints) yet: "
            "run each endpoint alone with --specperf-endpoint to publish its metrics.")


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
    s = state.settings
    return [case_at(text_class, int(context), s.output_tokens, s.case_output_tokens)
            for text_class, context in marker.args]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    # One clear sentence instead of a traceback for the suite's own errors.
    if call.excinfo is not None and isinstance(call.excinfo.value, SpecperfError):
        report.longrepr = f"{type(call.excinfo.value).__name__}: {call.excinfo.value}"
        # shown once at the end when later tests meet the same error (terminal.say_once)
        report.user_properties.append((SAME_ERROR, error_identity(call.excinfo.value)))
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    if FLEET_REQUEST in config.stash and STATE not in config.stash:
        raise pytest.UsageError(
            "a fleet run needs specperf's fleet plugin, which is not loaded (it is the "
            "pytest11 entry point specperf_fleet): reinstall specperf (pip install .) or add "
            "-p specperf.fleet.plugin.")
    state = config.stash.get(STATE, None) or config.stash.get(FLEET_REQUEST, None)
    notice = renamed_notice(state.settings.sources) if state is not None else None
    if notice is not None and not hasattr(config, "workerinput"):  # once, not per worker
        write_line(config, notice)
    if threading.current_thread() is threading.main_thread():
        stop.reset()
        handler = StopOnce()
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
    stop.acted_on()  # closing now: the measuring loops no longer raise the stop again
    excinfo.traceback = excinfo.traceback.filter(has_line)


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
        if state.baselines.written is None and session.exitstatus == pytest.ExitCode.OK:
            # Asked to write a baseline and wrote none: that run did not do its job.
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    state.close_session()
    say_once(session.config)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int,
                            config: pytest.Config) -> None:
    collected = summary.collected(config)
    state = config.stash.get(STATE, None)
    if state is None or FLEET_REQUEST in config.stash:  # a fleet: the fleet plugin's block
        return
    # The footer (e.g. "baseline NOT updated: …") is shown even when nothing was measured;
    # a run of path tests alone has verdicts (paths keep their own measurements) to show.
    detail = config.get_verbosity() > 0 or state.settings.detail
    lines = (summary.render(collected, state.settings, detail=detail)
             if collected.measurements or collected.verdicts or collected.concurrency
             else collected.footer)
    for line in lines:
        terminalreporter.write_line(line)
