"""The concurrency_scaling test's fixtures and its end-of-run baseline (perf_tests/
test_concurrency.py); the work is in measure/burst.py, judge/concurrency.py and
baselines/concurrency.py.

One :class:`BurstRun` per run (in ``config.stash``) measures each level once, keeps what
the levels measured for the batch fit, and with ``--specperf-update-baselines`` writes the next
concurrency baseline at session end (:class:`BurstPlugin`, registered by the plugin). An update
judges first, as the main baselines' does (plugin/updatecheck.py): a level or fit that regressed
writes nothing unless ``--specperf-accept`` accepts it, and the version carries its lineage.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

import pytest

from ..baselines.concurrency import ConcurrencyBaseline, ConcurrencyStore
from ..baselines.store import CaseBaseline
from ..core.errors import BaselineError, ConfigError, SpecperfError
from ..core.fingerprint import fingerprint_differences
from ..core.verdict import NotJudged, Verdict
from ..core.version import __version__
from ..judge.concurrency import judge_batch_fit, judge_level
from ..measure.burst import Burst, Burster, Level, batch_fit
from ..measure.session import PerfSession, git_revision
from ..plan.workload import Case
from ..record import runkind
from ..settings.config import Settings
from ..settings.hints import accept_command, rerun_command, update_command
from ..views import summary
from . import updatecheck
from .conclude import conclude, not_judged
from .fixtures import STATE, _marker_tolerances
from .runstate import RunState

BURSTS = pytest.StashKey["BurstRun"]()
MARKER = "concurrency_scaling"


def level_case(settings: Settings) -> Case:
    """The one case the concurrency levels burst (--specperf-concurrency-class, -context)."""
    return Case(settings.concurrency_class,
                settings.concurrency_context or min(settings.contexts), settings.output_tokens)


def scope(settings: Settings, measured: Mapping[str, Mapping[str, Any]]) -> str:
    """What a concurrency run measured, for its kind: 'levels 1,2,4 of reasoning-ctx13' (the
    recorded levels, Level.to_dict by id; the planned ones when none was measured)."""
    levels = sorted({int(d["concurrency"]) for d in measured.values()}) \
        or list(settings.concurrency_levels)
    cases = {str(d["case"]["id"]) for d in measured.values()}
    return runkind.concurrency_scope(levels, cases.pop() if len(cases) == 1
                                     else level_case(settings).id)


class BurstRun:
    """The run's concurrency levels: measured once each, judged, written as a baseline."""

    def __init__(self, state: RunState) -> None:
        self.state = state
        self.case = level_case(state.settings)
        self.levels: dict[int, Level] = {}
        self.errors: dict[int, SpecperfError] = {}
        self.verdicts: list[Verdict] = []  # an updating run's, against the current version
        self.ran = False
        self._baseline: ConcurrencyBaseline | None | bool = False  # False: not read yet

    def measure(self, concurrency: int, on_burst: Any) -> Level:
        """The level, measured on first use (its error remembered and raised again)."""
        self.ran = True
        if concurrency in self.levels:
            return self.levels[concurrency]
        if concurrency in self.errors:
            raise self.errors[concurrency]
        if self.case.text_class not in self.state.classes:
            raise ConfigError(f"--specperf-concurrency-class {self.case.text_class!r} is not a "
                              f"text class (known: {', '.join(sorted(self.state.classes))}).")
        try:
            session = self.state.started_session()
            assert session.measurer is not None
            self.state.prompt_plan()
            s = self.state.settings
            level = Burster(session.measurer, on_burst).level(
                self.case, concurrency, repeats=s.repeats, warmup=s.warmup)
        except SpecperfError as exc:
            self.errors[concurrency] = exc
            raise
        self.levels[concurrency] = level
        return level

    def baseline(self) -> ConcurrencyBaseline | None:
        if self._baseline is False:
            store = ConcurrencyStore(self.state.settings.baseline_dir)
            self._baseline = store.load(self.state.deployment())
        assert not isinstance(self._baseline, bool)
        return self._baseline

    def baseline_record(self) -> dict[str, Any] | None:
        """The concurrency baseline the levels are compared with, for the record (identity,
        path, case, levels, fingerprint differences, why not judged); None without one."""
        base = self.baseline()
        if base is None:
            return None
        store = ConcurrencyStore(self.state.settings.baseline_dir)
        server = self.state.session.server if self.state.session is not None else None
        return {"deployment": base.deployment, "version": base.version,
                "path": str(store.path(base.deployment, base.version)),
                "created": base.created, "suite_version": base.suite_version,
                "git_revision": base.git_revision, "case": base.case,
                "levels": sorted(base.levels), "not_judged": self.not_judged(),
                "fingerprint_differences": [] if server is None else
                fingerprint_differences(base.fingerprint, server.fingerprint)}

    def not_judged(self) -> str | None:
        """Why this run's levels cannot be judged (no baseline, another case), else None."""
        base = self.baseline()
        command = update_command(self.state.settings).replace(
            "-m context_scaling", f"-m {MARKER}")
        if base is None:
            return (f"no concurrency baseline for deployment {self.state.deployment()!r} in "
                    f"{self.state.settings.baseline_dir}: create one with `{command}`.")
        wanted = {k: v for k, v in self.case.to_dict().items() if k != "id"}
        if base.case != wanted:
            return (f"concurrency baseline {base.deployment} v{base.version} bursts "
                    f"{base.case}, not {wanted}: write one for this case with `{command}`.")
        return None

    def judge(self, level: Level, marker: dict[str, float]) -> Verdict | NotJudged:
        reason = self.not_judged()
        base = self.baseline()
        if reason is not None or base is None:
            return NotJudged(reason or "")
        entry = base.levels.get(level.concurrency)
        if entry is None:
            return NotJudged(f"concurrency baseline {base.deployment} v{base.version} has no "
                             f"level C = {level.concurrency} (levels "
                             f"{', '.join(str(c) for c in sorted(base.levels))}).")
        c = self.case
        return judge_level(level.id, level.summaries(), entry,
                           self.state.tolerances_for(c, marker),
                           CaseBaseline(c.text_class, c.context, c.output_tokens, {}, {}),
                           noise=self.state.noise())

    def judge_fit(self, marker: dict[str, float]) -> Verdict | NotJudged:
        reason = self.not_judged()
        base = self.baseline()
        if reason is not None or base is None:
            return NotJudged(reason or "")
        fit = batch_fit([(c, lv.values("step_ms")) for c, lv in sorted(self.levels.items())])
        if fit is None or base.fit is None:
            return NotJudged(f"{self.case.id}: fewer than two concurrency levels with a step "
                             "time (here or in the baseline); nothing to fit.")
        slope = self.state.tolerances_for(None, marker)["slope"]
        step = self.state.tolerances_for(self.case, marker)["step_ms"]
        settings = self.state.settings
        return judge_batch_fit(self.case.id, fit, base.fit, slope, step,
                               float(max(self.levels)),
                               lambda *a: rerun_command(settings, *a, marker=MARKER))

    def update_baseline(self, clean: bool) -> list[str]:
        """Write the next concurrency baseline when every planned level was measured."""
        levels = self.state.settings.concurrency_levels
        missing = [c for c in levels if c not in self.levels]
        command = update_command(self.state.settings).replace(
            "-m context_scaling", f"-m {MARKER}")
        if not clean or missing:
            return [f"specperf: concurrency baseline NOT updated: levels "
                    f"{', '.join(str(c) for c in missing) or 'all'} errored or were not "
                    f"measured; fix them and run again: `{command}`."]
        judged = updatecheck.check(self.verdicts)
        accept = self.state.settings.accept
        if accept is None and not judged.clear:
            command = accept_command(self.state.settings, self.state.deployment()).replace(
                "-m context_scaling", f"-m {MARKER}")
            return [judged.refusal(command, "concurrency baseline")]
        session = self.state.started_session()
        assert session.server is not None
        new = ConcurrencyBaseline.from_levels(
            self.state.deployment(), session.server.fingerprint,
            {c: self.levels[c] for c in levels}, suite_version=__version__,
            git_revision=git_revision(), simulated=session.server.simulated)
        base = self.baseline()
        new = replace(new, lineage=updatecheck.lineage(
            base.version if base else None, self.verdicts, judged, accept))
        path = ConcurrencyStore(self.state.settings.baseline_dir).write_next(new)
        lines = [f"specperf: wrote concurrency baseline {path}"]
        if accept is not None and not judged.clear:
            lines.append(f"  accepted although it regressed in {judged.named()}: {accept}")
        return lines


def burst_run(config: pytest.Config) -> BurstRun:
    if BURSTS not in config.stash:
        config.stash[BURSTS] = BurstRun(config.stash[STATE])
    return config.stash[BURSTS]


class BurstPlugin:
    """Parametrizes the concurrency levels and writes the concurrency baseline at the end."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "concurrency" in metafunc.fixturenames and STATE in metafunc.config.stash:
            levels = list(metafunc.config.stash[STATE].settings.concurrency_levels)
            metafunc.parametrize("concurrency", levels, ids=[f"c{c}" for c in levels])

    @pytest.hookimpl(tryfirst=True)  # before the plugin's own sessionfinish closes the session
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        run = self.config.stash.get(BURSTS, None)
        if run is None or not run.ran or not run.state.settings.update_baselines:
            return
        if hasattr(self.config, "workerinput"):
            return
        try:
            lines = run.update_baseline(clean=not run.errors)
        except (SpecperfError, BaselineError) as exc:
            lines = [f"specperf: concurrency baseline NOT updated: {exc}"]
        summary.collected(self.config).footer.extend(lines)
        if not lines[0].startswith("specperf: wrote") and \
                session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def concurrency_level(request: pytest.FixtureRequest, concurrency: int,
                      specperf_session: PerfSession) -> Iterator[Level]:
    """The level's bursts, measured (or reused) during setup: a burst that errors makes the
    test an error, never a failure."""
    run = burst_run(request.config)
    verbose = request.config.get_verbosity() >= 1

    def shown(burst: Burst) -> None:
        if verbose:
            run.state.progress("  " + summary.burst_line(run.case.id, burst))

    level = run.measure(concurrency, shown)
    request.node.user_properties.append(
        ("specperf_concurrency", json.dumps(level.to_dict(), default=str)))
    if specperf_session.server is not None:
        request.node.user_properties.append(
            ("specperf_server", json.dumps(specperf_session.server.to_dict(), default=str)))
    yield level


@pytest.fixture
def concurrency_levels(request: pytest.FixtureRequest,
                       specperf_session: PerfSession) -> list[Level]:
    """Every planned level, measured (or reused) during setup, for the batch fit."""
    run = burst_run(request.config)
    levels = [run.measure(c, None) for c in run.state.settings.concurrency_levels]
    for level in levels:
        request.node.user_properties.append(
            ("specperf_concurrency", json.dumps(level.to_dict(), default=str)))
    return levels


@pytest.fixture
def specperf_concurrency(request: pytest.FixtureRequest,
                         specperf_session: PerfSession) -> ConcurrencyChecks:
    """Judgements of the concurrency test: a level against its baseline, the batch slope."""
    checks = ConcurrencyChecks(request)
    try:
        compared = checks.run.baseline_record()
    except BaselineError:
        compared = None  # unreadable: the judgement raises it, naming the file
    if compared is not None:
        request.node.user_properties.append(
            ("specperf_concurrency_baseline", json.dumps(compared, default=str)))
    return checks


class ConcurrencyChecks:
    """Judges inside the test that measured, so the failing level is the guilty one."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self.request = request
        self.run = burst_run(request.config)

    def compare(self, level: Level) -> None:
        """Fail with the attributed sentence when the level regressed."""
        self._conclude(self.run.judge(level, _marker_tolerances(self.request)))

    def fit(self, levels: list[Level]) -> None:
        """The slope of step time against batch size over ``levels`` (measured in setup)."""
        self._conclude(self.run.judge_fit(_marker_tolerances(self.request)))

    def _conclude(self, verdict: Verdict | NotJudged) -> None:
        if self.run.state.settings.update_baselines:
            # An update judges first (recorded, never failed here; update_baseline decides).
            if isinstance(verdict, NotJudged):
                not_judged(self.request, "a baseline-writing run judges nothing against a "
                                         "baseline.")
            self.run.verdicts.append(verdict)
            conclude(self.request, [verdict], judging=False)
            return
        if isinstance(verdict, NotJudged):
            not_judged(self.request, verdict.reason)
        self.run.state.verdicts.append(verdict)
        conclude(self.request, [verdict])
