"""The batching lever: one case at concurrency levels 1, 2, 4, 8 (--specperf-concurrency-levels).

Each level is a burst of C concurrent requests of the same class and context, started
together, repeated like any case; it is judged like a case (tok/s per request, avg commit,
step time, attributed) and on its aggregate tok/s. The batch fit judges how step time grows
with batch size against the baseline's slope.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.concurrency_scaling


def test_concurrency(concurrency, concurrency_level, specperf_concurrency):
    """Each level against its baseline; the failure names acceptance or step time."""
    specperf_concurrency.compare(concurrency_level)


def test_batch_fit(concurrency_levels, specperf_concurrency):
    """Step time per extra request in the batch against the baseline's slope."""
    specperf_concurrency.fit(concurrency_levels)
