"""The fleet's own pytest plugin (entry point ``specperf_fleet``): several endpoints in one run.

``specperf.plugin`` resolves the settings and, when they name a fleet, leaves a
:class:`~specperf.plugin.fixtures.FleetRequest` in ``config.stash``; this plugin's hooks
build and run the fleet from it and do nothing otherwise.

Lifecycle, explained once. At configure time every endpoint gets its own
:class:`~specperf.plugin.runstate.RunState` (kept in ``config.stash[FLEET]``) with lock mode
``session``: unlike a single endpoint under xdist, where the controller holds the lock,
in a fleet *the worker measuring an endpoint holds that endpoint's lock*, taken before its
first request and released when pytest tears its ``specperf_session`` down (the worker
moves on to another endpoint, or ends). Tests that measure get the session-scoped
parameter ``specperf_endpoint`` (ids ``box2-reasoning-ctx3333``) with an ``xdist_group``
mark per endpoint, and run with ``--dist loadgroup``: one worker per endpoint at a time,
endpoints in parallel. An endpoint that waits for its lock, or is down, holds up only its
own group; its cases error with one sentence each, the others finish.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from typing import Any

import pytest

from ..baselines.preflight import Judged
from ..core.errors import ConfigError
from ..plugin.fixtures import FLEET, FLEET_REQUEST, LOCK_LINES, STATE, FleetRequest
from ..plugin.reporting import HtmlHooks
from ..plugin.runstate import RunState
from ..plugin.terminal import write_line
from ..settings.endpoints import check_combination, endpoint_settings
from .record import FLEET_COLLECTOR, FleetCollector

Write = Callable[[str], None]
_DISTS_OK = ("no", "load", "loadgroup")


@pytest.hookimpl(trylast=True)  # after specperf.plugin has resolved the settings
def pytest_configure(config: pytest.Config) -> None:
    request = config.stash.get(FLEET_REQUEST, None)
    if request is None:
        return
    try:
        config.stash[STATE] = configure(config, request, lambda line: write_line(config, line))
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None


def configure(config: pytest.Config, request: FleetRequest, write: Write) -> RunState:
    """Set up one RunState per endpoint and the controller's collector; returns the first."""
    settings, found = request.settings, request.endpoints
    check_combination(settings)
    _check_dist(config, [ep.name for ep in found])
    lines: dict[str, list[str]] = {ep.name: [] for ep in found}
    source = (f"endpoints file {settings.endpoints}" if settings.endpoints is not None
              else "--endpoint")
    states = {ep.name: RunState(endpoint_settings(settings, ep, f"{source} ({ep.name})"),
                                request.classes, progress=_progress(write, ep.name, lines),
                                lock_mode="session")
              for ep in found}
    config.stash[FLEET] = states
    config.stash[LOCK_LINES] = lines
    if not config.pluginmanager.hasplugin("xdist"):
        config.addinivalue_line("markers", "xdist_group(name): a fleet endpoint's cases")
    collector = FleetCollector(config, found, states)
    config.pluginmanager.register(collector, FLEET_COLLECTOR)
    if config.pluginmanager.hasplugin("html"):  # specperf's columns in pytest-html's report
        config.pluginmanager.register(HtmlHooks(collector), "specperf-report-html")
    return states[found[0].name]


def _check_dist(config: pytest.Config, names: Sequence[str]) -> None:
    """Each endpoint's cases must stay on one worker; specperf schedules them so itself."""
    dist = config.getoption("dist", "no")
    if dist not in _DISTS_OK:
        raise ConfigError(f"--dist {dist} would split an endpoint's cases over workers that "
                          "measure it at once: run a fleet with -n N alone (specperf then "
                          "gives each endpoint's cases to one worker) or --dist loadgroup.")
    if dist != "no" and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_Scheduler(names), "specperf-fleet-scheduler")


class _Scheduler:
    """The controller schedules a fleet by endpoint (see :class:`EndpointScheduling`)."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = tuple(names)

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        from .schedule import EndpointScheduling

        return EndpointScheduling(config, log, self.names)


def _progress(write: Write, name: str, lines: dict[str, list[str]]) -> Write:
    def progress(line: str) -> None:
        if "GPU lock" in line:  # a wait for another run: named in the fleet's closing block
            lines[name].append(line)
        write(f"[{name}] {line}")

    return progress


@pytest.hookimpl(tryfirst=True)  # first: ids read endpoint-case, box2-reasoning-ctx3333
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Give a measuring test one session-scoped parameter per endpoint, grouped for xdist."""
    states = metafunc.config.stash.get(FLEET, None)
    if not states or "specperf_endpoint" not in metafunc.fixturenames:
        return
    metafunc.parametrize(
        "specperf_endpoint",
        [pytest.param(name, id=name, marks=pytest.mark.xdist_group(name)) for name in states],
        indirect=True, scope="session")


@pytest.hookimpl(wrapper=True)  # after every other plugin (and -m, -k) has chosen the items
def pytest_collection_modifyitems(config: pytest.Config,
                                  items: list[pytest.Item]) -> Generator[None, None, None]:
    """Tag each fleet item with its endpoint, note what each endpoint judges, and keep each
    endpoint's items together (its session, and lock, is then opened once per worker)."""
    yield
    states = config.stash.get(FLEET, None)
    if not states:
        return
    order = {name: i for i, name in enumerate(states)}
    for item in items:
        name = _endpoint_of(item)
        if name is not None:
            item.user_properties.append(("specperf_endpoint", name))
    items.sort(key=lambda item: order.get(_endpoint_of(item) or "", -1))
    for name, state in states.items():
        state.judged = _judged_for(items, name)


def _endpoint_of(item: pytest.Item) -> str | None:
    params: dict[str, Any] = getattr(getattr(item, "callspec", None), "params", {})
    name = params.get("specperf_endpoint")
    return name if isinstance(name, str) else None


def _judged_for(items: list[pytest.Item], name: str) -> Judged:
    return Judged(
        tuple(c for item in items if _endpoint_of(item) == name
              for c in _cases(item, "measurement", "perf_case")),
        tuple(c for item in items if _endpoint_of(item) == name
              for c in _cases(item, "class_measurements", "text_class")))


def _cases(item: pytest.Item, fixture: str, param: str) -> list[Any]:
    names = getattr(item, "fixturenames", ())
    params: dict[str, Any] = getattr(getattr(item, "callspec", None), "params", {})
    if "specperf" in names and fixture in names and param in params:
        return [params[param]]
    return []


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Release every endpoint's lock this process still holds (normally already released)."""
    for state in (session.config.stash.get(FLEET, None) or {}).values():
        state.close_session()
