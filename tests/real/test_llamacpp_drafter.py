"""A drafter swap on a real llama-server (issue 35): the server names its target but never its
draft model, so the fingerprint says so, and a drafter the user declares is compared: the swap
from draft.gguf to noisy.gguf is a fingerprint difference, not only an acceptance drop."""

from __future__ import annotations

import json

import pytest

from specperf.core.fingerprint import NOT_REPORTED
from specperf.servers.client import Client
from specperf.servers.probe import probe

from .conftest import results_of
from .helpers import run_suite

pytestmark = pytest.mark.real_server

# One short case: the point is the fingerprint, not the verdicts.
SHORT = ("--specperf-contexts=16", "--specperf-text-classes=padding")


def test_the_fingerprint_says_the_draft_model_is_not_reported(llama_pool, tiny):
    server = llama_pool.get(tiny.target, draft=tiny.draft)
    client = Client(server.url, timeout_s=120)
    try:
        info = probe(client, api="auto", model=None, wanted_source="auto", log_command=None,
                     simulated=False, endpoint_source="--specperf-endpoint")
    finally:
        client.close()
    assert info.fingerprint["draft_model"] == NOT_REPORTED
    assert info.fingerprint["model"] == str(tiny.target)


def test_a_declared_drafter_swap_is_named_in_the_fingerprint_differences(
        perf_project, llama_pool, tiny, tmp_path):
    project = perf_project()
    before = llama_pool.get(tiny.target, draft=tiny.draft)
    after = llama_pool.get(tiny.target, draft=tiny.noisy)
    run_suite(project, before.url, tmp_path / "r1", tmp_path / "b", "--specperf-update-baselines",
              *SHORT, f"--specperf-fingerprint=draft_model={tiny.draft.name}"
              ).stdout.fnmatch_lines(["specperf: wrote baseline *"])
    written = json.loads((tmp_path / "b" / "tiny-llama" / "v1.json").read_text())
    assert written["fingerprint"]["draft_model"] == "draft.gguf"
    result = run_suite(project, after.url, tmp_path / "r2", tmp_path / "b", *SHORT,
                       f"--specperf-fingerprint=draft_model={tiny.noisy.name}")
    assert results_of(tmp_path / "r2")["fingerprint_differences"] == [
        "draft model: draft.gguf → noisy.gguf"]
    result.stdout.fnmatch_lines(["*draft model: draft.gguf → noisy.gguf*"])
