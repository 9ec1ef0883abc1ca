"""Simulator internals without HTTP: tokenizer rule, repetition statistics, draws, calibration."""

from __future__ import annotations

import asyncio
import zlib

import pytest

from specperf.sim.faults import Faults
from specperf.sim.physics import CommitDraw, Draws, RepetitionWindow, step_ms
from specperf.sim.profile import Knots, load_profile, shipped_profiles
from specperf.sim.request import GenerationSpec
from specperf.sim.scheduler import Scheduler
from specperf.sim.tokenizer import Tokenizer, piece_id, split_pieces

SENTENCE = "Distributed systems require careful reasoning about consistency and failure. "
# context tokens -> (tok/s, avg commit, implied step ms), from the incident
INCIDENT = {13: (139.6, 4.75, 34.0), 1663: (114.2, 7.17, 63.0), 3333: (77.9, 7.90, 101.0),
            5553: (54.5, 7.85, 144.0)}


def test_tokenizer_rule() -> None:
    assert split_pieces("Hi, there!  x ") == ["Hi", ",", " there", "!", "  x", " "]
    tokenizer = Tokenizer()
    ids = tokenizer.encode("Hi, there")
    assert ids[0] == 1 and ids[1] == piece_id("Hi") == 1000 + zlib.crc32(b"Hi") % 1_000_000
    assert tokenizer.decode(ids) == "Hi, there"
    assert len(tokenizer.encode(SENTENCE)) == 12  # bos + 10 words + "."


def test_repetition_window() -> None:
    repeated = RepetitionWindow(64)
    varied = RepetitionWindow(64)
    for i in range(200):
        repeated.push(i % 7)
        varied.push(i)
    assert repeated.fill == varied.fill == 64
    assert repeated.fraction == 1.0 and varied.fraction == 0.0


def test_commit_draw_tracks_mean() -> None:
    draw = CommitDraw(Draws([0, 1]), sd=1.0, max_commit=16)
    commits = [draw.draw(4.3, 1000) for _ in range(100)]
    assert abs(sum(commits) / 100 - 4.3) < 0.05
    assert len(set(commits)) > 2  # steps still vary


def test_knots_and_step_formula() -> None:
    knots = Knots(n=(0.0, 10.0), value=(1.0, 3.0))
    assert knots(-5) == 1.0 and knots(5) == 2.0 and knots(50) == 3.0
    physics = load_profile("kimi-k26-ddtree").physics
    expected = physics.a_ms + physics.b_ms_per_token * 1000 + physics.c_ms
    assert step_ms(physics, 1000, 2, z=0.0, noise=0.01) == pytest.approx(expected)


def test_shipped_profiles() -> None:
    assert {"kimi-k26-ddtree", "alt-eagle3"} <= set(shipped_profiles())


async def _simulate(
    prompts: dict[int, list[int]], tokenizer: Tokenizer
) -> dict[int, tuple[float, ...]]:
    profile = load_profile("kimi-k26-ddtree")
    scheduler = Scheduler(profile, Faults(0), tokenizer, 1e-9, 0)
    await scheduler.start()
    results = {}
    try:
        for length, ids in prompts.items():
            request = scheduler.submit(GenerationSpec(ids, 600, ignore_eos=True))
            await request.done.wait()
            scheduler.flush_cache()
            steps = len(request.commits)
            tok_s = 600 / (request.prefill_ms + sum(request.step_ms)) * 1000
            commit = 599 / steps
            results[length] = (tok_s, commit, commit / tok_s * 1000)
    finally:
        await scheduler.stop()
    return results


def test_default_profile_reproduces_incident_in_simulated_time() -> None:
    tokenizer = Tokenizer()
    base = tokenizer.encode(SENTENCE * 600)
    prose = tokenizer.encode(" ".join(f"word{i} of line {i * 7 % 13}" for i in range(900)))
    prompts = {n: base[:n] for n in INCIDENT} | {3500: prose[:3500]}
    results = asyncio.run(_simulate(prompts, tokenizer))
    for length, target in INCIDENT.items():
        for got, want in zip(results[length], target, strict=True):
            assert abs(got / want - 1) < 0.05, (length, results[length], target)
    tok_s, commit, step = results[3500]
    assert 29 <= tok_s <= 32 and abs(commit / 2.9 - 1) < 0.05 and abs(step / 100 - 1) < 0.05
