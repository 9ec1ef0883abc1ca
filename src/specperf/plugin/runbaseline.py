"""The baseline files of one run: the stored version it compares with, and the next it writes.

Pytest-free, like :class:`~specperf.plugin.runstate.RunState`, which keeps one.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..baselines import merge, preflight, shipped
from ..baselines.diff import describe_changes
from ..baselines.store import Baseline, BaselineStore, CaseBaseline
from ..baselines.versions import REPAIR
from ..core.errors import BaselineError
from ..core.limits import DEFAULT_TOLERANCES
from ..core.model import ContextFit
from ..core.noise import NoiseModel
from ..core.verdict import NotJudged
from ..core.version import __version__
from ..measure.sample import Measurement
from ..measure.session import git_revision
from ..plan.workload import Case
from ..servers.probe import ServerInfo
from ..settings.config import Settings
from ..settings.hints import create_hint, update_command
from ..store.history import box_noise, history_despite_store
from ..views.headline import FACTORS


class RunBaseline:
    """The stored baseline, read once per deployment (:meth:`stored`) for the verdicts, the
    tolerances, ``--specperf-require-baseline`` and the report alike; ``reason`` says why
    there is none. At the end of an ``--specperf-update-baselines`` run :meth:`write` adds
    the next version."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.loaded: dict[str, tuple[Baseline | None, str]] = {}  # deployment: base, why
        self.reason = ""
        self.unreadable = ""  # an --specperf-update-baselines run replacing a corrupt file
        self.written: Path | None = None
        self._noise: NoiseModel | None = None
        self.store_unreadable = ""  # why the history came from history.jsonl, not the store
        self.left_out: list[merge.LeftOut] = []  # regressed runs a merge did not take

    def stored(self, deployment: str) -> Baseline | None:
        """The baseline of ``deployment`` this run compares with, read once: the one place a
        run loads it. None (the reason in ``reason``) when there is none yet; an unreadable
        file raises, or with --specperf-update-baselines reads as none (it is replaced)."""
        if deployment not in self.loaded:
            self.loaded[deployment] = self._read(deployment)
        base, self.reason = self.loaded[deployment]
        return base

    def _read(self, deployment: str) -> tuple[Baseline | None, str]:
        store = BaselineStore(shipped.directory(self.settings, deployment))
        if store.latest(deployment) is None:
            return None, (f"no baseline for deployment {deployment!r} in "
                          f"{self.settings.baseline_dir}: "
                          f"{create_hint(self.settings, deployment)}.")
        try:
            return store.load(deployment, self.settings.baseline_version_number), ""
        except BaselineError as exc:  # every case errors with it, each time it is asked
            if not self.settings.update_baselines:
                raise BaselineError(self.with_command(str(exc), deployment)) from None
            # Replacing it is the fix: measure as if there were none, write the next version.
            self.unreadable = str(exc).replace(f": {REPAIR}.", "")
            return None, f"{exc}"

    def with_command(self, message: str, deployment: str) -> str:
        """A corrupt-baseline message whose advice is a command this run's flags complete."""
        return message.replace(REPAIR, "restore it from git, or write a new version (this file "
                               f"is kept) with `{update_command(self.settings, deployment)}`")

    def require(self, judged: preflight.Judged, deployment: Callable[[], str]) -> None:
        """--specperf-require-baseline: every judged case has a baseline, checked before any
        request (``deployment`` names it without starting the session)."""
        s = self.settings
        if not s.require_baseline:  # a --deployment with no baseline beside others: a typo?
            preflight.check_named(s, s.baseline_dir)
            return
        name = deployment()
        base = self.stored(name)  # a corrupt file: its error, with the fix
        try:
            preflight.check(s, judged, name, base)
        except BaselineError as exc:
            raise BaselineError(self.with_command(str(exc), name)) from None

    def noise(self, server: ServerInfo | None) -> NoiseModel:
        """The run-to-run noise a comparison with a baseline of another night carries
        (core/noise.py), estimated once from the history of this endpoint's full runs, the
        stated prior where it is short."""
        if self._noise is None:
            label = server.label if server is not None else ""
            path = self.settings.report_dir / "history.jsonl"
            entries, self.store_unreadable = (history_despite_store(
                path, self.settings.results_db) if label else ([], ""))
            stated = self.settings.sources.get("run_noise", "default") != "default"
            self._noise = box_noise(entries, label, simulated=bool(server and server.simulated),
                                    run_noise=self.settings.run_noise, stated=stated,
                                    night_window_h=self.settings.night_window)
        return self._noise

    def tolerances(self, base: Baseline | None, case: Case | None,
                   marker: Mapping[str, float]) -> dict[str, float]:
        """The tolerances in force for ``case`` (None: a text class's fit) with ``base``: the
        one place they are layered. Defaults < the tolerances setting (CLI > env > ini) < the
        baseline file's < the case's entry in it < the test's tolerance marker; each layer was
        checked where it was read (settings at startup, the file when loaded, the marker by
        its test)."""
        merged = {**DEFAULT_TOLERANCES, **self.settings.tolerances}
        if base is not None:
            merged.update(base.tolerances)
            entry = base.cases.get(case.id) if case is not None else None
            if entry is not None:
                merged.update(entry.tolerances)
        merged.update(marker)
        return merged

    def case_entry(self, base: Baseline, case: Case) -> CaseBaseline | NotJudged:
        """``case``'s entry in ``base``, or the reason it has none."""
        found = base.cases.get(case.id)
        if found is None or found.output_tokens != case.output_tokens:
            return NotJudged(f"baseline {base.deployment} v{base.version} has no {case.id} at "
                             f"{case.output_tokens} output tokens: "
                             f"{create_hint(self.settings, base.deployment)}.")
        return found

    # -- the next version ---------------------------------------------------------------------
    def unwritten(self, clean: bool, cases: Sequence[Case],
                  measurements: Mapping[str, Measurement]) -> str | None:
        """Why this run writes no baseline (None: it does): it must have measured every
        planned case cleanly."""
        if not measurements:
            return ("specperf: baseline NOT updated: no case was measured; run the main job "
                    f"with --specperf-update-baselines: `{update_command(self.settings)}`.")
        if not clean:
            return ("specperf: baseline NOT updated: some cases errored or were not measured; "
                    f"fix them and run again: `{update_command(self.settings)}`.")
        missing = [c.id for c in cases if c.id not in measurements]
        if missing:
            return (f"specperf: baseline NOT updated: {len(missing)} planned cases were not "
                    f"measured ({', '.join(missing[:4])}…); run the full sweep: "
                    f"`{update_command(self.settings)}`.")
        return None

    def next_version(self, deployment: str, server: ServerInfo,
                     measured: Sequence[Measurement], fits: dict[str, ContextFit],
                     prompt_seed: str | None, request_digest: dict[str, Any]) -> Baseline:
        """The baseline this run's measurements make (its version is set when written)."""
        return Baseline.from_run(
            deployment, server.fingerprint, measured, fits, version=0,
            suite_version=__version__, git_revision=git_revision(),
            provenance=(f"specperf {__version__} run against {server.label}: "
                        f"{self.settings.repeats}+ repeats per case, median and MAD."),
            simulated=server.simulated, prompt_seed=prompt_seed, request_digest=request_digest)

    def write(self, new: Baseline, measured: Sequence[Measurement], cases: Sequence[Case],
              history: Path | None, run_id: str | None,
              accepted: Collection[str] = ()) -> list[str]:
        """Write ``new`` (merged with past runs, :meth:`_merged`) as the next version of its
        deployment; say what was written and what changed. ``accepted``: the cases whose
        regression this update accepts (a past run that regressed only there may merge)."""
        store = BaselineStore(self.settings.baseline_dir)
        try:
            previous = store.load(new.deployment) if store.latest(new.deployment) else None
        except BaselineError:
            previous = None
        new = self._merged(new, measured, cases, history, run_id, accepted)
        path = store.write_next(new)
        self.written = path
        lines = [f"specperf: wrote baseline {path}", *self._merged_lines(new, history)]
        if self.unreadable:
            lines.append(f"  it replaces an unreadable version, kept as it was: "
                         f"{self.unreadable}.")
        lines += [f"  {line}" for line in describe_changes(previous, new)]
        return lines

    def _merged(self, new: Baseline, measured: Sequence[Measurement], cases: Sequence[Case],
                history: Path | None, run_id: str | None,
                accepted: Collection[str]) -> Baseline:
        """--specperf-baseline-runs N: this run merged with the last N-1 of the same
        deployment and fingerprint (baselines/merge.py)."""
        wanted = self.settings.baseline_runs - 1
        outputs = {c.id: c.output_tokens for c in cases}
        found = merge.past_runs(history, new.deployment, new.fingerprint, outputs, wanted,
                                run_id, accepted) \
            if wanted and history is not None else merge.Selection([])
        self.left_out = found.left_out
        return merge.merged(new, merge.slots_of(measured), run_id, found.runs)

    def _merged_lines(self, new: Baseline, history: Path | None) -> list[str]:
        wanted = self.settings.baseline_runs
        if wanted == 1:
            return []
        runs = ", ".join(new.runs)
        lines = [left_out_line(self.left_out)] if self.left_out else []
        if new.run_count >= wanted:
            return [f"  merged from {new.run_count} runs, request slot by slot: {runs}.", *lines]
        besides = f", besides the {len(self.left_out)} left out" if self.left_out else ""
        return [f"  merged from {new.run_count} of the {wanted} runs asked for ({runs}): "
                f"{history} holds no more runs of {new.deployment} with this fingerprint "
                f"that measured every case{besides}.", *lines]


def left_out_line(left_out: Sequence[merge.LeftOut]) -> str:
    """'  left out 1 run that regressed: 2026… (step time in reasoning-ctx13); …'."""
    runs = "; ".join(f"{r.run_id} ({_regressions(r.factors)})" for r in left_out)
    n = len(left_out)
    return (f"  left out {n} run{'s' if n != 1 else ''} that regressed: {runs}; a regressed "
            f"run enters a merge only when the update accepts that regression.")


def _regressions(factors: Mapping[str, str]) -> str:
    by: dict[str, list[str]] = {}
    for case, name in sorted(factors.items()):
        by.setdefault(FACTORS[name][0] if name in FACTORS else "a regression", []).append(case)
    return ", ".join(f"{what} in {', '.join(cases)}" for what, cases in by.items())
