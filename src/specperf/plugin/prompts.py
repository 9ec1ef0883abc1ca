"""One run's prompts as its baseline knows them: reproduced, digested, compared exactly.

Pytest-free, like :class:`~specperf.plugin.runstate.RunState`, which keeps one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..baselines.store import Baseline, BaselineStore, CaseBaseline
from ..core.verdict import Verdict
from ..judge import exact
from ..measure.loop import Measurer
from ..measure.sample import Measurement
from ..measure.session import PerfSession
from ..plan import digest
from ..plan.reuse import PromptPlan
from ..plan.workload import Case, Prompt, TextClass
from ..servers import routes
from ..settings.config import Settings


class RunPrompts:
    """How this run's requests are made and recognised, each decided once: the reproducible
    prompts (``plan``, from the baseline's prompt seed), the digest of the requests, and the
    refusal to compare with a baseline whose requests were others. With reproduced prompts
    acceptance is compared prompt by prompt (judge/exact.py)."""

    def __init__(self, settings: Settings, classes: dict[str, TextClass],
                 cases: Sequence[Case]) -> None:
        self.settings = settings
        self.classes = classes
        self.cases = cases
        self.plan: PromptPlan | None = None
        self.digest: dict[str, Any] | None = None
        self._refusal: str | None = None

    def reproduce(self, measurer: Measurer, base: Baseline | None,
                  deployment: str) -> PromptPlan:
        """The prompts from the baseline's prompt seed (a baseline without one: a seed named
        after the version this run would write), where the server can keep a repeated
        prompt out of its prefix cache."""
        seed = base.prompt_seed if base is not None and base.prompt_seed else None
        if seed is None:
            store = BaselineStore(self.settings.baseline_dir)
            seed = f"{deployment}/v{(store.latest(deployment) or 0) + 1}"
        self.plan = measurer.reproduce_prompts(seed)
        return self.plan

    def take_digest(self, session: PerfSession) -> dict[str, Any]:
        """The digest of this run's requests (plan/digest.py), from the probed server."""
        assert session.server is not None and session.measurer is not None
        server = session.server
        template = session.measurer.template_tokens(self.cases[0]) \
            if server.api == "openai-chat" and self.cases else None
        classes = {n: self.classes[n] for n in self.settings.text_classes}
        empty = routes.request_body(server.api, Prompt("", None, 0),
                                    self.settings.output_tokens, server.model, "digest")
        self.digest = digest.request_digest(empty, self.settings.output_tokens, template,
                                            classes)
        return self.digest

    def refusal(self, base: Baseline, requests: dict[str, Any]) -> str | None:
        """The sentence refusing to compare with ``base``, when its requests were others
        than ``requests`` (this run's digest)."""
        if base.request_digest is None:
            return None
        if self._refusal is None:
            changes = digest.differences(base.request_digest, requests)
            self._refusal = digest.refusal(f"{base.deployment} v{base.version}", changes) \
                if changes else ""
        return self._refusal or None

    def exact_in_force(self, case: Case, base: CaseBaseline | None,
                       measurer: Measurer | None) -> bool:
        """Acceptance of ``case`` is judged exactly: its repeats need not settle it. Where the
        run did not check the server repeats itself (a short warm-up), only while every
        prompt so far took the baseline's verify steps exactly."""
        if base is None or not base.prompts or base.deterministic is False or measurer is None:
            return False
        shown = measurer.deterministic.get(case.id)
        taken = measurer.taken.get(case.id)
        if shown is None and taken:
            found = self.compare_exact(measurer.finish(case, taken), base)
            return found.status == exact.ExactStatus.UNCHANGED
        return shown is True

    def compare_exact(self, measured: Measurement, base: CaseBaseline) -> exact.ExactResult:
        """The prompt-by-prompt comparison of ``measured``'s acceptance with the baseline's."""
        plan = self.plan or PromptPlan()
        return exact.compare(measured, base.prompts, base.deterministic, plan.reason)

    def with_exact(self, result: exact.ExactResult, verdict: Verdict) -> Verdict:
        """``verdict`` with the exact comparison ``result`` combined in."""
        return exact.combine(verdict, result, mode=self.settings.acceptance_mode)
