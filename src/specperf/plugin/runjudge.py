"""A run's judging: each measured case and each text class's context fit against the stored
baseline (or production, in A/B mode), and every verdict reached, in order.

The run's state (:class:`~specperf.plugin.runstate.RunState`) measures and knows the baseline,
the tolerances and the run-to-run noise; this object asks it for them and judges.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from ..baselines.store import CaseBaseline
from ..core.fingerprint import pinned_flags
from ..core.limits import tolerance
from ..core.model import ContextFit
from ..core.verdict import NotJudged, Verdict
from ..judge import reconcile
from ..judge.fit import judge_fit
from ..judge.positions import Shape
from ..judge.verdict import judge_case
from ..measure.sample import Measurement, context_fit, mean_context
from ..settings.hints import create_hint, rerun_command

if TYPE_CHECKING:
    from ..baselines.store import Baseline
    from ..core.noise import NoiseModel
    from ..judge.ab import Comparison
    from ..measure.session import PerfSession
    from ..plan.workload import Case
    from ..settings.config import Settings
    from .prompts import RunPrompts
    from .runbaseline import RunBaseline


class JudgedRun(Protocol):
    """What judging asks of the run (plugin/runstate.py's RunState): its cases, measurements,
    baseline, tolerances and noise."""

    settings: Settings
    cases: list[Case]
    session: PerfSession | None
    comparison: Comparison | None
    baselines: RunBaseline
    prompts: RunPrompts

    def measure(self, case: Case, tolerances: Mapping[str, float]) -> Measurement: ...
    def baseline(self) -> Baseline | None: ...
    def noise(self) -> NoiseModel: ...
    def base_runs(self) -> int: ...
    def tolerances_for(self, case: Case | None,
                       marker: Mapping[str, float]) -> dict[str, float]: ...

NOTHING_TO_FIT = "{text_class}: fewer than two contexts with a step time; nothing to fit."


class RunJudge:
    """Judges one run's cases and fits; ``verdicts`` keeps each, an undetermined one too."""

    def __init__(self, run: JudgedRun) -> None:
        self.run = run
        self.verdicts: list[Verdict] = []

    def judge(self, measured: Measurement, base: CaseBaseline,
              marker: Mapping[str, float]) -> list[Verdict]:
        tolerances = self.run.tolerances_for(measured.case, marker)
        pinned = self.acceptance_pinned()
        # A synthetic acceptance is not compared, exactly or otherwise; an A/B run has no
        # baseline prompts.
        found = self.run.prompts.compare_exact(measured, base) \
            if self.run.comparison is None and not pinned else None
        verdict = judge_case(measured.case.id, measured.summaries(), base, tolerances,
                             Shape.of(s.raw for s in measured.measured), pinned=pinned,
                             noise=self.run.noise(), base_runs=self.run.base_runs(),
                             exact=str(found.status) if found is not None and found.settles
                             else "")
        if self.run.comparison is not None:
            verdict = self.run.comparison.label(verdict)
        elif found is not None:
            verdict = self.run.prompts.with_exact(found, verdict)
        if self.run.comparison is None:  # the predict-and-reconcile row, judged with the case
            stored = self.run.baseline()
            fit = stored.fits.get(measured.case.text_class) if stored is not None else None
            verdict = reconcile.attach(verdict, measured, base, fit,
                                       tolerance(tolerances, "tok_s"))
        self.verdicts.append(verdict)
        return [verdict]

    def acceptance_pinned(self) -> bool:
        """Whether the probed server's acceptance is synthetic (servers/pinned.py)."""
        server = self.run.session.server if self.run.session is not None else None
        return server is not None and pinned_flags(server.fingerprint) is not None

    def class_fit(self, text_class: str) -> ContextFit | None:
        return context_fit(self.run.measure(case, self.run.tolerances_for(case, {}))
                           for case in self.run.cases if case.text_class == text_class)

    def _far_step(self, text_class: str,
                  marker: Mapping[str, float]) -> tuple[float | None, float]:
        """The step-time tolerance of a class's farthest case and its fit context (what
        bounds how small a slope's limit may be: :func:`contract.slope_limit`)."""
        cases = [c for c in self.run.cases if c.text_class == text_class]
        if not cases:
            return None, 0.0
        far = max(cases, key=lambda c: mean_context(c.context, c.output_tokens))
        return (self.run.tolerances_for(far, marker)["step_ms"],
                mean_context(far.context, far.output_tokens))

    def _class_contexts(self, text_class: str) -> list[int]:
        return sorted({c.context for c in self.run.cases if c.text_class == text_class})

    def _rerun(self, *args: str) -> str:
        """The command an undetermined fit advises, on this run's server and baselines."""
        return rerun_command(self.run.settings, *args)

    def _fit_verdict(self, verdict: Verdict) -> Verdict:
        """Every fit verdict is kept, an undetermined one too (its test skips, saying what
        would decide: plugin/conclude.py)."""
        self.verdicts.append(verdict)
        return verdict

    def judge_fit(self, text_class: str, marker: Mapping[str, float]) -> Verdict | NotJudged:
        if self.run.comparison is not None:
            return self._judge_pair_fit(text_class, marker)
        base = self.run.baseline()
        if base is None:
            return NotJudged(self.run.baselines.reason)
        base_fit = base.fits.get(text_class)
        if base_fit is None:
            return NotJudged(f"baseline {base.deployment} v{base.version} has no {text_class} "
                             f"fit: {create_hint(self.run.settings, base.deployment)}.")
        fit = self.class_fit(text_class)
        if fit is None:
            return NotJudged(NOTHING_TO_FIT.format(text_class=text_class))
        return self._fit_verdict(judge_fit(text_class, fit, base_fit,
                                           self.run.tolerances_for(None, marker)["slope"],
                                           self._class_contexts(text_class),
                                           *self._far_step(text_class, marker),
                                           noise=self.run.noise(), base_runs=self.run.base_runs(),
                                           rerun=self._rerun))

    def _judge_pair_fit(self, text_class: str,
                        marker: Mapping[str, float]) -> Verdict | NotJudged:
        assert self.run.comparison is not None
        fit, base_fit = self.class_fit(text_class), self.run.comparison.fit(text_class)
        if fit is None or base_fit is None:
            return NotJudged(NOTHING_TO_FIT.format(text_class=text_class))
        slope = self.run.tolerances_for(None, marker)["slope"]
        verdict = judge_fit(text_class, fit, base_fit, slope, self._class_contexts(text_class),
                            *self._far_step(text_class, marker), rerun=self._rerun,
                            paired=True)
        return self._fit_verdict(self.run.comparison.label(verdict))
