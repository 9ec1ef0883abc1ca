"""The main job against each release profile (real pytest sessions on a real simulator):
it passes where the release gives the figures, and says which source or estimate it used,
and why, where the release cannot give them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

# Whole perf sessions against simulators: the slow set (pytest -m slow).
pytestmark = pytest.mark.slow

PLAIN_VLLM = ('name = "vllm-0.33-plain"\ninherit = "vllm-0.33"\n[flags]\n'
              'enable_per_request_metrics = false\nper_request_spec_decode_metrics = "none"\n')
NO_METRICS = ('name = "sglang-0.5.23-plain"\ninherit = "sglang-0.5.23"\n[flags]\n'
              'enable_metrics = false\n')

CASES = {
    "kimi-k26-ddtree": ("SGLang 0.5.23-ddtree-sim", "response", []),
    "sglang-0.5.23": ("SGLang 0.5.23", "response", []),
    "sglang-0.5.19": ("SGLang 0.5.19", "response", [
        "specperf: no server timings: SGLang 0.5.19 has no meta_info.first_token_latency "
        "(SGLang added it in 0.5.21, with --enable-metrics); decode time is estimated with "
        "the two-point method."]),
    "sglang-0.5.14": ("SGLang 0.5.14", "response", [
        "specperf: no server timings: SGLang 0.5.14 has no meta_info.first_token_latency *"]),
    "vllm-0.33": ("vLLM 0.33.0", "response", []),
    "vllm-plain": ("vLLM 0.33.0", "metrics", [
        "specperf: no server timings: start vLLM with --enable-per-request-metrics (it then "
        "returns metrics.generation_time_ms); decode time is estimated with the two-point "
        "method.",
        "specperf: no per-request step count: start vLLM with --per-request-spec-decode-metrics "
        "summary (metrics.speculative_decoding.num_spec_steps); acceptance comes from the "
        "/metrics counters."]),
    "sglang-no-metrics": ("SGLang 0.5.23", "response", [
        "specperf: no server timings: start SGLang 0.5.23 with --enable-metrics "
        "(meta_info.first_token_latency needs it); decode time is estimated with the "
        "two-point method."]),
}


# SGLang releases without server timings: which source and estimate each uses, and why, is
# what is under test, and the baseline run prints it all. Judging a rerun against it would
# repeat vllm-plain's two-point rerun (below) in real time (time scale 1.0): ~30 s of a worker
# each, for no other check.
ONE_RUN = {"sglang-0.5.19", "sglang-0.5.14", "sglang-no-metrics"}


def _profile(name: str, tmp_path: Path) -> str:
    extra = {"vllm-plain": PLAIN_VLLM, "sglang-no-metrics": NO_METRICS}.get(name)
    if extra is None:
        return name
    path = tmp_path / f"{name}.toml"
    path.write_text(extra, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("name", list(CASES))
def test_main_job_per_release_profile(perf_project: Any, tmp_path: Path, name: str) -> None:
    server, source, notes = CASES[name]
    project = perf_project()
    # One text class: which source each release gives does not depend on the text.
    args = ("-m", "context_scaling", "--specperf-sim-profile", _profile(name, tmp_path),
            "--specperf-text-classes", "reasoning", "--baseline-dir", str(tmp_path / "baselines"),
            # Slower than the default 0.05 so a loaded 2-core box cannot spread 64-token
            # requests past the stability bound (the two-point estimate doubles the noise),
            # and a wider bound: this test is about which source each release gives, and a CI
            # box once spread two 64-token two-point cases past 0.10. For the same reason wide
            # timing limits: the load of a shared box between the two runs is not under test.
            "--specperf-sim-time-scale", "0.25", "--specperf-max-spread", "0.3",
            "--specperf-tolerances", "tok_s=0.5,step_ms=0.5,decode_tok_s=0.5,ttft_ms=1.0,slope=0.5")
    if any("no server timings" in note for note in notes):  # decode time by two points
        # The two-point estimate subtracts a short request's wall time from a long one's: at
        # ctx13, 64 tokens and time scale 0.25 the difference is ~90 ms, and a clean-clone CI
        # twice saw a stall on a loaded core drive it below zero (ImpossibleSample, rightly).
        # In real time with 128 tokens it is ~750 ms.
        args += ("--specperf-sim-time-scale", "1.0", "--specperf-output-tokens", "128")
    first = project.run(*args, "--specperf-update-baselines")
    assert not {"errors", "failed"} & set(first.parseoutcomes()), first.stdout.str()[-2000:]
    if name in ONE_RUN:
        second = first  # its notes, source and table are the baseline run's own
    else:
        second = project.run(*args, "-rs")
        # Both cases pass; the slope passes or, when a loaded box leaves its error wider than
        # the tolerance band, skips as undetermined -- never a failure (issue 13).
        outcomes = second.parseoutcomes()
        assert outcomes.get("passed", 0) >= 2 and "failed" not in outcomes, outcomes
        assert outcomes.get("passed", 0) + outcomes.get("skipped", 0) == 3, outcomes
        assert all("neither a pass nor a fail" in line for line in second.stdout.lines
                   if line.startswith("SKIPPED")), second.stdout.str()[-2000:]
    out = second.stdout.str()
    second.stdout.fnmatch_lines([f"specperf — SIMULATED (*); {server}; acceptance from {source};*"])
    if notes:
        second.stdout.fnmatch_lines(notes)
    # Every figure of the two factors is a number: a release without one falls back, never
    # shows n/a (TTFT is the server's own and reads n/a where a release does not report it).
    table = [line for line in out.splitlines() if " | padding " in line or " | reasoning " in line]
    assert len(table) == 2 and not any("n/a" in "|".join(line.split("|")[2:6])
                                       for line in table), table
