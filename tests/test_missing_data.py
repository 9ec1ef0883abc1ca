"""Missing data is never a pass: a path comparison whose figure could not be measured says so,
fails its test, and counts as an infrastructure problem for the gate."""

from __future__ import annotations

import html
import json

from specperf.cli.runner import read_junit
from specperf.judge.pathverdict import judge_chat_stream, judge_parser, judge_stream
from specperf.measure.paths import Figures, Parsers

TOLERANCES = {"tok_s": 0.10, "step_ms": 0.10, "decode_tok_s": 0.10, "avg_commit": 0.10}
KIMI = Parsers("kimi_k2", "kimi_k2")


def figs(name: str, **values: float) -> Figures:
    return Figures(name, 3, dict(values), "meta_info")


def test_a_stream_without_server_timings_is_unmeasured_not_a_pass():
    plain = figs("native", tok_s=29.4)
    stream = figs("native stream", tok_s=28.0, delivery_tok_s=29.0, ttft_ms=120.0)
    verdict = judge_stream("c stream vs non-stream", plain, stream, TOLERANCES)
    assert (verdict.status, verdict.reason) == ("undetermined", "unmeasured")
    assert verdict.fails() is None  # not a regression; the test fails it as unmeasured
    assert verdict.message == (
        "not measured: no server decode tok/s (server timings) on the native path, no server "
        "decode tok/s (server timings) on the native stream path, so whether the server decodes "
        "slower while streaming cannot be judged — a missing figure is never a pass; check that "
        "the server returns its timings (meta_info) or serves /metrics. Client side: stream "
        "tok/s 28.0 vs 29.4 non-streaming (−4.8%); TTFT 120 ms.")


def test_a_missing_tok_s_is_unmeasured_not_zero_within_tolerance():
    native = figs("native", tok_s=30.0, decode_tok_s=32.0)
    chat = figs("chat", decode_tok_s=32.0)
    verdict = judge_parser("c chat vs native", native, chat, KIMI, TOLERANCES, 600)
    assert (verdict.status, verdict.reason) == ("undetermined", "unmeasured")
    assert verdict.message.startswith("not measured: no tok/s on the chat path, so the chat "
                                      "route against the native cannot be judged")


def test_a_chat_stream_without_delivery_rates_is_unmeasured():
    native = figs("native stream", decode_tok_s=32.0)
    chat = figs("chat stream", decode_tok_s=32.0, delivery_tok_s=30.0)
    verdict = judge_chat_stream("c", native, chat, KIMI, TOLERANCES, 600)
    assert (verdict.status, verdict.reason) == ("undetermined", "unmeasured")
    assert "no client delivery tok/s on the native stream path" in verdict.message


def test_missing_post_processing_time_reads_not_measured_never_zero():
    native = figs("native", tok_s=30.0, decode_tok_s=32.0, step_ms=90.0)
    chat = figs("chat", tok_s=30.1, decode_tok_s=32.0, step_ms=90.0, post_ms=3.0)
    verdict = judge_parser("c", native, chat, KIMI, TOLERANCES, 600)
    assert verdict.status == "pass"
    assert "post-processing n/a (not measured) per response" in verdict.message


def test_the_gate_counts_an_unmeasured_comparison_as_an_error(tmp_path):
    verdict = {"case_id": "reasoning-ctx3333 chat vs native", "status": "undetermined",
               "reason": "unmeasured", "message": "not measured: no tok/s on the chat path, so …"}
    value = html.escape(json.dumps(verdict), quote=True)
    xml = tmp_path / "junit.xml"
    xml.write_text(
        '<testsuites><testsuite><testcase classname="test_smoke" '
        'name="test_smoke_parser[reasoning-ctx3333]"><properties>'
        f'<property name="specperf_verdict" value="{value}"/>'
        '</properties><failure message="not measured">...</failure></testcase>'
        "</testsuite></testsuites>")
    [case] = read_junit(xml)
    assert (case.case_id, case.outcome) == ("reasoning-ctx3333 parser", "error")
    assert case.message == "not measured: no tok/s on the chat path, so …"
