"""The acceptance sources' parsers on realistic input."""

from __future__ import annotations

from datetime import datetime

from prometheus_client.parser import text_string_to_metric_families

from specperf.servers.acceptance import avg_commit_from_windows, parse_decode_log, parse_metrics

EXPOSITION = """\
# HELP sglang:spec_verify_calls_total Verify forward passes
# TYPE sglang:spec_verify_calls_total counter
sglang:spec_verify_calls_total{model_name="kimi",tp_rank="0"} 120.0
sglang:spec_verify_calls_total{model_name="kimi",tp_rank="1"} 3.0
sglang:spec_verify_calls_created{model_name="kimi",tp_rank="0"} 1.7e9
# HELP sglang:generation_tokens_total Generation tokens
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{is_streaming="false",model_name="kimi"} 900.0
sglang:generation_tokens_total{is_streaming="true",model_name="kimi"} 100.0
# HELP sglang:num_requests_total Requests
# TYPE sglang:num_requests_total counter
sglang:num_requests_total{model_name="kimi"} 7.0
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="kimi"} 0.0
sglang:num_queue_reqs{model_name="kimi"} 2.0
# TYPE sglang:e2e_request_latency_seconds histogram
sglang:e2e_request_latency_seconds_bucket{le="0.1",model_name="kimi"} 1.0
sglang:e2e_request_latency_seconds_bucket{le="+Inf",model_name="kimi"} 7.0
sglang:e2e_request_latency_seconds_count{model_name="kimi"} 7.0
sglang:e2e_request_latency_seconds_sum{model_name="kimi"} 12.5
sglang:spec_verify_calls_totally_different{model_name="kimi"} 99.0
"""


def test_only_the_series_specperf_reads_are_parsed_and_summed_over_labels():
    snap = parse_metrics(EXPOSITION)
    assert (snap.verify_calls, snap.generation_tokens, snap.requests) == (123.0, 1000.0, 7.0)
    assert (snap.running, snap.queued) == (0.0, 2.0)
    assert not snap.idle


def test_the_filtered_parse_agrees_with_prometheus_clients_full_parse():
    full: dict[str, float] = {}
    for family in text_string_to_metric_families(EXPOSITION):
        for sample in family.samples:
            full[sample.name] = full.get(sample.name, 0.0) + sample.value
    snap = parse_metrics(EXPOSITION)
    assert snap.verify_calls == full["sglang:spec_verify_calls_total"]
    assert snap.generation_tokens == full["sglang:generation_tokens_total"]


LOG = """\
[2026-11-29 10:00:00 TP0] Prefill batch. #new-seq: 1, #new-token: 3333
[2026-11-29 10:00:02 TP0] Decode batch, #running-req: 1, #token: 3400, token usage: 0.01, accept len: 7.00, accept rate: 0.40, cuda graph: True, gen throughput (token/s): 70.00, #queue-req: 0
[2026-11-29 10:00:06 TP0] Decode batch, #running-req: 1, #token: 3700, token usage: 0.01, accept len: 8.00, accept rate: 0.45, cuda graph: True, gen throughput (token/s): 80.00, #queue-req: 0
[2026-11-29 10:00:10 TP0] Decode batch. #running-req: 1, #token: 4000, token usage: 0.01, accept len: 7.50, gen throughput (token/s): 75.00, #queue-req: 0, \
"""  # noqa: E501


def test_decode_windows_in_both_formats_and_the_partial_first_window_dropped():
    windows = parse_decode_log(LOG.splitlines())
    assert [w.accept_len for w in windows] == [7.0, 8.0, 7.5]
    start, end = datetime(2026, 11, 29, 10, 0, 1), datetime(2026, 11, 29, 10, 0, 11)
    # The first window may hold steps from before the request: it is dropped.
    assert avg_commit_from_windows(windows, start, end) == 7.75
