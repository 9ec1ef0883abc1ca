"""Every path takes the measurer's one attempt (Measurer.attempt), so the main job's guards
hold on the chat route with its parsers and on streams too: an output collapsed into a loop
(the simulator's ``loop_output`` fault) and a foreign request in the middle of ours (its
``foreign_output`` fault) are errors naming the path, against a real simulator process."""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any

import httpx
import pytest

from specperf.core.errors import ContaminatedMeasurement, DegenerateOutput, EndpointError
from specperf.measure import guard
from specperf.measure.paths import Path, PathSampler, chat_path, deployed_parsers, native_path
from specperf.measure.session import PerfSession
from specperf.plan.workload import Case, Prompt
from specperf.servers import routes
from specperf.servers.client import Client
from specperf.settings.config import resolve
from specperf.views import page

# The default profile names kimi_k2's reasoning and tool-call parsers: the chat route engages
# both, and a loop in the thinking they split out counts. The reasoning class's own text
# hardly repeats, so the loop limit is the 50 % floor.
CASE = Case("reasoning", 512, 64)
SHORT_MIDWAY = {"foreign_output": 4, "foreign_prompt": 8, "foreign_delay_ms": 100.0}


@pytest.fixture(scope="module")
def sim(start_sim: Callable[..., Any]) -> Any:
    return start_sim(time_scale=0.2)


@pytest.fixture
def sampler(sim: Any, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
            ) -> Iterator[PathSampler]:
    monkeypatch.setenv("SPECPERF_LOCK_DIR", str(tmp_path))  # the session's own GPU lock
    httpx.post(f"{sim.url}/_sim/reset").raise_for_status()
    settings = resolve({"endpoint": sim.url, "contexts": "512", "output_tokens": "64",
                        "text_classes": "reasoning", "repeats": "1", "warmup": "0"}, {}, {})
    perf = PerfSession(settings)
    perf.start()
    try:
        assert perf.measurer is not None
        yield PathSampler(perf, deployed_parsers(perf.measurer.client))
    finally:
        perf.close()
        httpx.post(f"{sim.url}/_sim/reset").raise_for_status()


def _faults(url: str, **fields: Any) -> None:
    httpx.post(f"{url}/_sim/faults", json=fields).raise_for_status()


def _looped_units(url: str, path: Path) -> Sequence[Hashable]:
    """What the degenerate-output guard reads of a plain request on ``path`` while the loop
    fault is on (the loop does not depend on the prompt): ids, else thinking and answer."""
    prompt = Prompt(text="Say something.", input_ids=None, tokens=-1)
    route, body = routes.request_body(path.api, prompt, CASE.output_tokens, None, "plain",
                                      path.options)
    client = Client(url)
    try:
        if path.options.stream:
            comp = routes.parse_stream(path.api, client.stream_json(route, body).events).completion
        else:
            comp = routes.parse(path.api, client.post_json(route, body).data)
    finally:
        client.close()
    return guard.output_units(" ".join(t for t in (comp.reasoning, comp.text) if t), comp.ids)


def _loop_message(where: str, units: Sequence[Hashable], norm: float) -> str:
    rep, limit = guard.repetition(units), guard.degenerate_limit(norm)
    return (f"{where}: the output collapsed into a loop ({rep:.0%} of its 8-grams repeat, "
            f"limit {limit:.0%}; the class's own text repeats {norm:.0%}): a loop is easy to "
            "draft and inflates acceptance, so the case cannot be judged. Check the model and "
            "sampling settings (greedy decoding on this prompt loops).")


@pytest.mark.parametrize("kind", ["chat", "chat stream", "native stream"])
def test_a_looping_output_is_an_error_on_the_parser_and_stream_paths(sim, sampler, kind):
    path = {"chat": chat_path(sampler.parsers),
            "chat stream": chat_path(sampler.parsers, stream=True),
            "native stream": native_path("sglang", stream=True)}[kind]
    _faults(sim.url, loop_output=True)
    units = _looped_units(sim.url, path)
    norm = guard.class_norm(sampler.measurer.prompts.classes["reasoning"])
    assert guard.repetition(units) > guard.degenerate_limit(norm)  # the fault loops
    with pytest.raises(DegenerateOutput) as err:
        sampler.measure(CASE, [path])
    route = routes.PATHS[path.api]
    assert str(err.value) == _loop_message(f"reasoning-ctx512 ({kind}, {route})", units, norm)


def test_the_same_paths_pass_the_guard_without_the_fault(sampler):
    paths = [chat_path(sampler.parsers, stream=True), native_path("sglang", stream=True)]
    run = sampler.measure(CASE, paths)
    record = run.to_dict()
    shown = page.section("paths", {"paths": [record]})  # the report's paths section
    for path in paths:
        [sample] = run.measurements[path.name].measured
        assert sample.raw["repetition"] < guard.DEGENERATE_FLOOR
        assert "discarded_attempts" not in sample.raw
        # The record carries the medians the path verdicts judge; the report shows those.
        got = record["paths"][path.name]["figures"]
        assert got == run.figures(path.name).values
        assert got["delivery_tok_s"] == sample.raw["stream"]["delivery_tok_s"]
        assert (f'<td>{path.name}</td><td>/{"v1/chat/completions" if path.chat else "generate"}'
                f'</td><td>yes</td><td class="num">{got["tok_s"]:.1f}</td>') in shown


def test_a_foreign_request_in_the_middle_of_a_chat_stream_is_an_error(sim, sampler):
    _faults(sim.url, **SHORT_MIDWAY)
    with pytest.raises(ContaminatedMeasurement) as err:
        sampler.measure(CASE, [chat_path(sampler.parsers, stream=True)])
    seen = "1 foreign request ran during the measurement"
    assert str(err.value) == (
        f"reasoning-ctx512 (chat stream, /v1/chat/completions): {seen}; every one of 4 "
        f"attempts was disturbed by other traffic on the server ({'; '.join([seen] * 4)}). "
        "Measure on an idle server: stop other clients or take the endpoint out of rotation.")


def _ours(url: str) -> list[dict[str, Any]]:
    """Our finished requests of the full length, from the simulator's ground truth."""
    truth = httpx.get(f"{url}/_sim/truth").json()["requests"]
    return [r for r in truth if not r["background"] and r["completion_tokens"] == 64
            and r["finish_reason"] and r["finish_reason"]["type"] == "length"]


RETRIED = ("a retried attempt of this request also ran, so the /metrics bracket covers more "
           "than one request")


def test_a_path_whose_steps_come_from_metrics_keeps_no_retried_attempt(sim, sampler):
    """Without spec fields a path's steps are the /metrics bracket's: the exact check. A
    response dropped after the server finished it is retried by the client, so two of our
    requests finished inside the bracket: the attempt is discarded, and every kept sample's
    steps are exactly its own request's (ground truth)."""
    path = native_path("sglang")
    sampler.measurer.client.backoff_s = 0.0
    _faults(sim.url, drop_rate=0.5, omit_spec_fields=True)
    seen: list[str] = []
    for repeat in range(6):
        before = len(_ours(sim.url))
        try:
            sample = sampler.sample(CASE, path, repeat, warmup=False)
        except EndpointError:
            continue  # every client retry dropped: no sample, no number
        seen += sample.raw.get("discarded_attempts", [])
        ours = _ours(sim.url)
        assert sample.acceptance_source == "metrics" and len(ours) > before
        assert sample.verify_steps == len(ours[-1]["commits"])
    assert seen, "the fault dropped no response: nothing was checked"
    assert set(seen) == {RETRIED}
