"""A real llama-server's acceptance per draft position: ``--spec-synth-rates`` dials each
position's (unconditional) acceptance, reproducibly with the seed every request carries, and
the suite's verdict names the draft position whose conditional rate fell. The counters come
from the /metrics scrapes the traffic guard already takes around every request
(``llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position}``): no request is added."""

from __future__ import annotations

import re

import pytest

from .helpers import run_suite
from .test_llamacpp_regressions import outcomes, regressions

pytestmark = pytest.mark.real_server

CONTEXTS = ("--contexts=16,500", "--text-classes=padding")
CASES = ("padding-ctx16", "padding-ctx500")
BASE = "0.9,0.8,0.7"  # conditionally 0.90, 0.89, 0.88


def synth(rates: str) -> tuple[str, ...]:
    return ("--spec-synth-rates", rates)


def run_against(project, start_llama, tiny, rates, tmp_path, name):
    """The suite against a llama-server dialled to ``rates``: its verdicts, by case."""
    server = start_llama(tiny.target, draft=tiny.draft, extra=synth(rates))
    try:
        result = run_suite(project, server.url, tmp_path / name, tmp_path / "b", "-rA",
                           *CONTEXTS)
    finally:
        server.stop()
    text = result.stdout.str()
    seen, found = outcomes(text), regressions(text)
    assert set(seen) == set(CASES) and set(found) == set(CASES), text[-3000:]
    for case, sentence in sorted(found.items()):
        print(f"{rates} {case}: {sentence}")
    return found


def test_the_verdict_names_the_draft_position_that_fell(perf_project, start_llama, tiny,
                                                         tmp_path):
    project = perf_project()
    before = start_llama(tiny.target, draft=tiny.draft, extra=synth(BASE))
    run_suite(project, before.url, tmp_path / "r0", tmp_path / "b", "--update-baselines",
              *CONTEXTS).stdout.fnmatch_lines(["specperf: wrote baseline *"])
    before.stop()
    # Only the deepest position's acceptance falls: 0.7 → 0.1 unconditionally.
    for sentence in run_against(project, start_llama, tiny, "0.9,0.8,0.1", tmp_path,
                                "deep").values():
        assert "acceptance regression" in sentence, sentence
        assert re.search(r"Draft position 3 \(conditional acceptance\) fell from 0\.[89]\d to "
                         r"0\.[01]\d \(−\d+\.\d%, limit −15%\); positions 1–2 held\.$",
                         sentence), sentence
    # Every position's unconditional rate falls, but conditionally only the first did:
    # 0.5, then 0.45 / 0.5 = 0.9 and 0.4 / 0.45 = 0.89, as in the baseline.
    for sentence in run_against(project, start_llama, tiny, "0.5,0.45,0.4", tmp_path,
                                "first").values():
        assert "acceptance regression" in sentence, sentence
        assert re.search(r"Draft position 1 \(conditional acceptance\) fell from 0\.[89]\d to "
                         r"0\.[45]\d \(−\d+\.\d%, limit −15%\); positions 2–3 held\.$",
                         sentence), sentence
