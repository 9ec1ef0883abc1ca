"""The main job: tok/s, avg commit and step time across context lengths, per text class."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.context_scaling


def test_context_scaling(perf_case, measurement, specperf):
    """Each case against its baseline; the failure names acceptance or step time."""
    specperf.compare(measurement)


def test_context_fit(text_class, class_measurements, specperf):
    """Step time per 1k context of each class against the baseline's slope."""
    specperf.fit(text_class)
