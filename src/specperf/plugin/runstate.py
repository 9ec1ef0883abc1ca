"""The state of one perf run: the session, the baseline, tolerances, verdicts and results.

Pytest-free, so the plugin and the CLI share it. The plugin keeps one in ``config.stash``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..baselines import preflight
from ..baselines.store import Baseline, CaseBaseline
from ..core.errors import BaselineError, SpecperfError
from ..core.fingerprint import deployment_name, fingerprint_differences
from ..core.interval import fixed_ses
from ..core.model import ContextFit
from ..core.noise import NoiseModel
from ..core.verdict import NotJudged, Verdict
from ..judge.ab import Comparison
from ..measure.lock import LockMode
from ..measure.pair import measure_pair, pair_decider
from ..measure.repeats import RepeatDecision, decide_repeats
from ..measure.sample import Measurement, Sample, context_fit
from ..measure.session import PerfSession
from ..plan.reuse import PromptPlan
from ..plan.workload import Case, TextClass, plan, select_classes
from ..settings.config import Settings
from ..settings.hints import accept_command
from . import updatecheck
from .prompts import RunPrompts
from .runbaseline import RunBaseline
from .runjudge import RunJudge


class RunState:
    """Everything one run knows; lazily starts the session on the first measured case.

    Its baseline files (``baselines``: the stored version read once per deployment, the next
    one written), its prompts (``prompts``: reproduced, digested, compared exactly) and its
    judging (``judging``: case and fit verdicts, every verdict kept) are objects of their own.
    """

    def __init__(self, settings: Settings, classes: dict[str, TextClass], *,
                 progress: Callable[[str], None] = lambda _: None,
                 on_sample: Callable[[Sample, int], None] | None = None,
                 lock_mode: LockMode = "session") -> None:
        self.settings = settings
        self.lock_mode = lock_mode
        self.classes = classes
        self.cases = plan(select_classes(settings.text_classes, classes), settings.contexts,
                          settings.output_tokens, settings.case_output_tokens)
        self.progress = progress
        self._on_sample = on_sample
        # Every sample of a case still being measured, so a case that errors (unstable after
        # its repeat bound, a server gone mid-case) or is interrupted keeps what it took.
        self._taken: dict[str, list[Sample]] = {}
        self.partials: dict[str, dict[str, Any]] = {}
        self.session: PerfSession | None = None
        self._start_error: SpecperfError | None = None
        self.baselines = RunBaseline(settings)
        self.prompts = RunPrompts(settings, classes, self.cases)
        self._named_before_probe: str | None = None
        self._compared: Baseline | None = None  # the baseline fingerprint_notes are about
        self.fingerprint_notes: list[str] = []
        self._case_errors: dict[str, SpecperfError] = {}
        self.comparison: Comparison | None = None
        self.judged = preflight.Judged()  # set by the plugin after collection
        self.judging = RunJudge(self)  # cases, fits and every verdict kept (runjudge.py)

    def on_sample(self, sample: Sample, total: int) -> None:
        """Each finished request: kept until its case is measured, then shown as progress."""
        self._taken.setdefault(sample.case_id, []).append(sample)
        if self._on_sample is not None:
            self._on_sample(sample, total)

    def _keep_partial(self, case: Case, state: str, reason: str) -> None:
        """The samples a case took before it errored or was interrupted (``partials``)."""
        samples = self._taken.pop(case.id, [])
        session = self.session
        if not samples or session is None or session.measurer is None:
            return
        data = session.measurer.finish(case, samples).to_dict()
        self.partials[case.id] = {**data, "state": state, "reason": reason}

    # -- session --------------------------------------------------------------------------
    def started_session(self) -> PerfSession:
        if self._start_error is not None:
            raise self._start_error
        if self.session is None:
            self.session = PerfSession(self.settings, progress=self.progress,
                                       on_sample=self.on_sample, lock_mode=self.lock_mode)
            if self.settings.compare_endpoint is not None:
                # Production's own lock, derived from its URL: one shared --specperf-gpu-lock file
                # would make the run wait for itself.
                production = replace(self.settings, endpoint=self.settings.compare_endpoint,
                                     compare_endpoint=None, gpu_lock=None)
                self.comparison = Comparison(PerfSession(production, progress=self.progress,
                                                         lock_mode=self.lock_mode))
        try:
            self._require_baseline()
            for session in self._sessions_in_lock_order():
                session.start()
        except SpecperfError as exc:
            self._start_error = exc
            self.close_session()
            raise
        if self.comparison is not None:
            self.fingerprint_notes = self.comparison.notes(self.session)
        return self.session

    def _require_baseline(self) -> None:
        """--specperf-require-baseline's check (runbaseline.py), before any request."""
        s = self.settings
        if s.update_baselines or s.compare_endpoint is not None or not self.judged:
            return
        self.baselines.require(self.judged, self._deployment_now)

    def _sessions_in_lock_order(self) -> list[PerfSession]:
        """Both endpoints' GPU locks are always taken in one order: no A/B deadlock."""
        assert self.session is not None
        if self.comparison is None:
            return [self.session]
        return sorted([self.session, self.comparison.production], key=lambda s: s.lock_path())

    def close_session(self) -> None:
        try:
            if self.session is not None:
                self.session.close()
        finally:
            if self.comparison is not None:
                self.comparison.production.close()

    @property
    def verdicts(self) -> list[Verdict]:
        """Every verdict of this run, in the order it was reached (runjudge.py keeps them)."""
        return self.judging.verdicts

    @property
    def measurements(self) -> dict[str, Measurement]:
        return self.session.measurements if self.session else {}

    # -- baseline -------------------------------------------------------------------------
    def deployment(self) -> str:
        """The baseline deployment, named by the server the started session probed."""
        self.started_session()
        return self._deployment_now()

    def _deployment_now(self) -> str:
        """The deployment, without starting the session: the probed server's once it started,
        else named from GET routes only (preflight: no generation request, no GPU lock)."""
        if self.session is not None and self.session.server is not None:
            return deployment_name(self.settings, self.session.server.to_dict())
        if self._named_before_probe is None:
            self._named_before_probe = preflight.deployment_before_probe(self.settings)
        return self._named_before_probe

    def baseline(self) -> Baseline | None:
        """The baseline to compare with; None (with a reason) when none exists yet.

        Starts the session: the server it probed names the deployment, and its fingerprint
        is compared with the baseline's (``fingerprint_notes``). In A/B mode there is no
        stored baseline: production's measurements stand in.
        """
        if self.settings.compare_endpoint is not None:
            return None
        base = self.baselines.stored(self.deployment())
        if base is not None and self._compared is not base:
            session = self.started_session()
            assert session.server is not None
            self.fingerprint_notes = fingerprint_differences(base.fingerprint,
                                                             session.server.fingerprint)
            self._compared = base
        return base

    def noise(self) -> NoiseModel:
        """The run-to-run noise every comparison with the stored baseline carries
        (core/noise.py): none on the same night (a gate's reference, A/B), else estimated
        from the history of this endpoint's full runs, the stated prior where it is short."""
        if self.settings.same_night or self.comparison is not None:
            return NoiseModel.same_night()
        return self.baselines.noise(self.session.server if self.session is not None else None)

    def base_runs(self) -> int:
        """How many runs the stored baseline was merged from (its night term shrinks so)."""
        base = self.baseline() if self.comparison is None else None
        return max(1, int(getattr(base, "run_count", 1))) if base is not None else 1

    def reported_baseline(self, server: Mapping[str, Any]) -> Baseline | None:
        """The baseline this run was judged against, for its report.

        A process that measured has it (:meth:`baseline`). An xdist controller measured
        nothing and never loads one while its workers judge: the server they reported
        (``server``) names the deployment, and the same store and version give the same file.
        """
        if self.settings.compare_endpoint is not None:
            return None
        if self.session is not None and self.session.server is not None:
            return self.baseline()
        if not server:
            return None
        return self.baselines.stored(deployment_name(self.settings, server))

    def baseline_case(self, case: Case) -> CaseBaseline | NotJudged:
        """The case's baseline entry, or the reason there is none."""
        if self.comparison is not None:
            return self.comparison.baseline_case(case)
        base = self.baseline()
        if base is None:
            return NotJudged(self.baselines.reason)
        refusal = self.digest_refusal(base)
        if refusal is not None:
            if self.settings.update_baselines:  # the new version is how to move on
                return NotJudged(refusal)
            raise BaselineError(refusal)
        return self.baselines.case_entry(base, case)

    # -- reproducible prompts, request digest, exact acceptance (prompts.py) ---------------
    def prompt_plan(self) -> PromptPlan:
        """How this run's prompts are made (prompts.py), decided on first use."""
        made = self.prompts.plan
        if made is None:
            session = self.started_session()
            assert session.measurer is not None
            made = self.prompts.reproduce(session.measurer, self.baseline(), self.deployment())
        return made

    def request_digest(self) -> dict[str, Any]:
        """The digest of this run's requests (plan/digest.py), computed once."""
        made = self.prompts.digest
        return made if made is not None else self.prompts.take_digest(self.started_session())

    def digest_refusal(self, base: Baseline) -> str | None:
        """The sentence refusing to compare with ``base``, when its requests were others."""
        if base.request_digest is None:
            return None
        return self.prompts.refusal(base, self.request_digest())

    def tolerances_for(self, case: Case | None, marker: Mapping[str, float]) -> dict[str, float]:
        """The tolerances in force for ``case`` (None: a text class's fit; runbaseline.py).
        Asking starts no session (no probe, no GPU lock): the baseline is named from GET
        routes only when no session has started yet."""
        ab = self.settings.compare_endpoint is not None  # production stands in, no file
        base = None if ab else self.baselines.stored(self._deployment_now())
        return self.baselines.tolerances(base, case, marker)

    # -- measuring and judging ---------------------------------------------------------------
    def measure(self, case: Case, tolerances: Mapping[str, float]) -> Measurement:
        """Measure a case once per run; its error, if any, is remembered and raised again."""
        session = self.started_session()
        if case.id in session.measurements:
            return session.measurements[case.id]
        if case.id in self._case_errors:
            raise self._case_errors[case.id]
        try:
            measured = self._measure(session, case, tolerances)
        except SpecperfError as exc:
            self._case_errors[case.id] = exc
            self._keep_partial(case, "errored", f"{type(exc).__name__}: {exc}")
            raise
        except BaseException:  # Ctrl-C, SIGTERM (plugin.signals.StopOnce): keep what was taken
            self._keep_partial(case, "interrupted", "the run was stopped while measuring it")
            raise
        self._taken.pop(case.id, None)
        return measured

    def _measure(self, session: PerfSession, case: Case,
                 tolerances: Mapping[str, float]) -> Measurement:
        s = self.settings
        if self.comparison is not None:
            assert self.comparison.production.measurer is not None
            assert session.measurer is not None
            decider = pair_decider(tolerances, s.repeats, s.max_repeats, s.max_spread)
            measured, reference = measure_pair(case, session.measurer,
                                               self.comparison.production.measurer, decider)
            session.measurements[case.id] = measured
            self.comparison.references[case.id] = reference
            return measured
        self.prompt_plan()
        entry = self.baseline_case(case)
        base = entry if isinstance(entry, CaseBaseline) else None
        # what more repeats cannot shrink (measure/repeats.py, rule 3)
        fixed = fixed_ses(base.metrics, self.noise(), self.base_runs()) if base else {}

        least = s.case_repeats.get(case.id, s.repeats)

        def decide(values: Mapping[str, Any]) -> RepeatDecision:
            if self.prompts.exact_in_force(case, base, session.measurer):  # settled exactly
                values = {k: v for k, v in values.items() if k != "avg_commit"}
            return decide_repeats(values, base, tolerances, min_repeats=least,
                                  max_repeats=max(least, s.max_repeats),
                                  max_spread=s.max_spread, fixed=fixed)

        return session.measure(case, decide)

    # -- end of run -------------------------------------------------------------------------
    def fits(self) -> dict[str, ContextFit]:
        found = {name: context_fit(m for m in self.measurements.values()
                                   if m.case.text_class == name)
                 for name in self.settings.text_classes}
        return {name: fit for name, fit in found.items() if fit is not None}

    def update_baseline(self, clean: bool, history: Path | None = None,
                        run_id: str | None = None) -> list[str]:
        """Write v<N+1> from this run when every case was measured cleanly; say what changed.

        ``history``: the report directory whose earlier runs --specperf-baseline-runs merges;
        ``run_id``: this run's, recorded in the file (and never merged twice)."""
        refused = self.baselines.unwritten(clean, self.cases, self.measurements)
        if refused is not None:
            return [refused]
        judged = updatecheck.check(self.verdicts)
        accept = self.settings.accept
        if accept is None and not judged.clear:
            return [judged.refusal(accept_command(self.settings, self.deployment()))]
        session = self.started_session()
        assert session.server is not None
        prompts = self.prompts.plan
        measured = [self.measurements[c.id] for c in self.cases]
        new = self.baselines.next_version(
            self.deployment(), session.server, measured, self.fits(),
            prompts.seed if prompts and prompts.reproducible else None, self.request_digest())
        against = self.baseline()
        new = replace(new, lineage=updatecheck.lineage(
            against.version if against else None, self.verdicts, judged, accept))
        accepted = {v.case_id for v in judged.blocking} if accept is not None else set()
        lines = self.baselines.write(new, measured, self.cases, history, run_id, accepted)
        if judged.clear or accept is None:
            return lines
        return [lines[0], f"  accepted although it regressed in {judged.named()}: {accept}",
                *lines[1:]]
