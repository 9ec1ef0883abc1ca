"""The sweep-level test: one verdict per factor from every case at once.

A step-time regression (kernels, attention backend, KV cache) moves every case the same way
and an acceptance regression (drafter, text) moves every case of a text class, so a 5 %
change that no single case can tell from noise stands out when the cases are pooled. The
cases still fail one by one with their attributed sentence; this test adds the sweep's own
sentence, with the power it reached. Statistics: src/specperf/sweep.py, sequential.py;
figures: docs/benchmarks.md §6.
"""

from __future__ import annotations

import pytest

# The cases of perf_tests/test_smoke.py (the deploy gate's subset); keep the two in step.
SMOKE_CASES = (("reasoning", 3333), ("padding", 3333), ("padding", 13))


@pytest.mark.context_scaling
@pytest.mark.parametrize("label", ["sweep"])
def test_sweep(label, specperf_sweep):
    """Step time across every planned case, acceptance per text class, α 1 % per sweep."""
    specperf_sweep.check(label)


@pytest.mark.smoke
@pytest.mark.parametrize("label", ["smoke subset"])
def test_sweep_smoke(label, specperf_sweep):
    """The same test over the deploy gate's three cases."""
    specperf_sweep.check(label, SMOKE_CASES)
