"""The fixture of the sweep-level test (perf_tests/test_sweep.py); the work is in sweeprun."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from ..core.verdict import NotJudged
from ..measure.session import PerfSession
from ..settings.hints import rerun_command
from . import sweeprun
from .conclude import conclude, not_judged
from .fixtures import state_of


@pytest.fixture
def specperf_sweep(request: pytest.FixtureRequest,
                   specperf_session: PerfSession) -> SweepChecks:
    """The sweep-level test: step time over every case, acceptance per text class."""
    return SweepChecks(request)


class SweepChecks:
    """Judges a set of cases as one sweep and fails the test with the sweep's sentence."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self.request = request
        self.state = state_of(request)

    def check(self, label: str, cases: Sequence[tuple[str, int]] | None = None) -> None:
        """Judge ``cases`` (default: the run's planned matrix) as one sweep named ``label``."""
        if self.state.settings.update_baselines:
            not_judged(self.request, "a baseline-writing run judges nothing against a baseline.")
        chosen = sweeprun.chosen_cases(self.state, cases)
        result = sweeprun.judge(self.state, chosen, label)
        if isinstance(result, NotJudged):
            not_judged(self.request, result.reason)
        marker = "smoke" if self.request.node.get_closest_marker("smoke") else \
            "context_scaling"
        settings = self.state.settings
        verdict = result.verdict(lambda *a: rerun_command(settings, *a, marker=marker))
        self.state.verdicts.append(verdict)
        self.request.node.user_properties.append(
            ("specperf_sweep", json.dumps({"label": label, "extra_requests": result.extra,
                                           "extra_s": result.extra_s}, default=str)))
        conclude(self.request, [verdict])
