"""The fixtures perf cases use. Thin: the work is in session, measure, baseline and verdict.

Scopes: the session (simulator, lock, probe, baseline) once per pytest session; a case's
measurement per test. Infrastructure problems raise :class:`SpecperfError` from fixtures,
so pytest reports them as *errors*; regressions are ``pytest.fail`` in the test body.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace

import pytest

from ..baselines.store import Baseline, CaseBaseline
from ..core.contract import UNDETERMINED
from ..core.errors import BaselineError, SpecperfError, UnmeasuredComparison
from ..core.limits import NOT_APPLICABLE, SKIP_NOT_APPLICABLE, SKIP_PROPERTY, check_tolerance
from ..core.verdict import NotJudged, Verdict
from ..judge.pathverdict import (
    COMPARISONS,
    UNMEASURED,
    judge_chat_stream,
    judge_parser,
    judge_stream,
    more_rounds,
)
from ..measure.paths import PathRun, PathSampler, deployed_parsers, parser_pair, stream_pair
from ..measure.sample import Measurement
from ..measure.session import PerfSession
from ..plan.workload import Case, TextClass
from ..settings.config import Settings
from ..settings.endpoints import Endpoint
from ..settings.hints import rerun_command
from .conclude import conclude, not_judged, record
from .runstate import RunState

STATE = pytest.StashKey[RunState]()
# A fleet run (specperf.fleet.plugin): one RunState per endpoint name, and each one's GPU
# lock lines.
FLEET = pytest.StashKey[dict[str, RunState]]()
LOCK_LINES = pytest.StashKey[dict[str, list[str]]]()


@dataclass(frozen=True)
class FleetRequest:
    """What this plugin resolved for a fleet run; the fleet plugin builds the run from it."""

    settings: Settings
    endpoints: tuple[Endpoint, ...]
    classes: dict[str, TextClass]


FLEET_REQUEST = pytest.StashKey[FleetRequest]()


def _state(config: pytest.Config) -> RunState:
    return config.stash[STATE]


def state_for(config: pytest.Config, endpoint: str | None) -> RunState:
    """The run state of one endpoint of a fleet; the run's own one outside a fleet."""
    return config.stash[STATE] if endpoint is None else config.stash[FLEET][endpoint]


def state_of(request: pytest.FixtureRequest) -> RunState:
    """The run state of the endpoint a test measures (see ``specperf_endpoint``)."""
    return state_for(request.config, request.getfixturevalue("specperf_endpoint"))


@pytest.fixture(scope="session")
def specperf_endpoint(request: pytest.FixtureRequest) -> str | None:
    """The fleet endpoint a test measures (a session-scoped parameter), None outside a fleet."""
    name: str | None = getattr(request, "param", None)
    return name


@pytest.fixture(scope="session")
def specperf_settings(pytestconfig: pytest.Config) -> Settings:
    """The resolved settings of this run."""
    return _state(pytestconfig).settings


@pytest.fixture(scope="session")
def specperf_session(pytestconfig: pytest.Config,
                     specperf_endpoint: str | None) -> Iterator[PerfSession]:
    """The started measuring session (embedded simulator if no endpoint), closed at the end.

    In a fleet, one per endpoint: pytest closes it (releasing that endpoint's GPU lock) when
    the worker moves on to another endpoint's cases or ends.
    """
    state = state_for(pytestconfig, specperf_endpoint)
    try:
        yield state.started_session()
    finally:
        state.close_session()


@pytest.fixture(scope="session")
def specperf_baseline(pytestconfig: pytest.Config, specperf_endpoint: str | None,
                      specperf_session: PerfSession) -> Baseline | None:
    """The baseline this run compares with, or None when there is none yet."""
    return state_for(pytestconfig, specperf_endpoint).baseline()


@pytest.fixture
def measurement(request: pytest.FixtureRequest, perf_case: Case,
                specperf_session: PerfSession) -> Measurement:
    """The case's measurement (taken once per session, adaptive repeats near a limit)."""
    state = state_of(request)
    tolerances = state.tolerances_for(perf_case, _marker_tolerances(request))
    measured = _measure(request, state, perf_case, tolerances)
    request.node.user_properties.append(
        ("specperf_measurement", json.dumps(measured.to_dict(), default=str)))
    if specperf_session.server is not None:
        request.node.user_properties.append(
            ("specperf_server", json.dumps(specperf_session.server.to_dict(), default=str)))
    _lock_property(request, specperf_session)
    return measured


def _measure(request: pytest.FixtureRequest, state: RunState, case: Case,
             tolerances: Mapping[str, float]) -> Measurement:
    """``state.measure``; a case that errors ships the samples it took with its report."""
    try:
        return state.measure(case, tolerances)
    except SpecperfError:
        partial = state.partials.get(case.id)
        if partial is not None:
            request.node.user_properties.append(
                ("specperf_partial", json.dumps(partial, default=str)))
        raise


def _lock_property(request: pytest.FixtureRequest, session: PerfSession) -> None:
    """In a fleet, the endpoint's lock wait travels with the report (workers print nowhere)."""
    endpoint = request.getfixturevalue("specperf_endpoint")
    if endpoint is None:
        return
    lines = request.config.stash[LOCK_LINES].get(endpoint, [])
    request.node.user_properties.append(
        ("specperf_lock", json.dumps({"waited_s": session.lock_wait_s, "lines": lines})))


@pytest.fixture
def perf_case(request: pytest.FixtureRequest) -> Case:
    """The case of a parametrized perf test (see the plugin's generate_tests)."""
    case: Case = request.param
    return case


@pytest.fixture
def class_measurements(request: pytest.FixtureRequest, pytestconfig: pytest.Config,
                       text_class: str,
                       specperf_endpoint: str | None,
                       specperf_session: PerfSession) -> list[Measurement]:
    """Every planned context of one text class, measured (or reused) during setup."""
    state = state_for(pytestconfig, specperf_endpoint)
    return [_measure(request, state, case, state.tolerances_for(case, {}))
            for case in state.cases if case.text_class == text_class]


@pytest.fixture
def largest_context_by_class(request: pytest.FixtureRequest, pytestconfig: pytest.Config,
                             specperf_endpoint: str | None,
                             specperf_session: PerfSession) -> dict[str, Measurement]:
    """Each planned text class at the largest planned context, measured during setup."""
    state = state_for(pytestconfig, specperf_endpoint)
    context = max(state.settings.contexts)
    return {c.text_class: _measure(request, state, c, state.tolerances_for(c, {}))
            for c in state.cases if c.context == context}


@pytest.fixture
def specperf(request: pytest.FixtureRequest, specperf_session: PerfSession) -> Checks:
    """Checks a perf test runs: the baseline verdict of a case, the context fit of a class."""
    return Checks(request)


class Checks:
    """Judgements inside the test that regressed, so the failing case is the guilty one."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self.request = request
        self.state = state_of(request)

    def baseline_case(self, case: Case) -> CaseBaseline:
        found = self.state.baseline_case(case)
        if isinstance(found, NotJudged):
            if self.state.settings.require_baseline and not self.state.settings.update_baselines:
                raise BaselineError(f"--specperf-require-baseline: {found.reason}")
            not_judged(self.request, found.reason)
        return found

    def compare(self, measured: Measurement) -> None:
        """Fail with the attributed sentence when the case regressed against its baseline."""
        base = self.baseline_case(measured.case)
        verdicts = self.state.judging.judge(measured, base,
                                    _marker_tolerances(self.request))
        self._notes()
        conclude(self.request, verdicts, notes=self._fingerprint_lines(),
                 judging=not self.state.settings.update_baselines)

    def fit(self, text_class: str) -> None:
        """Compare a class's slope with the baseline's (its cases are measured in setup)."""
        verdict = self.state.judging.judge_fit(text_class, _marker_tolerances(self.request))
        if isinstance(verdict, NotJudged):
            not_judged(self.request, verdict.reason)
        self._notes()
        conclude(self.request, [verdict], notes=self._fingerprint_lines(),
                 judging=not self.state.settings.update_baselines)

    def _fingerprint_lines(self) -> list[str]:
        """A regression against a different deployment may be that difference: say so."""
        return [f"note: the server differs from the baseline's: {note}"
                for note in self.state.fingerprint_notes]

    def _notes(self) -> None:
        if self.state.fingerprint_notes:
            self.request.node.user_properties.append(
                ("specperf_fingerprint_notes", json.dumps(self.state.fingerprint_notes)))


def _marker_tolerances(request: pytest.FixtureRequest) -> dict[str, float]:
    """The test's ``tolerance`` markers, the closest winning per metric, each checked
    (core.limits.check_tolerance): a bad one is a ConfigError naming the test."""
    merged: dict[str, float] = {}
    for marker in reversed(list(request.node.iter_markers("tolerance"))):
        for key, value in marker.kwargs.items():
            merged[key] = check_tolerance(
                key, value, f"{request.node.nodeid}: tolerance({key}={value!r})",
                form="tolerance(metric=fraction)", example="tolerance(step_ms=0.15)")
    return merged


# -- parser and streaming paths (paths.py, pathverdict.py) --------------------------------------
@pytest.fixture(scope="session")
def path_sampler(specperf_session: PerfSession) -> PathSampler:
    """Interleaved samples of one case on several request paths (native, chat, streamed)."""
    assert specperf_session.client is not None
    return PathSampler(specperf_session, deployed_parsers(specperf_session.client))


def _require_parsers(request: pytest.FixtureRequest, sampler: PathSampler) -> None:
    if not sampler.parsers.any:
        # The gate reads this mark, never the skip's words (cli/runner.py).
        request.node.user_properties.append((SKIP_PROPERTY, SKIP_NOT_APPLICABLE))
        not_judged(request, f"{NOT_APPLICABLE} the server names no reasoning_parser or "
                   "tool_call_parser in /model_info: no parser runs on the chat route, so there "
                   "is nothing to gate there.")


def _decided(request: pytest.FixtureRequest, kind: str) -> Callable[[PathRun], bool]:
    """Whether the ``kind`` comparison of a path run is decided: the sampler takes more rounds
    while its verdict is undetermined (an unmeasured figure is decided: more rounds cannot
    measure it)."""
    checks = PathChecks(request)

    def decided(run: PathRun) -> bool:
        verdict = checks.verdict(kind, run)
        return verdict.status != UNDETERMINED or verdict.reason == UNMEASURED

    return decided


def _path_run(request: pytest.FixtureRequest, sampler: PathSampler, run: PathRun,
              kind: str) -> PathRun:
    request.node.user_properties.append(
        ("specperf_server", json.dumps(sampler.server.to_dict(), default=str)))
    # The paths' measurements stay in the record's paths, never among the case's own: their
    # samples are not the ones the case's verdict judged (one case id, one measurement).
    request.node.user_properties.append(("specperf_paths", json.dumps(run.to_dict(),
                                                                      default=str)))
    # A comparison the server's figures cannot make is the test's error (infrastructure),
    # decided here in its setup, never its failure (README "The verdict contract").
    checks = PathChecks(request)
    verdict = checks.verdict(kind, run)
    if verdict.reason == UNMEASURED:
        checks.record(verdict)
        raise UnmeasuredComparison(verdict.message)
    return run


def _path_case(request: pytest.FixtureRequest, case: Case) -> Case:
    """The case as its paths decode it: at --specperf-path-output-tokens when set."""
    length = state_of(request).settings.path_output_tokens
    return case if length is None else replace(case, output_tokens=length)


@pytest.fixture
def parser_paths(request: pytest.FixtureRequest, perf_case: Case,
                 path_sampler: PathSampler) -> PathRun:
    """The case on the native route and the chat route with the parsers, interleaved."""
    _require_parsers(request, path_sampler)
    pair = parser_pair(path_sampler.server.api, path_sampler.parsers)
    return _path_run(request, path_sampler, path_sampler.measure_once(
        _path_case(request, perf_case), pair, _decided(request, "parser")), "parser")


@pytest.fixture
def chat_stream_paths(request: pytest.FixtureRequest, perf_case: Case,
                      path_sampler: PathSampler) -> PathRun:
    """The case streamed on the native route and on the chat route with the parsers."""
    _require_parsers(request, path_sampler)
    pair = parser_pair(path_sampler.server.api, path_sampler.parsers, stream=True)
    return _path_run(request, path_sampler, path_sampler.measure_once(
        _path_case(request, perf_case), pair, _decided(request, "chat_stream")), "chat_stream")


@pytest.fixture
def stream_paths(request: pytest.FixtureRequest, perf_case: Case,
                 path_sampler: PathSampler) -> PathRun:
    """The case on the native route, unstreamed and streamed, interleaved."""
    pair = stream_pair(path_sampler.server.api)
    return _path_run(request, path_sampler, path_sampler.measure_once(
        _path_case(request, perf_case), pair, _decided(request, "stream")), "stream")


@pytest.fixture
def specperf_paths(request: pytest.FixtureRequest, specperf_session: PerfSession) -> PathChecks:
    """Judgements between the paths of a case: chat vs native, stream vs non-stream."""
    return PathChecks(request)


class PathChecks:
    """Path verdicts inside the test that measured them; recorded like baseline verdicts."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self.request = request
        self.state = state_of(request)

    def parser(self, run: PathRun) -> None:
        """Chat route with parsers vs native route: tok/s and step time within tolerance."""
        self._conclude(self.verdict("parser", run))

    def chat_stream(self, run: PathRun) -> None:
        """Chat stream with parsers vs native stream on the same transport."""
        self._conclude(self.verdict("chat_stream", run))

    def stream(self, run: PathRun) -> None:
        """Stream vs non-stream: the server's decode must not slow; transport is labelled."""
        self._conclude(self.verdict("stream", run))

    def verdict(self, kind: str, run: PathRun) -> Verdict:
        """The comparison ``kind`` ("parser", "chat_stream", "stream") of ``run``'s paths; at
        --specperf-path-output-tokens its sentence starts with the length it compared at."""
        found = self._judged(kind, run)
        if self.state.settings.path_output_tokens is None or not found.message:
            return found
        return replace(found, message=f"at {run.case.output_tokens} output tokens: "
                                      f"{found.message}")

    def _judged(self, kind: str, run: PathRun) -> Verdict:
        first, second = (run.figures(p.name) for p in run.paths)
        tolerances, advice = self._tolerances(run), self._advice(kind, run)
        if kind == "parser":
            return judge_parser(f"{run.case.id}{COMPARISONS[0]}", first, second, run.parsers,
                                tolerances, run.case.output_tokens, advice=advice)
        if kind == "chat_stream":
            return judge_chat_stream(f"{run.case.id}{COMPARISONS[1]}", first, second,
                                     run.parsers, tolerances, run.case.output_tokens,
                                     advice=advice)
        return judge_stream(f"{run.case.id}{COMPARISONS[2]}", first, second, tolerances,
                            advice=advice)

    def _advice(self, kind: str, run: PathRun) -> str:
        """What decides an undetermined comparison: more rounds than this run allowed, on its
        own server and flags, for the test that measured it."""
        settings = self.state.settings
        rounds = min(len(m.measured) for m in run.measurements.values())
        marker = "parser" if kind == "parser" else "streaming"
        return more_rounds(rounds, settings.max_repeats,
                           lambda *a: rerun_command(settings, *a, marker=marker))

    def record(self, verdict: Verdict) -> None:
        record(self.request, [verdict])

    def _tolerances(self, run: PathRun) -> dict[str, float]:
        return self.state.tolerances_for(run.case, _marker_tolerances(self.request))

    def _conclude(self, verdict: Verdict) -> None:
        # A comparison that could not be measured is never a pass: conclude fails it.
        conclude(self.request, [verdict])
