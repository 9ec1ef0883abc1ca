"""The suite's avg commit agrees with the real server's own numbers for the same requests:
each answer's ``timings.draft_n_accepted`` and the ``llamacpp:`` counter deltas around it,
read from a recording proxy between the suite and the server (none of the suite's parsing).
Checked on both runs of the main job (conftest.main_job), which go through such a proxy."""

from __future__ import annotations

import json
import math
import re
import statistics
from dataclasses import dataclass

import pytest
from prometheus_client.parser import text_string_to_metric_families

from .conftest import results_of
from .helpers import OUTPUT
from .llama_shared import MAIN_CASES
from .recorder import Exchange

pytestmark = pytest.mark.real_server


def counters(text: str) -> dict[str, float]:
    return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples
            if s.name.startswith("llamacpp:") and not s.labels}


@dataclass(frozen=True)
class ServerFigures:
    """One request as the server saw it."""

    n: int
    prompt: int
    draft_n: int
    accepted: int  # timings.draft_n_accepted (absent = 0: nothing was drafted)
    delta: dict[str, float]  # counter deltas between the scrapes around it

    def delta_of(self, name: str) -> float:
        return self.delta["llamacpp:" + name]


def requests_with_deltas(exchanges: list[Exchange]) -> list[ServerFigures]:
    """Every measured /completion answer with the counter deltas of the last scrape before it
    and the last one of the guard's scrapes after it (before the next request)."""
    out = []
    for i, ex in enumerate(exchanges):
        if ex.path != "/completion" or json.loads(ex.body)["n_predict"] != int(OUTPUT):
            continue
        before = next(e for e in reversed(exchanges[:i]) if e.path == "/metrics")
        after_scrapes = []
        for e in exchanges[i + 1:]:
            if e.path == "/completion":
                break
            if e.path == "/metrics":
                after_scrapes.append(e)
        old, new = counters(before.text), counters(after_scrapes[0].text)
        answer = json.loads(ex.text)
        timings = answer["timings"]
        out.append(ServerFigures(
            n=answer["tokens_predicted"], prompt=answer["tokens_evaluated"],
            draft_n=timings.get("draft_n", 0), accepted=timings.get("draft_n_accepted", 0),
            delta={k: new[k] - old[k] for k in new}))
    return out


@pytest.mark.parametrize("run", ["first", "second"])
def test_avg_commit_agrees_with_the_servers_own_numbers_within_one_percent(main_job, run):
    # the main job's runs (conftest.main_job), each recorded: the baseline run and the rerun
    recorded = getattr(main_job, run)
    order = re.findall(r"test_context_scaling\[(\S+-ctx\d+)\] ", recorded.result.stdout.str())
    data = results_of(recorded.report_dir)
    exchanges = recorded.exchanges
    # A real server is asked nothing the simulator alone serves, and its times stand as read.
    assert not [e.path for e in exchanges if e.path.startswith("/_sim/")]
    assert data["server"]["time_scale"] == 1.0 and data["server"]["simulated"] is False
    figures = requests_with_deltas(exchanges)
    assert set(order) == MAIN_CASES, order
    at = 0
    for case in dict.fromkeys(order):
        samples = data["measurements"][case]["samples"]
        ours = figures[at:at + len(samples)]
        at += len(samples)
        assert not any(s["raw"].get("discarded_attempts") for s in samples)
        measured = [(s, f) for s, f in zip(samples, ours, strict=True) if not s["warmup"]]
        for s, f in measured:
            assert (s["completion_tokens"], s["prompt_tokens"]) == (f.n, f.prompt)
            # The server's own accounting of one request: its counters moved by its timings,
            # and verify steps plus plain decodes cover the N - 1 tokens after the first.
            assert f.delta_of("spec_decode_num_accepted_tokens_total") == f.accepted
            assert f.delta_of("spec_decode_num_draft_tokens_total") == f.draft_n
            assert f.delta_of("tokens_predicted_total") == f.n
            # every target decode counts, the prompt's batches (n_batch 2048) included
            steps = f.n - 1 - f.accepted
            assert f.delta_of("n_decode_total") == steps + math.ceil(f.prompt / 2048)
            assert f.delta_of("spec_decode_num_drafts_total") <= steps
        suite = data["measurements"][case]["summaries"]["avg_commit"]["median"]
        by_timings = statistics.median((f.n - 1) / (f.n - 1 - f.accepted) for _, f in measured)
        by_counters = statistics.median(
            (f.n - 1) / (f.delta_of("n_decode_total") - math.ceil(f.prompt / 2048))
            for _, f in measured)
        verify = sum(f.delta_of("spec_decode_num_drafts_total") for _, f in measured)
        accept = sum(f.accepted for _, f in measured) / sum(f.draft_n for _, f in measured)
        print(f"{case}: avg commit suite {suite:.3f}, timings {by_timings:.3f}, counters "
              f"{by_counters:.3f}; draft acceptance {accept:.1%} over {verify:g} verify steps")
        assert suite == pytest.approx(by_timings, rel=0.01)
        assert suite == pytest.approx(by_counters, rel=0.01)
    assert at == len(figures)
