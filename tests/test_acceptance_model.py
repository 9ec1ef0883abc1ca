"""The simulator's acceptance mean is generic: any repeated sentence commits like the
incident's padding, any varied prose like its reasoning text (ground truth: the
scheduler's own per-request commits)."""

from __future__ import annotations

import asyncio

import pytest

from specperf.plan.workload import generate
from specperf.sim.faults import Faults
from specperf.sim.profile import load_profile
from specperf.sim.request import GenerationSpec
from specperf.sim.scheduler import Scheduler
from specperf.sim.tokenizer import Tokenizer

# The incident's padding: avg commit per context (tokens).
INCIDENT = {1663: 7.17, 3333: 7.90, 5553: 7.85}
SENTENCES = [  # 8 to 30 words, none of them the suite's padding sentence
    "Always check your units before you submit the results. ",
    "Every morning the old lighthouse keeper climbed the narrow stairs to polish the great "
    "lens before the fishing boats returned. ",
    "The cat sat on the mat and the cat sat on the rug while the dog sat on the mat. ",
    "Order 1234 shipped to 56 Elm Street at 7:45 pm, total 89.99 dollars, reference A-77. ",
    "When the committee finally met in the drafty hall, nobody could remember who had "
    "proposed the budget, why it had doubled, or what the fund was for. ",
]


def _commits(prompts: list[list[int]], tokenizer: Tokenizer) -> list[float]:
    async def run() -> list[float]:
        scheduler = Scheduler(load_profile("kimi-k26-ddtree"), Faults(0), tokenizer, 1e-9, 0)
        await scheduler.start()
        out = []
        try:
            for ids in prompts:
                request = scheduler.submit(GenerationSpec(ids, 600, ignore_eos=True))
                await request.done.wait()
                scheduler.flush_cache()
                out.append(599 / len(request.commits))
        finally:
            await scheduler.stop()
        return out

    return asyncio.run(run())


@pytest.mark.parametrize("sentence", SENTENCES, ids=lambda s: f"{len(s.split())}words")
def test_any_repeated_sentence_commits_like_the_incidents_padding(sentence: str) -> None:
    tokenizer = Tokenizer()
    ids = tokenizer.encode(sentence * 700)
    got = _commits([ids[:n] for n in INCIDENT], tokenizer)
    for (context, want), commit in zip(INCIDENT.items(), got, strict=True):
        assert commit == pytest.approx(want, rel=0.05), (context, got)


@pytest.mark.parametrize("seed", [3, 11, 29])
def test_any_varied_prose_commits_like_the_reasoning_text(seed: int) -> None:
    tokenizer = Tokenizer()
    ids = tokenizer.encode(generate("prose", seed, 40_000))
    [commit] = _commits([ids[:3333]], tokenizer)
    assert commit == pytest.approx(2.9, rel=0.05)
