"""Pytest wiring of a fleet run (fleet.py); ``plugin.py`` calls these from its hooks.

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

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from ..baselines.preflight import Judged
from ..core.errors import ConfigError
from ..plan.workload import TextClass
from ..plugin.fixtures import FLEET, LOCK_LINES
from ..plugin.reporting import HtmlHooks
from ..plugin.runstate import RunState
from ..settings.config import Settings
from .endpoints import Endpoint, check_combination, endpoint_settings, from_flags, load_endpoints
from .record import FLEET_COLLECTOR, FleetCollector

Write = Callable[[str], None]
_DISTS_OK = ("no", "load", "loadgroup")


def split_endpoint_flags(values: Sequence[str] | None) -> tuple[str | None, list[str]]:
    """``--endpoint`` given once as a URL keeps today's meaning; more, or NAME=URL, is a fleet."""
    flags = list(values or [])
    if len(flags) == 1 and "=" not in flags[0]:
        return flags[0], []
    return None, flags


def endpoints(settings: Settings, flags: Sequence[str]) -> tuple[Endpoint, ...]:
    """The fleet this run measures; empty when it measures one endpoint."""
    if settings.endpoints is not None and flags:
        raise ConfigError("a fleet is given either by --endpoints FILE or by --endpoint "
                          "NAME=URL more than once, not both: put every endpoint in the file.")
    if settings.endpoints is not None:
        return load_endpoints(settings.endpoints)
    return from_flags(flags) if flags else ()


def configure(config: pytest.Config, settings: Settings, found: tuple[Endpoint, ...],
              classes: dict[str, TextClass], tolerances: Mapping[str, float],
              write: Write) -> RunState:
    """Set up one RunState per endpoint and the controller's collector; returns the first."""
    check_combination(settings)
    _check_dist(config, [ep.name for ep in found])
    lines: dict[str, list[str]] = {ep.name: [] for ep in found}
    source = (f"endpoints file {settings.endpoints}" if settings.endpoints is not None
              else "--endpoint")
    states = {ep.name: RunState(endpoint_settings(settings, ep, f"{source} ({ep.name})"),
                                classes, tolerances, progress=_progress(write, ep.name, lines),
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


def parametrize(metafunc: pytest.Metafunc) -> None:
    """Give a measuring test one session-scoped parameter per endpoint, grouped for xdist."""
    states = metafunc.config.stash.get(FLEET, None)
    if not states or "specperf_endpoint" not in metafunc.fixturenames:
        return
    metafunc.parametrize(
        "specperf_endpoint",
        [pytest.param(name, id=name, marks=pytest.mark.xdist_group(name)) for name in states],
        indirect=True, scope="session")


def modify_items(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tag each fleet item with its endpoint, note what each endpoint judges, and keep each
    endpoint's items together (its session, and lock, is then opened once per worker)."""
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


def close(config: pytest.Config) -> None:
    """Release every endpoint's lock this process still holds (normally already released)."""
    for state in (config.stash.get(FLEET, None) or {}).values():
        state.close_session()


def active(config: pytest.Config) -> bool:
    return bool(config.stash.get(FLEET, None))
