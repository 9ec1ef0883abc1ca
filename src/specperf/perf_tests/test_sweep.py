"""The sweep-level test: one verdict per factor from every case at once.

A step-time regression (kernels, attention backend, KV cache) moves every case the same way
and an acceptance regression (drafter, text) moves every case of a text class, so a 5 %
change that no single case can tell from noise stands out when the cases are pooled. The
cases still fail one by one with their attributed sentence; this test adds the sweep's own
sentence, with the power it reached. Statistics: src/specperf/judge/sweep/estimate.py,
factortest.py, core/sequential.py;
figures: docs/benchmarks.md §6.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from specperf.plugin import sweeprun
from specperf.plugin.sweepfixtures import SweepChecks

# The cases of perf_tests/test_smoke.py (the deploy gate's subset); keep the two in step.
SMOKE_CASES = (("reasoning", 3333), ("padding", 3333), ("padding", 13))


@pytest.fixture
def sweep_cases(request: pytest.FixtureRequest, label: str,
                specperf_sweep: SweepChecks) -> Sequence[tuple[str, int]] | None:
    """The sweep's cases (a ``perf_cases`` marker, else the planned matrix), measured and
    judged during setup: a case or top-up that errors makes the test an error, not a failure."""
    marker = request.node.get_closest_marker("perf_cases")
    cases: Sequence[tuple[str, int]] | None = None if marker is None else marker.args
    state = specperf_sweep.state
    sweeprun.prepare(state, sweeprun.chosen_cases(state, cases), label)
    return cases


@pytest.mark.context_scaling
@pytest.mark.parametrize("label", ["sweep"])
def test_sweep(label, sweep_cases, specperf_sweep):
    """Step time across every planned case, acceptance per text class, α 1 % per sweep."""
    specperf_sweep.check(label, sweep_cases)


@pytest.mark.smoke
@pytest.mark.perf_cases(*SMOKE_CASES)
@pytest.mark.parametrize("label", ["smoke subset"])
def test_sweep_smoke(label, sweep_cases, specperf_sweep):
    """The same test over the deploy gate's three cases."""
    specperf_sweep.check(label, sweep_cases)
