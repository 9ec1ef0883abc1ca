"""Acceptance depends on the text: repetitive padding commits more per step than reasoning."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.text_class

# Below this the prompt holds too few repeats of the padding sentence for a drafter to
# exploit: at 13 tokens both classes commit alike (the incident's 4.75).
MIN_CONTEXT = 1024


def test_padding_commits_more_than_reasoning(largest_context_by_class):
    if not {"padding", "reasoning"} <= set(largest_context_by_class):
        pytest.skip("needs both the padding and the reasoning class in --specperf-text-classes")
    padding = largest_context_by_class["padding"]
    if padding.case.context < MIN_CONTEXT:
        pytest.skip(f"the largest planned context, {padding.case.context}, is too short for "
                    f"repetition to show (needs >= {MIN_CONTEXT} tokens)")
    reasoning = largest_context_by_class["reasoning"]
    p, r = padding.summary("avg_commit"), reasoning.summary("avg_commit")
    if p is None or r is None:
        pytest.skip("no acceptance source: avg commit was not measured")
    assert p.median > r.median, (
        f"at context {padding.case.context} padding commits {p.median:.2f} tokens per step and "
        f"reasoning {r.median:.2f}: repetitive text should be easier to draft")
