"""The sweep-level test inside a run: gather the cases, take top-ups, judge, record.

Pytest-free (the fixture in :mod:`specperf.plugin.sweepfixtures` and the benchmarks call it). The
cases are the run's own measurements: a case this process has measured is reused; one it
has not (another pytest-xdist worker measured it) is measured here, as the context-fit test
does. Top-ups are requests like any other: one more sample of a case through the same
measuring loop (guards, validation, acceptance source), a pair in A/B mode. They are kept
in the sweep's record, not added to the case's measurement, so a case's verdict and its row
in the table stay what its own test judged.
"""

from __future__ import annotations

from collections.abc import Sequence
from weakref import WeakKeyDictionary

from ..baselines.store import CaseBaseline
from ..core.verdict import NotJudged
from ..judge.exact import ExactStatus
from ..judge.sweep.factor import CaseData
from ..judge.sweep.pooled import More, judge_sweep
from ..judge.sweep.verdict import SweepResult
from ..measure.sample import METRICS, Sample, sample_values
from ..plan.workload import Case, case_at
from .runstate import RunState

TOP_UPS_PER_CASE = 4  # the sweep test's budget: at most this many extra requests per case
# ... but never less than 128 per sweep: the precision a test needs is a total over its
# cases, so a small subset (the gate's 4 cases against its same-night reference) needs more
# requests per case to catch a 5 % step-time rise 95 % of the time (benchmarks/sweep_power.py,
# docs/benchmarks.md). A sweep without a change seldom takes any (the SPRT rules it out
# first), and a nightly one stops where the run-to-run noise leaves requests nothing to decide.
MIN_TOP_UPS = 128
# Sweeps judged during their test's setup (:func:`prepare`), taken by the test body's
# :func:`judge`: a case or a top-up that errors is then the test's error, not its failure.
_PREPARED: WeakKeyDictionary[RunState, dict[tuple[str, tuple[str, ...]],
                                            SweepResult | NotJudged]] = WeakKeyDictionary()


def budget(cases: int, per_case: int = TOP_UPS_PER_CASE) -> int:
    """The extra requests a sweep of ``cases`` cases may take (docs/benchmarks.md §6)."""
    return max(per_case * cases, MIN_TOP_UPS)


def gather(state: RunState, cases: Sequence[Case]) -> list[CaseData] | NotJudged:
    """Every case's requests and baseline; the reason instead when one has no baseline."""
    out = []
    for case in cases:
        measured = state.measure(case, state.tolerances_for(case, {}))
        base = state.baseline_case(case)
        if not isinstance(base, CaseBaseline):
            return base
        reference = state.comparison.references.get(case.id) if state.comparison else None
        spent = list(measured.measured) + list(reference.measured if reference else ())
        cost = sum(s.wall_s for s in spent) / max(1, len(measured.measured))
        run = sample_values(measured.measured)
        settled = False
        if state.judging.acceptance_pinned():  # synthetic acceptance: step time is the only factor
            run.pop("avg_commit", None)
            run.pop("tok_s", None)  # tok/s = avg commit / step time: synthetic too
        elif state.comparison is None and \
                state.prompts.compare_exact(measured, base).status == ExactStatus.UNCHANGED:
            # Every re-sent prompt took the baseline's verify steps: acceptance did not move,
            # and two medians over other draws of the same prompts must not say it did.
            settled = run.pop("avg_commit", None) is not None
        out.append(CaseData(case, run, dict(base.metrics),
                            None if reference is None else sample_values(reference.measured),
                            cost, base_requests=dict(base.values) or None,
                            acceptance_settled=settled))
    return out


def top_up(state: RunState) -> More:
    """One more request of a case (a candidate–production pair in A/B mode)."""
    session = state.started_session()

    def more(data: CaseData) -> None:
        assert session.measurer is not None
        repeat = max((len(v) for v in data.run.values()), default=0)
        if state.comparison is not None:
            production = state.comparison.production.measurer
            assert production is not None
            _append(data.run, session.measurer.sample(data.case, repeat, warmup=False))
            _append(data.base_values or {}, production.sample(data.case, repeat, warmup=False))
            return
        with session.case_lock():
            _append(data.run, session.measurer.sample(data.case, repeat, warmup=False))

    return more


def _append(values: dict[str, list[float]], sample: Sample) -> None:
    for metric in METRICS:
        value = sample.metric(metric)
        if value is not None and metric in values:
            values[metric].append(value)


def chosen_cases(state: RunState, cases: Sequence[tuple[str, int]] | None) -> list[Case]:
    """The cases a sweep judges: ``cases`` at the run's output lengths, or the planned matrix."""
    s = state.settings
    return state.cases if cases is None else [case_at(c, int(x), s.output_tokens,
                                                      s.case_output_tokens) for c, x in cases]


def prepare(state: RunState, cases: Sequence[Case], label: str) -> None:
    """Measure and judge the sweep ahead of its test body (in the fixture's setup), so a
    SpecperfError of a case or of a top-up makes the test a pytest error with its sentence.

    A baseline-writing run judges nothing: its cases are only measured (their errors too).
    """
    if state.settings.update_baselines:
        for case in cases:
            state.measure(case, state.tolerances_for(case, {}))
        return
    _PREPARED.setdefault(state, {})[_key(cases, label)] = _judge(state, cases, label)


def _key(cases: Sequence[Case], label: str) -> tuple[str, tuple[str, ...]]:
    return label, tuple(c.id for c in cases)


def judge(state: RunState, cases: Sequence[Case], label: str) -> SweepResult | NotJudged:
    """The sweep test of ``cases``, with sequential top-ups; a reason when it cannot run.

    The result :func:`prepare` computed during setup when there is one.
    """
    prepared = _PREPARED.get(state, {}).pop(_key(cases, label), None)
    return prepared if prepared is not None else _judge(state, cases, label)


def _judge(state: RunState, cases: Sequence[Case], label: str) -> SweepResult | NotJudged:
    data = gather(state, cases)
    if isinstance(data, NotJudged):
        return data
    if len(data) < 2:
        return NotJudged(f"the {label} has {len(data)} case: a sweep-level test needs at least "
                         f"two.")
    result = judge_sweep(data, label, top_up(state), budget(len(data)),
                         tolerance=state.settings.sweep_tolerance,
                         effect=state.settings.sweep_effect, noise=state.noise(),
                         base_runs=state.base_runs())
    return result
