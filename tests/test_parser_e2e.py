"""The parser path through real pytest sessions of perf_tests/test_parser.py and a simulator.

Clean parsers pass; a slow parser fails the chat route's cases naming post-processing, never
the decode, while the native-route cases stay unaffected.
"""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree

import httpx
import pytest

from specperf.judge.pathverdict import judge_parser, judge_stream
from specperf.measure.paths import Figures, Parsers

ROOT = Path(__file__).resolve().parents[1]
# Verdicts compare two paths measured moments apart; at 0.2 a simulated step sleeps ~18 ms
# (reasoning at 3333), so a loaded box cannot fake a 10% gap. 200 tokens: ~70 steps each.
SCALE = 0.2
ARGS = ("--output-tokens=200",)


def project_with_paths(perf_project):
    """A perf project that also holds the parser and streaming perf tests."""
    project = perf_project()
    for name in ("test_parser.py", "test_streaming.py"):
        project.pytester.path.joinpath(name).write_text((ROOT / "perf_tests" / name).read_text())
    return project


def verdicts(xml_path: Path) -> dict[str, dict]:
    """The verdicts a run recorded, by case id, read back from its JUnit XML."""
    root = ElementTree.parse(xml_path).getroot()
    found = [json.loads(p.get("value")) for p in root.iter("property")
             if p.get("name") == "specperf_verdict"]
    return {v["case_id"]: v for v in found}


@pytest.fixture
def kimi(start_sim):
    """A simulator with the kimi_k2 reasoning and tool-call parsers (the default profile)."""
    return start_sim(time_scale=SCALE)


def _inject(sim, **faults):
    httpx.post(f"{sim.url}/_sim/faults", json=faults).raise_for_status()


@pytest.mark.slow  # a whole perf session or gate run (README: test commands)
def test_clean_parsers_pass_and_are_seen_to_run(perf_project, kimi, tmp_path):
    xml = tmp_path / "junit.xml"
    result = project_with_paths(perf_project).run(
        "-m", "parser", "--endpoint", kimi.url, *ARGS, f"--junitxml={xml}")
    result.assert_outcomes(passed=2)
    found = verdicts(xml)
    chat = found["reasoning-ctx3333 chat vs native"]
    assert "reasoning parser kimi_k2 ran (reasoning_content in every response)" in \
        chat["message"]
    assert "tool-call parser kimi_k2 ran (well-formed calls) — " in chat["message"], chat
    # Clean parsers: within tolerance, a pass -- or "noted", the contract's pass with a change
    # it is sure of inside the tolerance. Under load this client reads one path faster than
    # the other: the chat stream 2.9 % faster than the native one beside 6 workers and
    # stress-ng, the chat path 2.4 % faster (29 ms per response) beside the slow tier alone.
    stream = found["reasoning-ctx3333 chat stream vs native stream"]
    for path in (chat, stream):
        assert path["status"] in ("pass", "noted"), path
        assert "within tolerance" in path["message"], path
    result.stdout.fnmatch_lines(["streaming and parser paths (2):",
                                 "  reasoning-ctx3333 chat vs native: chat tok/s * → * vs "
                                 "native (*, limit −10%); step time * → * ms; post-processing *"])


@pytest.mark.slow  # a whole perf session or gate run (README: test commands)
def test_slow_parser_fails_the_chat_stream_naming_post_processing(perf_project, kimi, tmp_path):
    _inject(kimi, parser_chunk_ms=30)
    xml = tmp_path / "junit.xml"
    # Six rounds, as the undetermined sentence asks: the unaffected streams' delivery gap is
    # judged by its interval, and three rounds on a loaded box (t95 with 2 degrees of freedom)
    # left it straddling the tolerance.
    result = project_with_paths(perf_project).run(
        "-m", "parser or streaming", "--endpoint", kimi.url, *ARGS, "--specperf-repeats=6",
        f"--junitxml={xml}")
    out = result.stdout.str()
    result.assert_outcomes(passed=3, failed=1)
    # The sentence once, under FAILURES; the closing block's one line names the factor.
    result.stdout.fnmatch_lines([
        "chat stream delivery * → * tok/s "
        "vs the native stream (−*%, limit −10%): server "
        "decode * → * tok/s (*%, within noise); post-processing +* ms per verify step explains "
        "it — parser regression: check the reasoning and tool-call parsers, not the drafter.",
        "regressions (1), one line each *",
        "  reasoning-ctx3333 chat stream vs native stream: chat stream delivery vs native * → * "
        "(−*%, limit −10%) — parser-path regression"])
    assert "decode regression" not in out and "decodes slower" not in out
    found = verdicts(xml)
    # The per-chunk cost touches only the chat stream: the non-streaming chat route and the
    # native streams are unaffected, within tolerance (six rounds can be sure of a 1 % gap
    # between two paths: "noted", the contract's pass with a sure change inside the tolerance).
    unaffected = ["reasoning-ctx3333 chat vs native",
                  *(f"{case} stream vs non-stream" for case in ("reasoning-ctx3333",
                                                                 "padding-ctx3333"))]
    for case_id in unaffected:
        assert found[case_id]["status"] in ("pass", "noted"), found[case_id]
        assert "within tolerance" in found[case_id]["message"], found[case_id]


@pytest.mark.slow  # a whole perf session or gate run (README: test commands)
def test_slow_response_parsing_fails_the_chat_route_naming_post_processing(perf_project, kimi):
    _inject(kimi, parser_response_ms=400)
    result = project_with_paths(perf_project).run(
        "-m", "parser and not streaming", "--endpoint", kimi.url, *ARGS)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "chat tok/s * → * vs native (−*%, limit −10%): "
        "server decode * → * tok/s (*%, within noise); "
        "post-processing +* ms per response explains it — parser regression: check the "
        "reasoning and tool-call parsers, not the drafter.",
        "regressions (1), one line each *",
        "  reasoning-ctx3333 chat vs native: chat tok/s vs native * → * (−*%, limit −10%) — "
        "parser-path regression"])


@pytest.mark.slow  # a whole perf session or gate run (README: test commands)
def test_a_server_without_parsers_skips_the_parser_cases(perf_project, start_sim):
    plain = start_sim(profile="alt-eagle3", time_scale=SCALE)
    result = project_with_paths(perf_project).run(
        "-m", "parser", "--endpoint", plain.url, *ARGS, "-rs")
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["*the server names no reasoning_parser or tool_call_parser in "
                                 "/model_info*"])


# -- the verdict sentences, on given figures ------------------------------------------------------
TOLERANCES = {"tok_s": 0.10, "step_ms": 0.10, "decode_tok_s": 0.10, "avg_commit": 0.10}
KIMI = Parsers("kimi_k2", "kimi_k2")


def figs(name: str, **values: float) -> Figures:
    return Figures(name, 3, dict(values), "meta_info")


def test_a_slower_decode_on_the_chat_route_is_named_decode_not_parsers():
    native = figs("native", tok_s=29.8, decode_tok_s=31.6, step_ms=91.5, post_ms=2.0)
    chat = figs("chat", tok_s=24.1, decode_tok_s=25.2, step_ms=114.0, post_ms=5.0)
    verdict = judge_parser("reasoning-ctx3333 chat vs native", native, chat, KIMI, TOLERANCES,
                           600)
    assert verdict.message == (
        "chat tok/s 29.8 → 24.1 vs native (−19.1%, limit −10%): server decode 31.6 → 25.2 tok/s "
        "(−20.3%) explains it; post-processing +3.0 ms per response — decode regression on the "
        "chat route, not post-processing: check what the chat request changes for the server "
        "(template, tools, sampling), then the drafter.")


def test_post_processing_explains_a_gap_with_equal_decode():
    native = figs("native", tok_s=29.8, decode_tok_s=31.6, step_ms=91.5, post_ms=2.0)
    chat = figs("chat", tok_s=24.1, decode_tok_s=31.5, step_ms=91.6, post_ms=4900.0)
    verdict = judge_parser("c", native, chat, KIMI, TOLERANCES, 600)
    assert verdict.status == "fail"
    assert verdict.message == (
        "chat tok/s 29.8 → 24.1 vs native (−19.1%, limit −10%): server decode 31.6 → 31.5 tok/s "
        "(−0.3%, within noise); post-processing +4898 ms per response explains it — parser "
        "regression: check the reasoning and tool-call parsers, not the drafter.")


def test_a_parser_that_did_not_run_fails_even_when_fast():
    native = figs("native", tok_s=30.0, decode_tok_s=32.0, step_ms=90.0, post_ms=1.0)
    chat = Figures("chat", 3, {"tok_s": 30.0, "decode_tok_s": 32.0, "step_ms": 90.0,
                               "post_ms": 1.0}, "meta_info", reasoning_missing=3,
                   tool_call_problem="arguments '{\"city\": \"si' that are not a JSON object")
    verdict = judge_parser("c", native, chat, KIMI, TOLERANCES, 600)
    assert verdict.status == "fail"
    assert verdict.message == (
        "reasoning_content was missing in 3 of 3 chat responses although the server runs "
        "reasoning parser kimi_k2 — the reasoning parser did not run: check the server's "
        "--reasoning-parser and that separate_reasoning reaches it. the tool-call parser "
        "kimi_k2 returned arguments '{\"city\": \"si' that are not a JSON object on the chat "
        "route — parser regression: check the reasoning and tool-call parsers, not the drafter.")


def test_the_server_decoding_slower_while_streaming_fails():
    # A server that reports no verify steps is judged by its decode rate.
    plain = figs("native", tok_s=29.4, decode_tok_s=31.6)
    stream = figs("native stream", tok_s=24.0, decode_tok_s=25.0, delivery_tok_s=25.0)
    verdict = judge_stream("c", plain, stream, TOLERANCES)
    assert verdict.factor == "stream"
    assert verdict.message == (
        "server decode while streaming 31.6 → 25.0 tok/s vs non-streaming (−20.9%, limit "
        "−10%) — the server decodes slower while streaming: a server regression on the "
        "streaming path, not transport; check the server's stream output (stream interval, "
        "detokenizer) and the scheduler.")


def _rounds(xml_path: Path) -> list[int]:
    """Each path's measured rounds (warm-ups left out), from the run's recorded paths."""
    root = ElementTree.parse(xml_path).getroot()
    runs = [json.loads(p.get("value")) for p in root.iter("property")
            if p.get("name") == "specperf_paths"]
    return [sum(1 for s in path["measurement"]["samples"] if not s.get("warmup"))
            for run in runs for path in run["paths"].values()]


@pytest.mark.slow  # a whole perf session (README: test commands)
def test_a_path_comparison_is_answered_with_more_rounds_not_left_undetermined(perf_project,
                                                                            kimi, tmp_path):
    # 4 % per-request noise and no change: three rounds a path leave the chat route's interval
    # across its −10 % limit as often as not; the sampler adds rounds while the comparison is
    # undetermined, so it says undetermined only after the most rounds it may take.
    _inject(kimi, request_noise=0.04)
    xml = tmp_path / "junit.xml"
    result = project_with_paths(perf_project).run(
        "-m", "parser and not streaming", "--endpoint", kimi.url, *ARGS,
        "--specperf-repeats=3", "--specperf-max-repeats=8", f"--junitxml={xml}")
    chat = verdicts(xml)["reasoning-ctx3333 chat vs native"]
    rounds = _rounds(xml)
    assert len(rounds) == 2 and rounds[0] == rounds[1] and 3 <= rounds[0] <= 8, rounds
    assert chat["status"] != "fail", chat
    if chat["status"] == "undetermined":
        assert rounds[0] == 8, (rounds, chat)
        result.assert_outcomes(skipped=1)
    else:
        result.assert_outcomes(passed=1)
