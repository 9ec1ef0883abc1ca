"""The same-night gate decodes its parser path short (issue 52): the candidate's flags ask for
it, and the gate's decode line says what a short path can see, only when a path ran short."""

from __future__ import annotations

from pathlib import Path

from specperf.cli import reference
from specperf.settings.config import resolve


def _record(*lengths: int) -> dict:
    return {"paths": [{"case": {"id": "reasoning-ctx3333", "output_tokens": n}, "paths": {}}
                      for n in lengths]}


def test_the_candidate_decodes_its_parser_path_at_the_short_length(tmp_path: Path):
    ref = reference.Reference(tmp_path, reference.now_utc(), "http://127.0.0.1:1", "dep", 1,
                              ("padding-ctx13",), 600)
    flags = reference.judge_flags(ref)
    assert f"--specperf-path-output-tokens={reference.SHORT_TOKENS}" in flags
    # the flag is one pytest option the plugin knows
    assert resolve({"path_output_tokens": "128"}, {}, {}).path_output_tokens == 128
    assert resolve({}, {}, {}).path_output_tokens is None


def test_the_decode_line_names_the_short_parser_path_and_how_much_more_a_response_weighs():
    said = reference.path_sentence(_record(128), 600)
    assert said == ("The parser path compares the chat route with the native one at 128 tokens: "
                    "a parser cost per token weighs as much as at 600 tokens, one per response "
                    "up to 4.7 times as much.")
    assert len(said.split()) <= 40


def test_no_sentence_where_the_path_ran_at_the_long_length_or_not_at_all():
    assert reference.path_sentence(_record(600), 600) is None
    assert reference.path_sentence(_record(), 600) is None
    assert reference.path_sentence(None, 600) is None
