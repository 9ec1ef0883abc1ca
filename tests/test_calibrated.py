"""A server without a tokenizer route: prompts calibrated on the server's own token counts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import specperf.sim

# Whole perf sessions against simulators: `pytest -m slow` (README: test commands).
pytestmark = pytest.mark.slow

PROFILES = Path(specperf.sim.__file__).parent / "profiles"


def test_no_tokenize_route_calibrates_prompt_lengths(perf_project, start_sim, tmp_path):
    profile = tmp_path / "no-tokenize.toml"
    # The default profile without its /tokenize route (an explicit switch wins over what the
    # release would give).
    assert (PROFILES / "kimi-k26-ddtree.toml").exists()
    profile.write_text('inherit = "kimi-k26-ddtree"\n\n[switches]\ntokenize = false\n')
    sim = start_sim(profile=str(profile), time_scale=0.1)
    project = perf_project()
    result = project.run("-m", "context_scaling", "--endpoint", sim.url,
                         "--baseline-dir", str(tmp_path / "b"))
    result.assert_outcomes(skipped=6)  # measured; no baseline yet
    result.stdout.fnmatch_lines(["*no /tokenize route: prompt lengths are calibrated on "
                                 "usage.prompt_tokens.*"])
    [results] = list(project.pytester.path.glob("reports/*/results.json"))
    doc = json.loads(results.read_text())
    for case_id, data in doc["measurements"].items():
        context = data["case"]["context"]
        for sample in data["samples"]:
            assert abs(sample["prompt_tokens"] - context) <= 2, (case_id, sample)
