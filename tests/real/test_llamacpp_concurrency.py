"""The concurrency levels against a real llama-server with four slots (``-np 4``): the server
batches a burst's requests into shared verify steps, and every request keeps its own step
count, the one its answer's ``timings`` give. Checked against the server's own figures, read
from a recording proxy between the suite and the server (none of the suite's parsing): per
request ``N − 1 − draft_n_accepted``, per burst the ``llamacpp:`` counter deltas around it.
Then a clean rerun against the fresh concurrency baseline passes.

Two runs, shared by both tests (run once): the baseline run takes its acceptance from the
``/metrics`` counters, the rerun from each answer; both go through a recording proxy and both
are checked burst by burst against the server's own figures."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

import pytest

from .conftest import results_of
from .helpers import CONCURRENCY_OUTPUT, assert_skips_undetermined, run_concurrency
from .llama_shared import RecordedRun, recorded
from .recorder import Exchange
from .test_llamacpp_agreement import counters

pytestmark = pytest.mark.real_server

LEVELS = (1, 2, 4)


@dataclass(frozen=True)
class ServerBurst:
    """One burst as the server saw it: each answer's own steps, the counters' moves."""

    steps: tuple[int, ...]  # per answer, N - 1 - timings.draft_n_accepted
    tokens: tuple[int, ...]  # per answer, tokens_predicted
    delta: dict[str, float]
    busy: float  # the gauge n_busy_slots_per_decode: mean over the decodes since the scrape

    def delta_of(self, name: str) -> float:
        return self.delta["llamacpp:" + name]


def server_bursts(exchanges: list[Exchange]) -> list[ServerBurst]:
    """The measured /completion answers grouped by the /metrics scrapes between them (a burst
    is bracketed by the guard's scrape before it and its scrape after it)."""
    bursts, group, before = [], [], None
    for ex in exchanges:
        if ex.path == "/metrics":
            if group:
                bursts.append(_burst(group, before, ex))
                group = []
            before = ex
        elif ex.path == "/completion" and \
                json.loads(ex.body)["n_predict"] == int(CONCURRENCY_OUTPUT):
            group.append(json.loads(ex.text))
    assert not group, "a burst without the guard's scrape after it"
    return bursts


def _burst(answers: list[dict], before: Exchange | None, after: Exchange) -> ServerBurst:
    assert before is not None, "a burst without the guard's scrape before it"
    old, new = counters(before.text), counters(after.text)
    return ServerBurst(
        steps=tuple(a["tokens_predicted"] - 1 - a["timings"].get("draft_n_accepted", 0)
                    for a in answers),
        tokens=tuple(a["tokens_predicted"] for a in answers),
        delta={k: new[k] - old[k] for k in new},
        busy=new["llamacpp:n_busy_slots_per_decode"])


def suite_bursts(data: dict) -> list[dict]:
    """The record's bursts in the order they ran (levels in test order, warm-ups first)."""
    section = data["concurrency"]
    assert [row["concurrency"] for row in section["levels"]] == list(LEVELS)
    return [b for c in LEVELS for b in section["bursts"][f"reasoning-ctx16-c{c}"]]


@dataclass(frozen=True)
class Levels:
    """The concurrency runs: a baseline with the counters as acceptance source, then a rerun
    (acceptance from the answers) against it."""

    first: RecordedRun
    second: RecordedRun


@pytest.fixture
def levels(llama_shared, perf_project, llama_pool, tiny, tmp_path_factory) -> Levels:
    def make() -> Levels:
        server = llama_pool.get(tiny.target, draft=tiny.draft, slots=4)
        project = perf_project()
        root = tmp_path_factory.mktemp("concurrency")
        every = ",".join(str(c) for c in LEVELS)

        def first(url, report_dir):
            return run_concurrency(project, url, report_dir, root / "b", every,
                                   "--specperf-update-baselines", "--specperf-acceptance-source",
                                   "metrics")

        def second(url, report_dir):
            return run_concurrency(project, url, report_dir, root / "b", every, "-rA")

        return Levels(recorded(server.url, root / "r1", first),
                      recorded(server.url, root / "r2", second))

    return llama_shared.get("concurrency levels", make)


def check_bursts(run: RecordedRun) -> dict[int, list[float]]:
    """Every burst of ``run``: its requests' own steps are the server's, request by request and
    over the burst; the busy-slots gauge of each burst, by level."""
    ours, theirs = suite_bursts(results_of(run.report_dir)), server_bursts(run.exchanges)
    assert len(ours) == len(theirs), (len(ours), len(theirs))
    batched: dict[int, list[float]] = {}
    for burst, seen in zip(ours, theirs, strict=True):
        c = burst["concurrency"]
        assert not burst["raw"].get("discarded_attempts"), burst["raw"]
        assert len(seen.steps) == c and seen.delta_of("tokens_predicted_total") == sum(
            seen.tokens) == c * int(CONCURRENCY_OUTPUT)
        steps = [s["verify_steps"] for s in burst["samples"]]
        # Every request's own steps exist at every level, and are the server's, request by
        # request (the burst's answers in any order: they finish in their own order)...
        assert None not in steps, burst
        assert Counter(steps) == Counter(seen.steps), (c, steps, seen.steps)
        # ...and over the burst they are the server's counters: all but the accepted drafts
        # of the N - 1 tokens after each first one, at least its verify steps (plain decodes
        # are the rest).
        assert burst["own_steps"] == sum(seen.tokens) - c \
            - seen.delta_of("spec_decode_num_accepted_tokens_total")
        assert burst["server_steps"] == seen.delta_of("spec_decode_num_drafts_total") \
            <= burst["own_steps"]
        assert burst["server_tokens"] == seen.delta_of("tokens_predicted_total")
        batched.setdefault(c, []).append(seen.busy)
    # The server did batch the requests of a burst: more than one busy slot per decode.
    assert all(busy > 1.0 for c, seen_busy in batched.items() if c > 1 for busy in seen_busy), \
        batched
    print(f"{len(ours)} bursts: own steps equal the server's; busy slots per decode "
          + ", ".join(f"C={c}: {min(b):.2f}-{max(b):.2f}" for c, b in sorted(batched.items())))
    return batched


def test_per_request_steps_are_the_servers_own_over_every_burst_and_a_rerun_passes(levels):
    levels.first.result.stdout.fnmatch_lines([
        "specperf: wrote concurrency baseline */tiny-llama/concurrency/v1.json",
        "specperf: report * (this run: concurrency levels 1,2,4 of reasoning-ctx16)"])
    check_bursts(levels.second)
    second = levels.second.result
    outcomes = second.parseoutcomes()
    # Each level and the batch fit pass, or skip as undetermined with the sentence -- never
    # fail. A slope on 2 shared cores moves by a third between runs, as the context fit's does
    # (issue 13), and one level's step time once doubled in CI (5.3 → 10.6 ms at C=1, the cores
    # taken by something else): an interval that wide straddles any limit.
    assert outcomes.get("passed", 0) >= len(LEVELS) - 1 and "failed" not in outcomes \
        and "errors" not in outcomes, second.stdout.str()[-3000:]
    assert outcomes.get("passed", 0) + outcomes.get("skipped", 0) == len(LEVELS) + 1
    assert_skips_undetermined(second.stdout.str())
    second.stdout.fnmatch_lines(["specperf — *; concurrency baseline tiny-llama v1 "
                                 "(*/tiny-llama/concurrency/v1.json, created *)"])
    data = results_of(levels.second.report_dir)
    assert data["server"]["acceptance_source"] == "response"
    for row in data["concurrency"]["levels"]:
        print(f"C={row['concurrency']}: {row['tok_s']:.1f} tok/s per request, aggregate "
              f"{row['agg_tok_s']:.1f}, avg commit {row['avg_commit']:.2f}, step "
              f"{row['step_ms']:.2f} ms (server {row['server_step_ms']:.2f} ms)")


def test_with_the_counters_as_acceptance_source_each_request_keeps_its_own_steps(levels):
    """A /metrics bracket cannot be split among a burst's requests; each answer's timings
    still count its own steps, whatever the run's acceptance source."""
    result = levels.first.result
    assert "errors" not in result.parseoutcomes(), result.stdout.str()[-3000:]
    assert results_of(levels.first.report_dir)["server"]["acceptance_source"] == "metrics"
    check_bursts(levels.first)
