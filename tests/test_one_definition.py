"""Each concept is defined once (issue "each concept once"), and its callers agree.

/metrics parsed by one function with one error; ``baseline_version`` parsed at startup with
one accessor; the run's baseline loaded once, by RunState, also for the report of an xdist
controller that never loaded one; one GPU lock path; one tolerance computation (asking it
starts no session) and one tolerance check; Settings defaults written once, in OPTIONS.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from specperf.baselines import preflight
from specperf.baselines.store import Baseline, BaselineStore, CaseBaseline
from specperf.core.errors import BaselineError, ConfigError, MalformedResponse
from specperf.core.limits import DEFAULT_TOLERANCES
from specperf.core.model import ContextFit
from specperf.core.stats import Summary
from specperf.measure import lock as gpulock
from specperf.measure import paths
from specperf.measure.session import PerfSession
from specperf.plan.workload import Case, load_text_classes
from specperf.plugin.fixtures import _marker_tolerances
from specperf.plugin.runstate import RunState
from specperf.plugin.xdistcontroller import XdistController
from specperf.servers import acceptance
from specperf.settings.config import Settings, resolve
from specperf.settings.options import OPTIONS

# -- 1. /metrics: one parser, one error -------------------------------------------------------
SUMS = """\
# TYPE sglang:e2e_request_latency_seconds histogram
sglang:e2e_request_latency_seconds_bucket{le="+Inf",model_name="m"} 3.0
sglang:e2e_request_latency_seconds_sum{model_name="m"} {e2e}
sglang:e2e_request_latency_seconds_count{model_name="m"} 3.0
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_sum{model_name="m"} {ttft}
sglang:num_requests_total{model_name="m"} 3.0
"""


def _sums(e2e: str, ttft: str) -> str:
    return SUMS.replace("{e2e}", e2e).replace("{ttft}", ttft)


def test_the_paths_read_histogram_sums_through_the_one_parser():
    assert paths.histogram_deltas(_sums("10.0", "1.0"), _sums("14.0", "1.5")) == (4.0, 0.5)
    assert paths.histogram_deltas(_sums("10.0", "1.0"), "sglang:num_requests_total 4\n") is None


@pytest.mark.parametrize("read", [
    acceptance.parse_metrics,  # the probe, the traffic guard, the metrics acceptance source
    lambda text: paths.histogram_deltas(text, text),  # the paths' server timings
], ids=["counters", "histogram-sums"])
def test_a_malformed_exposition_is_one_endpoint_error_sentence_for_every_caller(read):
    # Junk in a series each caller reads: the same MalformedResponse, never a silent None.
    junk = _sums("ten", "1.0").replace('num_requests_total{model_name="m"}',
                                       'num_requests_total{model_name="m}')
    with pytest.raises(MalformedResponse) as err:
        read(junk)
    assert str(err.value).startswith("/metrics is not valid Prometheus text (")
    assert str(err.value).endswith("): fix the server's metrics exposition, or point "
                                   "--endpoint at the server itself rather than something in "
                                   "front of it.")


# -- 2. baseline_version: parsed at startup, one accessor -------------------------------------
@pytest.mark.parametrize(("cli", "env", "ini", "message"), [
    ({"baseline_version": "v2"}, {}, {},
     "--specperf-baseline-version = 'v2' is not valid: expected a positive integer or 'latest'."),
    ({}, {"SPECPERF_BASELINE_VERSION": "0"}, {},
     "SPECPERF_BASELINE_VERSION = '0' is not valid: expected a positive integer or 'latest'."),
    ({}, {}, {"baseline_version": "newest"},
     "ini specperf_baseline_version = 'newest' is not valid: expected a positive integer or "
     "'latest'."),
])
def test_a_bad_baseline_version_is_a_config_error_naming_its_source(cli, env, ini, message):
    with pytest.raises(ConfigError) as err:
        resolve(cli, env, ini)
    assert str(err.value) == message


def test_a_bad_baseline_version_typed_by_its_old_name_names_that_name():
    with pytest.raises(ConfigError) as err:
        resolve({"baseline_version": "v2"}, {}, {}, {"baseline_version": "--baseline-version"})
    assert str(err.value) == ("--baseline-version = 'v2' is not valid: expected a positive "
                              "integer or 'latest'.")


def test_the_baseline_version_accessor():
    assert resolve({}, {}, {}).baseline_version_number is None
    assert resolve({"baseline_version": "latest"}, {}, {}).baseline_version_number is None
    assert resolve({"baseline_version": "2"}, {}, {}).baseline_version_number == 2


# -- 3. the baseline: loaded once, by RunState --------------------------------------------------
def _case(context: int, **tolerances: float) -> CaseBaseline:
    metrics = {"tok_s": Summary(50.0, 0.4, 5), "avg_commit": Summary(7.0, 0.05, 5),
               "step_ms": Summary(140.0, 1.0, 5)}
    return CaseBaseline("padding", context, 600, metrics, dict(tolerances))


def _write(root: Path, deployment: str, version_tolerance: float) -> Path:
    """One baseline version; its file tolerance (slope) tells the versions apart."""
    base = Baseline(
        deployment=deployment, version=0, created="2026-11-29T00:00:00Z", suite_version="0",
        git_revision="abc", fingerprint={"sim_profile": "x"}, provenance="test",
        simulated=True, cases={c.id: c for c in (_case(13, step_ms=0.2), _case(1663))},
        fits={"padding": ContextFit(30.0, 0.02, 1.5, 4)},
        tolerances={"slope": version_tolerance, "tok_s": 0.12})
    return BaselineStore(root).write_next(base)


@pytest.fixture
def no_session(monkeypatch):
    """Fail loudly if anything starts a session, probes, launches the simulator or locks."""
    def refuse(*args: object, **kwargs: object) -> Any:
        raise AssertionError("this must not start a session, probe or take the GPU lock")

    monkeypatch.setattr(PerfSession, "start", refuse)
    monkeypatch.setattr(gpulock.GpuLock, "acquire", refuse)
    monkeypatch.setattr("specperf.servers.simulated.embedded", refuse)
    monkeypatch.setattr("specperf.baselines.preflight.identify", refuse)


def _state(tmp_path: Path, **settings: Any) -> RunState:
    return RunState(Settings(baseline_dir=tmp_path / "b", **settings), load_text_classes())


def test_an_xdist_controller_reports_the_baseline_its_workers_were_judged_against(
        tmp_path, monkeypatch, no_session):
    _write(tmp_path / "b", "sim-box", 0.2)
    _write(tmp_path / "b", "sim-box", 0.3)
    loads: list[tuple[str, int | None]] = []
    real_load = BaselineStore.load
    monkeypatch.setattr(BaselineStore, "load", lambda self, d, v=None: loads.append((d, v))
                        or real_load(self, d, v))
    server = {"simulated": True, "fingerprint": {"sim_profile": "box"}}  # a worker's report
    controller = _state(tmp_path, baseline_version=1)
    base = controller.reported_baseline(server)
    assert base is not None and (base.deployment, base.version) == ("sim-box", 1)
    assert controller.reported_baseline(server) is base and loads == [("sim-box", 1)]
    assert controller.session is None  # the controller measured nothing and probed nothing
    latest = _state(tmp_path).reported_baseline(server)
    assert latest is not None and latest.version == 2
    assert _state(tmp_path).reported_baseline({}) is None  # nothing was measured
    ab = _state(tmp_path, endpoint="http://127.0.0.1:9", compare_endpoint="http://127.0.0.1:8")
    assert ab.reported_baseline(server) is None  # an A/B run compares with production


def test_require_baseline_checks_the_baseline_runstate_loaded(tmp_path, no_session):
    _write(tmp_path / "b", "box", 0.2)
    state = _state(tmp_path, deployment="box", require_baseline=True, baseline_version=1)
    state.judged = preflight.Judged((Case("padding", 13, 600), Case("code", 13, 600)))
    with pytest.raises(BaselineError, match=r"--specperf-require-baseline: baseline box v1 has no "
                                            r"code-ctx13 at 600 output tokens"):
        state._require_baseline()
    assert state.baselines.loaded["box"][0] is not None  # loaded once, kept for the verdicts


def test_one_load_serves_require_baseline_the_verdicts_and_the_tolerances(tmp_path,
                                                                          monkeypatch):
    _write(tmp_path / "b", "box", 0.2)
    server = types.SimpleNamespace(to_dict=lambda: {"fingerprint": {"sim_profile": "x"}},
                                   fingerprint={"sim_profile": "y"})

    def start(self: PerfSession) -> object:  # a probed server, without a simulator
        self.server = server  # type: ignore[assignment]
        return server

    monkeypatch.setattr(PerfSession, "start", start)
    loads: list[str] = []
    real_load = BaselineStore.load
    monkeypatch.setattr(BaselineStore, "load", lambda self, d, v=None: loads.append(d)
                        or real_load(self, d, v))
    state = _state(tmp_path, deployment="box", require_baseline=True)
    state.judged = preflight.Judged((Case("padding", 13, 600),))
    state.started_session()
    state.started_session()  # idempotent: --require-baseline's check reuses the loaded file
    case = Case("padding", 13, 600)
    assert state.tolerances_for(case, {})["step_ms"] == 0.2
    assert isinstance(state.baseline_case(case), CaseBaseline)
    assert state.fingerprint_notes  # compared with the probed server's fingerprint
    assert state.reported_baseline({}) is state.baseline() and loads == ["box"]


# -- 4. the GPU lock path --------------------------------------------------------------------
@pytest.mark.parametrize("gpu_lock", [None, Path("/shared/locks/box.lock")])
def test_the_session_and_the_xdist_controller_lock_one_path(tmp_path, monkeypatch, gpu_lock):
    monkeypatch.setenv(gpulock.LOCK_DIR_ENV, str(tmp_path / "locks"))
    settings = Settings(endpoint="http://127.0.0.1:30000", gpu_lock=gpu_lock)
    taken: list[Path] = []

    class Recording:
        def __init__(self, path: Path, **kwargs: object) -> None:
            taken.append(path)

        def acquire(self) -> float:
            return 0.0

    monkeypatch.setattr("specperf.plugin.xdistcontroller.GpuLock", Recording)
    controller = XdistController(types.SimpleNamespace(), settings)  # type: ignore[arg-type]
    controller.pytest_sessionstart(None)  # type: ignore[arg-type]
    want = gpu_lock or gpulock.lock_path_for("http://127.0.0.1:30000")
    assert taken == [want] and PerfSession(settings).lock_path() == want
    assert gpulock.lock_path(settings) == want


# -- 5. tolerances: computed once, checked once, asking starts nothing --------------------------
def test_asking_a_cases_tolerance_starts_no_session_and_layers_every_source(tmp_path,
                                                                           no_session):
    state = _state(tmp_path, deployment="box",
                   tolerances={"tok_s": 0.05, "avg_commit": 0.2, "step_ms": 0.3})
    _write(tmp_path / "b", "box", 0.25)  # file: slope 0.25, tok_s 0.12; case 13: step_ms 0.2
    got = state.tolerances_for(Case("padding", 13, 600), {"avg_commit": 0.07})
    assert got == {**DEFAULT_TOLERANCES,
                   "tok_s": 0.12,        # the file beats the setting
                   "step_ms": 0.2,       # the case's entry beats the setting and the file
                   "avg_commit": 0.07,   # the marker beats everything
                   "slope": 0.25}
    assert state.tolerances_for(None, {})["slope"] == 0.25  # a class's fit: no case layer
    assert state.tolerances_for(Case("padding", 1663, 600), {})["step_ms"] == 0.3
    assert state.session is None


def test_a_simulated_runs_tolerance_names_its_baseline_without_a_simulator(tmp_path,
                                                                          no_session):
    state = _state(tmp_path, tolerances={"slope": 0.4})
    assert state.tolerances_for(Case("padding", 13, 600), {}) == {**DEFAULT_TOLERANCES,
                                                                   "slope": 0.4}
    assert state.session is None


def _request(*markers: Mapping[str, object]) -> Any:
    node = types.SimpleNamespace(
        nodeid="perf/test_x.py::test_case[padding-ctx13]",
        iter_markers=lambda name: [types.SimpleNamespace(kwargs=dict(m)) for m in markers])
    return types.SimpleNamespace(node=node)


def test_tolerance_markers_closest_wins_and_a_bad_one_names_the_test():
    # iter_markers yields the closest first (function, class, module)
    assert _marker_tolerances(_request({"step_ms": 0.2}, {"step_ms": 0.3, "tok_s": 0.05})) == {
        "step_ms": 0.2, "tok_s": 0.05}
    with pytest.raises(ConfigError) as err:
        _marker_tolerances(_request({"tok": 0.1}))
    assert str(err.value) == (
        "perf/test_x.py::test_case[padding-ctx13]: tolerance(tok=0.1) names no tolerance: "
        "expected one of avg_commit, decode_tok_s, slope, step_ms, tok_s, ttft_ms as "
        "'tolerance(metric=fraction)', e.g. tolerance(step_ms=0.15).")
    with pytest.raises(ConfigError, match=r"tolerance\(step_ms=15\) is not valid"):
        _marker_tolerances(_request({"step_ms": 15}))


# -- 7. Settings defaults: written once, in OPTIONS ---------------------------------------------
def test_settings_has_one_field_per_option_and_its_defaults_are_the_tables():
    assert [f.name for f in fields(Settings) if f.name != "sources"] == [o.name for o in OPTIONS]
    assert Settings() == resolve({}, {}, {})
    for opt in OPTIONS:
        want = None if opt.default is None else opt.parse(opt.default)
        assert getattr(Settings(), opt.name) == want, opt.name


def _conforms(value: object, hint: Any) -> bool:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_conforms(value, a) for a in args)
    if origin is typing.Literal:
        return value in args
    if origin is tuple:
        return isinstance(value, tuple) and all(_conforms(v, args[0]) for v in value)
    if origin is Mapping or origin is dict:
        return isinstance(value, Mapping) and all(
            _conforms(k, args[0]) and _conforms(v, args[1]) for k, v in value.items())
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, hint)


def test_every_default_from_the_table_has_its_fields_type():
    hints = typing.get_type_hints(Settings)
    defaults = Settings()
    wrong = {f.name: getattr(defaults, f.name) for f in fields(Settings)
             if f.name != "sources" and not _conforms(getattr(defaults, f.name), hints[f.name])}
    assert not wrong
    assert Settings().tolerances is not Settings().tolerances  # each its own mapping
    assert hash(Settings()) == hash(resolve({}, {}, {"tolerances": "step_ms=0.2"}))
