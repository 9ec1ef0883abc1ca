"""The one measured request in whole pytest sessions of perf_tests/test_parser.py and
test_streaming.py: a foreign request in the middle of every request, or an output collapsed
into a loop, is a pytest error with one sentence naming the case and its path — the main
job's guards, now on every path."""

from __future__ import annotations

import httpx
import pytest

from test_parser_e2e import ARGS, SCALE, project_with_paths

pytestmark = pytest.mark.slow  # whole perf sessions against a simulator

SEEN = "1 foreign request ran during the measurement"


def _contaminated(case: str, path: str = "native") -> str:
    return (f"ContaminatedMeasurement: {case} ({path}, /generate): {SEEN}; every one of 4 "
            f"attempts was disturbed by other traffic on the server ({'; '.join([SEEN] * 4)}). "
            "Measure on an idle server: stop other clients or take the endpoint out of rotation.")


def test_foreign_traffic_during_the_streaming_comparison_is_an_error(perf_project, start_sim):
    sim = start_sim(time_scale=SCALE)
    httpx.post(f"{sim.url}/_sim/faults", json={
        "foreign_output": 4, "foreign_prompt": 8, "foreign_delay_ms": 100.0}).raise_for_status()
    result = project_with_paths(perf_project).run("-m", "streaming", "--endpoint", sim.url,
                                                  *ARGS)
    # The parser comparison's streamed pair is a streaming case too: its first request is a
    # native stream's.
    result.assert_outcomes(errors=3)
    result.stdout.fnmatch_lines([_contaminated("reasoning-ctx3333", "native stream"),
                                 _contaminated("reasoning-ctx3333"),
                                 _contaminated("padding-ctx3333")])
    assert "Traceback" not in result.stdout.str()


def test_a_looping_output_in_the_parser_comparison_is_an_error(perf_project, start_sim):
    sim = start_sim(time_scale=SCALE)
    httpx.post(f"{sim.url}/_sim/faults", json={"loop_output": True}).raise_for_status()
    result = project_with_paths(perf_project).run("-m", "parser", "--endpoint", sim.url, *ARGS)
    result.assert_outcomes(errors=2)  # the parser case and its stream twin
    result.stdout.fnmatch_lines([
        "DegenerateOutput: reasoning-ctx3333 (native*, /generate): the output collapsed into a "
        "loop (*% of its 8-grams repeat, limit 50%; the class's own text repeats 0%): a loop is "
        "easy to draft and inflates acceptance, so the case cannot be judged. Check the model "
        "and sampling settings (greedy decoding on this prompt loops)."])
    assert "Traceback" not in result.stdout.str()
