"""The state of one perf run: the session, the baseline, tolerances, verdicts and results.

Pytest-free, so the plugin and the CLI share it. The plugin keeps one in ``config.stash``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from ..baselines import merge, preflight, shipped
from ..baselines.diff import describe_changes
from ..baselines.store import Baseline, BaselineStore, CaseBaseline
from ..baselines.versions import REPAIR
from ..core.errors import BaselineError, SpecperfError
from ..core.limits import DEFAULT_TOLERANCES, tolerance
from ..core.model import ContextFit
from ..core.noise import NoiseModel, from_history
from ..core.version import __version__
from ..judge import exact, reconcile
from ..judge.ab import Comparison, measure_pair, pair_decider
from ..judge.positions import Shape
from ..judge.verdict import NotJudged, Verdict, judge_case, judge_fit
from ..measure.lock import LockMode
from ..measure.loop import Measurement, Sample, context_fit
from ..measure.repeats import RepeatDecision, decide_repeats
from ..measure.sample import mean_context
from ..measure.session import PerfSession, git_revision
from ..plan import digest
from ..plan.reuse import PromptPlan
from ..plan.workload import Case, Prompt, TextClass, plan, select_classes
from ..servers import routes
from ..servers.fingerprint import deployment_name, fingerprint_differences, pinned_flags
from ..settings.config import Settings
from ..settings.hints import create_hint, update_command
from ..views.trend import load_history

NOTHING_TO_FIT = "{text_class}: fewer than two contexts with a step time; nothing to fit."


class RunState:
    """Everything one run knows; lazily starts the session on the first measured case.

    It owns the run's baseline: read once per deployment (:meth:`_stored_baseline`) for the
    verdicts, the tolerances, ``--specperf-require-baseline`` and the report alike.
    """

    def __init__(self, settings: Settings, classes: dict[str, TextClass], *,
                 progress: Callable[[str], None] = lambda _: None,
                 on_sample: Callable[[Sample, int], None] | None = None,
                 lock_mode: LockMode = "session") -> None:
        self.settings = settings
        self.lock_mode = lock_mode
        self.classes = classes
        self.cases = plan(select_classes(settings.text_classes, classes), settings.contexts,
                          settings.output_tokens)
        self.progress = progress
        self._on_sample = on_sample
        # Every sample of a case still being measured, so a case that errors (unstable after
        # its repeat bound, a server gone mid-case) or is interrupted keeps what it took.
        self._taken: dict[str, list[Sample]] = {}
        self.partials: dict[str, dict[str, Any]] = {}
        self.session: PerfSession | None = None
        self._start_error: SpecperfError | None = None
        self._baselines: dict[str, tuple[Baseline | None, str]] = {}  # deployment: base, why
        self._baseline_reason = ""
        self._named_before_probe: str | None = None
        self._compared: Baseline | None = None  # the baseline fingerprint_notes are about
        self.verdicts: list[Verdict] = []
        self.fingerprint_notes: list[str] = []
        self._case_errors: dict[str, SpecperfError] = {}
        self.comparison: Comparison | None = None
        self._plan: PromptPlan | None = None
        self._digest: dict[str, Any] | None = None
        self._refusal: str | None = None
        self.judged = preflight.Judged()  # set by the plugin after collection
        self.baseline_written: Path | None = None
        self.unreadable_baseline = ""  # an --specperf-update-baselines run replacing a corrupt file
        self._noise: NoiseModel | None = None

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
        """--specperf-require-baseline: every judged case has a baseline, checked before any
        request."""
        s = self.settings
        if s.update_baselines or s.compare_endpoint is not None or not self.judged:
            return
        if not s.require_baseline:  # a --deployment with no baseline beside others: a typo?
            preflight.check_named(s, s.baseline_dir)
            return
        deployment = self._deployment_now()
        base = self._stored_baseline(deployment)  # a corrupt file: its error, with the fix
        try:
            preflight.check(s, self.judged, deployment, base)
        except BaselineError as exc:
            raise BaselineError(self._with_command(str(exc), deployment)) from None

    def _with_command(self, message: str, deployment: str) -> str:
        """A corrupt-baseline message whose advice is a command this run's flags complete."""
        return message.replace(REPAIR, "restore it from git, or write a new version (this file "
                               f"is kept) with `{update_command(self.settings, deployment)}`")

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

    def _stored_baseline(self, deployment: str) -> Baseline | None:
        """The baseline of ``deployment`` this run compares with, read once: the one place a
        run loads it. None (the reason in ``_baseline_reason``) when there is none yet; an
        unreadable file raises, or with --specperf-update-baselines reads as none (it is
        replaced)."""
        if deployment not in self._baselines:
            self._baselines[deployment] = self._read_baseline(deployment)
        base, self._baseline_reason = self._baselines[deployment]
        return base

    def _read_baseline(self, deployment: str) -> tuple[Baseline | None, str]:
        store = BaselineStore(shipped.directory(self.settings, deployment))
        if store.latest(deployment) is None:
            return None, (f"no baseline for deployment {deployment!r} in "
                          f"{self.settings.baseline_dir}: "
                          f"{create_hint(self.settings, deployment)}.")
        try:
            return store.load(deployment, self.settings.baseline_version_number), ""
        except BaselineError as exc:  # every case errors with it, each time it is asked
            if not self.settings.update_baselines:
                raise BaselineError(self._with_command(str(exc), deployment)) from None
            # Replacing it is the fix: measure as if there were none, write the next version.
            self.unreadable_baseline = str(exc).replace(f": {REPAIR}.", "")
            return None, f"{exc}"

    def baseline(self) -> Baseline | None:
        """The baseline to compare with; None (with a reason) when none exists yet.

        Starts the session: the server it probed names the deployment, and its fingerprint
        is compared with the baseline's (``fingerprint_notes``). In A/B mode there is no
        stored baseline: production's measurements stand in.
        """
        if self.settings.compare_endpoint is not None:
            return None
        base = self._stored_baseline(self.deployment())
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
        if self._noise is None:
            server = self.session.server if self.session is not None else None
            label = server.label if server is not None else ""
            path = self.settings.report_dir / "history.jsonl"
            entries = load_history(path) if label and path.is_file() else []
            if server is not None and server.simulated:
                # Each embedded simulator listens on a new port: its runs are one "box".
                label = "SIMULATED"
                entries = [{**e, "label": label} for e in entries if e.get("simulated")]
            self._noise = from_history(entries, label, total=self.settings.run_noise)
        return self._noise

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
        return self._stored_baseline(deployment_name(self.settings, server))

    def baseline_case(self, case: Case) -> CaseBaseline | NotJudged:
        """The case's baseline entry, or the reason there is none."""
        if self.comparison is not None:
            return self.comparison.baseline_case(case)
        base = self.baseline()
        if base is None:
            return NotJudged(self._baseline_reason)
        refusal = self.digest_refusal(base)
        if refusal is not None:
            if self.settings.update_baselines:  # the new version is how to move on
                return NotJudged(refusal)
            raise BaselineError(refusal)
        found = base.cases.get(case.id)
        if found is None or found.output_tokens != case.output_tokens:
            return NotJudged(f"baseline {base.deployment} v{base.version} has no {case.id} at "
                             f"{case.output_tokens} output tokens: "
                             f"{create_hint(self.settings, base.deployment)}.")
        return found

    # -- reproducible prompts, request digest, exact acceptance (reuse, digest, exact) ------
    def prompt_plan(self) -> PromptPlan:
        """How this run's prompts are made: from the baseline's prompt seed (a baseline
        without one: a seed named after the version this run would write), where the server
        can keep a repeated prompt out of its prefix cache."""
        if self._plan is None:
            session = self.started_session()
            assert session.measurer is not None
            base = self.baseline()
            seed = base.prompt_seed if base is not None and base.prompt_seed else None
            if seed is None:
                store = BaselineStore(self.settings.baseline_dir)
                seed = f"{self.deployment()}/v{(store.latest(self.deployment()) or 0) + 1}"
            self._plan = session.measurer.reproduce_prompts(seed)
        return self._plan

    def request_digest(self) -> dict[str, Any]:
        """The digest of this run's requests (digest.py), computed once."""
        if self._digest is None:
            session = self.started_session()
            assert session.server is not None and session.measurer is not None
            server = session.server
            template = session.measurer.template_tokens(self.cases[0]) \
                if server.api == "openai-chat" and self.cases else None
            classes = {n: self.classes[n] for n in self.settings.text_classes}
            empty = routes.request_body(server.api, Prompt("", None, 0),
                                        self.settings.output_tokens, server.model, "digest")
            self._digest = digest.request_digest(empty, self.settings.output_tokens, template,
                                                 classes)
        return self._digest

    def digest_refusal(self, base: Baseline) -> str | None:
        """The sentence refusing to compare with ``base``, when its requests were others."""
        if base.request_digest is None:
            return None
        if self._refusal is None:
            changes = digest.differences(base.request_digest, self.request_digest())
            self._refusal = digest.refusal(f"{base.deployment} v{base.version}", changes) \
                if changes else ""
        return self._refusal or None

    def _exact_in_force(self, case: Case, base: CaseBaseline | None) -> bool:
        """Acceptance of ``case`` is judged exactly: its repeats need not settle it."""
        session = self.session
        if base is None or not base.prompts or base.deterministic is False \
                or session is None or session.measurer is None:
            return False
        return session.measurer.deterministic.get(case.id) is True

    def _with_exact(self, measured: Measurement, base: CaseBaseline,
                    verdict: Verdict) -> Verdict:
        plan = self._plan or PromptPlan()
        result = exact.compare(measured, base.prompts, base.deterministic, plan.reason)
        return exact.combine(verdict, result, mode=self.settings.acceptance_mode)

    def tolerances_for(self, case: Case | None, marker: Mapping[str, float]) -> dict[str, float]:
        """The tolerances in force for ``case`` (None: a text class's fit): the one place
        they are layered. Defaults < the tolerances setting (CLI > env > ini) < the baseline
        file's < the case's entry in it < the test's tolerance marker; each layer was checked
        where it was read (settings at startup, the file when loaded, the marker by its test).

        Asking starts no session (no probe, no GPU lock): the baseline is the one the run
        compares with, named from GET routes only when no session has started yet.
        """
        merged = {**DEFAULT_TOLERANCES, **self.settings.tolerances}
        if self.settings.compare_endpoint is None:  # A/B: production stands in, no file
            base = self._stored_baseline(self._deployment_now())
            if base is not None:
                merged.update(base.tolerances)
                entry = base.cases.get(case.id) if case is not None else None
                if entry is not None:
                    merged.update(entry.tolerances)
        merged.update(marker)
        return merged

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
        except BaseException:  # Ctrl-C, SIGTERM (plugin._StopOnce): keep what was taken
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

        def decide(values: Mapping[str, Any]) -> RepeatDecision:
            if self._exact_in_force(case, base):  # acceptance is settled exactly
                values = {k: v for k, v in values.items() if k != "avg_commit"}
            return decide_repeats(values, base, tolerances, min_repeats=s.repeats,
                                  max_repeats=s.max_repeats, max_spread=s.max_spread)

        return session.measure(case, decide)

    def judge(self, measured: Measurement, base: CaseBaseline,
              marker: Mapping[str, float]) -> list[Verdict]:
        tolerances = self.tolerances_for(measured.case, marker)
        pinned = self.acceptance_pinned()
        verdict = judge_case(measured.case.id, measured.summaries(), base, tolerances,
                             Shape.of(s.raw for s in measured.measured), pinned=pinned,
                             noise=self.noise(), base_runs=self.base_runs())
        if self.comparison is not None:
            verdict = self.comparison.label(verdict)
        elif not pinned:  # a synthetic acceptance is not compared, exactly or otherwise
            verdict = self._with_exact(measured, base, verdict)
        if self.comparison is None:  # the predict-and-reconcile row, judged with the case
            stored = self.baseline()
            fit = stored.fits.get(measured.case.text_class) if stored is not None else None
            verdict = reconcile.attach(verdict, measured, base, fit,
                                       tolerance(tolerances, "tok_s"))
        self.verdicts.append(verdict)
        return [verdict]

    def acceptance_pinned(self) -> bool:
        """Whether the probed server's acceptance is synthetic (servers/pinned.py)."""
        server = self.session.server if self.session is not None else None
        return server is not None and pinned_flags(server.fingerprint) is not None

    def class_fit(self, text_class: str) -> ContextFit | None:
        return context_fit(self.measure(case, self.tolerances_for(case, {}))
                           for case in self.cases if case.text_class == text_class)

    def _far_step(self, text_class: str,
                  marker: Mapping[str, float]) -> tuple[float | None, float]:
        """The step-time tolerance of a class's farthest case and its fit context (what
        bounds how small a slope's limit may be: :func:`contract.slope_limit`)."""
        cases = [c for c in self.cases if c.text_class == text_class]
        if not cases:
            return None, 0.0
        far = max(cases, key=lambda c: mean_context(c.context, c.output_tokens))
        return (self.tolerances_for(far, marker)["step_ms"],
                mean_context(far.context, far.output_tokens))

    def _class_contexts(self, text_class: str) -> list[int]:
        return sorted({c.context for c in self.cases if c.text_class == text_class})

    def _fit_verdict(self, verdict: Verdict) -> Verdict | NotJudged:
        """An undetermined slope is a skip that says what to add, never a pass or a fail."""
        if verdict.status == "undetermined":
            return NotJudged(verdict.message)
        self.verdicts.append(verdict)
        return verdict

    def judge_fit(self, text_class: str, marker: Mapping[str, float]) -> Verdict | NotJudged:
        if self.comparison is not None:
            return self._judge_pair_fit(text_class, marker)
        base = self.baseline()
        if base is None:
            return NotJudged(self._baseline_reason)
        base_fit = base.fits.get(text_class)
        if base_fit is None:
            return NotJudged(f"baseline {base.deployment} v{base.version} has no {text_class} "
                             f"fit: {create_hint(self.settings, base.deployment)}.")
        fit = self.class_fit(text_class)
        if fit is None:
            return NotJudged(NOTHING_TO_FIT.format(text_class=text_class))
        return self._fit_verdict(judge_fit(text_class, fit, base_fit,
                                           self.tolerances_for(None, marker)["slope"],
                                           self._class_contexts(text_class),
                                           *self._far_step(text_class, marker),
                                           noise=self.noise(), base_runs=self.base_runs()))

    def _judge_pair_fit(self, text_class: str,
                        marker: Mapping[str, float]) -> Verdict | NotJudged:
        assert self.comparison is not None
        fit, base_fit = self.class_fit(text_class), self.comparison.fit(text_class)
        if fit is None or base_fit is None:
            return NotJudged(NOTHING_TO_FIT.format(text_class=text_class))
        verdict = judge_fit(text_class, fit, base_fit, self.tolerances_for(None, marker)["slope"],
                            self._class_contexts(text_class),
                            *self._far_step(text_class, marker))
        return self._fit_verdict(self.comparison.label(verdict))

    @staticmethod
    def verdict_dict(verdict: Verdict) -> dict[str, Any]:
        data = asdict(verdict)
        data["attribution"] = None if verdict.attribution is None else {
            "acceptance": verdict.attribution.share("acceptance"),
            "step": verdict.attribution.share("step"),
            "rest": verdict.attribution.share("rest")}
        return data

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
        if not self.measurements:
            return ["specperf: baseline NOT updated: no case was measured; run the main job "
                    f"with --specperf-update-baselines: `{update_command(self.settings)}`."]
        if not clean:
            return ["specperf: baseline NOT updated: some cases errored or were not measured; "
                    f"fix them and run again: `{update_command(self.settings)}`."]
        missing = [c.id for c in self.cases if c.id not in self.measurements]
        if missing:
            return [f"specperf: baseline NOT updated: {len(missing)} planned cases were not "
                    f"measured ({', '.join(missing[:4])}…); run the full sweep: "
                    f"`{update_command(self.settings)}`."]
        session = self.started_session()
        assert session.server is not None
        store = BaselineStore(self.settings.baseline_dir)
        deployment = self.deployment()
        try:
            previous = store.load(deployment) if store.latest(deployment) else None
        except BaselineError:
            previous = None
        new = Baseline.from_run(
            deployment, session.server.fingerprint, [self.measurements[c.id] for c in self.cases],
            self.fits(), version=0, suite_version=__version__, git_revision=git_revision(),
            provenance=(f"specperf {__version__} run against {session.server.label}: "
                        f"{self.settings.repeats}+ repeats per case, median and MAD."),
            simulated=session.server.simulated,
            prompt_seed=self._plan.seed if self._plan and self._plan.reproducible else None,
            request_digest=self.request_digest())
        new = self._merged(new, history, run_id)
        path = store.write_next(new)
        self.baseline_written = path
        lines = [f"specperf: wrote baseline {path}", *self._merged_lines(new, history)]
        if self.unreadable_baseline:
            lines.append(f"  it replaces an unreadable version, kept as it was: "
                         f"{self.unreadable_baseline}.")
        lines += [f"  {line}" for line in describe_changes(previous, new)]
        return lines

    def _merged(self, new: Baseline, history: Path | None, run_id: str | None) -> Baseline:
        """--specperf-baseline-runs N: this run merged with the last N-1 of the same
        deployment and fingerprint (baselines/merge.py)."""
        wanted = self.settings.baseline_runs - 1
        cases = {c.id: c.output_tokens for c in self.cases}
        past = merge.past_runs(history, new.deployment, new.fingerprint, cases, wanted, run_id) \
            if wanted and history is not None else []
        measured = [self.measurements[c.id] for c in self.cases]
        return merge.merged(new, merge.slots_of(measured), run_id, past)

    def _merged_lines(self, new: Baseline, history: Path | None) -> list[str]:
        wanted = self.settings.baseline_runs
        if wanted == 1:
            return []
        runs = ", ".join(new.runs)
        if new.run_count >= wanted:
            return [f"  merged from {new.run_count} runs, request slot by slot: {runs}."]
        return [f"  merged from {new.run_count} of the {wanted} runs asked for ({runs}): "
                f"{history} holds no more runs of {new.deployment} with this fingerprint "
                f"that measured every case."]
