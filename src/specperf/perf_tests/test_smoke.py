"""The deploy gate's subset: three cases that catch an acceptance or a step-time regression.

Chosen from the incident's two factors, tok/s = avg commit / step time:

- ``reasoning-ctx3333``: free-form reasoning is the real traffic, so a drafter or parser
  change that lowers acceptance on it is the regression that matters; at 3333 tokens the
  step time is mostly context-dependent, so a slower attention path shows too.
- ``padding-ctx3333``: repetitive text is where a drafter commits 7-8 tokens per step;
  a drafter that loses that shows here first, and with reasoning at the same context the
  two isolate acceptance from step time (equal context, equal step time).
- ``padding-ctx13``: the shortest context is the intercept of step time (the fixed cost
  of a verify pass: kernels, tree size), which a 3333-token case alone cannot separate
  from the per-token slope.

5553 is left to the nightly job: it doubles the cost of reasoning cases and adds no kind
of regression the 3333 cases miss. The cases are the main job's own, so they are judged
against the deployment's nightly baseline (same ids, same output length); ci/README.md
gives the cost in GPU time next to the full sweep.
"""

from __future__ import annotations

import pytest

pytestmark = [
    pytest.mark.smoke,
    pytest.mark.perf_cases(("reasoning", 3333), ("padding", 3333), ("padding", 13)),
]


def test_smoke(perf_case, measurement, specperf):
    """Each smoke case against the baseline; the failure names acceptance or step time."""
    specperf.compare(measurement)


@pytest.mark.parser
@pytest.mark.perf_cases(("reasoning", 3333))
def test_smoke_parser(perf_case, parser_paths, specperf_paths):
    """The chat route with the deployed parsers keeps up with the native route.

    Not applicable (skipped, and fine for the gate) when the server runs no parser.
    """
    specperf_paths.parser(parser_paths)
