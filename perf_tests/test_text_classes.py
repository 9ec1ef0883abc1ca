"""Acceptance depends on the text: repetitive padding commits more per step than reasoning."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.text_class


def test_padding_commits_more_than_reasoning(specperf, specperf_settings):
    context = max(specperf_settings.contexts)
    padding = specperf.measure("padding", context).summary("avg_commit")
    reasoning = specperf.measure("reasoning", context).summary("avg_commit")
    if padding is None or reasoning is None:
        pytest.skip("no acceptance source: avg commit was not measured")
    assert padding.median > reasoning.median, (
        f"at context {context} padding commits {padding.median:.2f} tokens per step and "
        f"reasoning {reasoning.median:.2f}: repetitive text should be easier to draft")
