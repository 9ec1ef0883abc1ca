"""specperf explain --endpoint against a real llama-server while a load generator runs: the
avg commit and step time it derives from /metrics alone agree within 5 % with the suite's own
reading of the same requests (the llama.cpp adapter's parse of each answer's timings:
servers/llamacpp.py), explained against the main job's baseline of the same server."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import pytest

from explain_load import Load, prompt_ids
from specperf.cli import explain as cli
from specperf.servers import llamacpp

from .helpers import OUTPUT
from .llama import LlamaPool
from .llama_shared import MainJob
from .tinymodels import ModelSet

pytestmark = pytest.mark.real_server
CONTEXT = 2000  # a main-job context (llama_shared.MAIN_CONTEXTS)
WINDOW_S = 12.0


def body(ids: list[int], output: int) -> dict[str, Any]:
    return {"prompt": ids, "n_predict": output, "ignore_eos": True, "cache_prompt": False,
            "temperature": 0, "seed": llamacpp.SEED}


def test_live_figures_agree_with_the_suites_reading(
        main_job: MainJob, llama_pool: LlamaPool, tiny: ModelSet,
        capsys: pytest.CaptureFixture[str]) -> None:
    server = llama_pool.get(tiny.target, draft=tiny.draft)  # the main job's server
    [deployment] = [p.name for p in main_job.baseline_dir.iterdir() if p.is_dir()]
    ids = prompt_ids(server.url, "reasoning", CONTEXT, field="content")
    parser = argparse.ArgumentParser(prog="specperf")
    cli.add_subcommand(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["explain", "--deployment", deployment, "--baseline-dir",
                              str(main_job.baseline_dir), "--endpoint", server.url,
                              "--window", str(WINDOW_S), "--class", "reasoning", "--context",
                              str(CONTEXT), "--json"])
    # One prompt, greedy: every request commits the same steps, so the window's requests
    # and the suite's reading of them are the same requests whichever edge one falls on.
    with Load(server.url, ids, int(OUTPUT), body=body, route=llamacpp.PATH,
              nonce=False) as load:
        deadline = time.monotonic() + 120
        while load.finished < 1:
            assert time.monotonic() < deadline and not load.errors, load.errors
            time.sleep(0.05)
        code = args.run(args)
    doc = json.loads(capsys.readouterr().out)
    start, end = doc["live"]["read_at"]
    replies = [llamacpp.parse(r) for at, r in load.replies if start < at <= end]
    assert len(replies) >= 2, f"{len(replies)} requests finished in the window"
    steps = sum(c.verify_steps or 0 for c in replies)
    commit = sum(c.completion_tokens - 1 for c in replies) / steps
    step_ms = 1000 * sum((c.e2e_s or 0) - (c.ttft_s or 0) for c in replies) / steps
    obs = doc["observation"]
    assert obs["avg_commit"] == pytest.approx(commit, rel=0.05)
    assert obs["step_ms"] == pytest.approx(step_ms, rel=0.05)
    assert doc["live"]["requests"] == pytest.approx(len(replies), abs=1)
    # Explained against the main job's baseline of this server (its verdict depends on this
    # box's load against the baseline's night: either word, but always from that baseline).
    assert code in (0, 1) and doc["prediction"]["deployment"] == deployment
    assert "reasoning-ctx2000" in doc["prediction"]["avg_commit"]["source"]
    assert doc["observation"]["sources"]["context"] == "--context"


def test_an_unreachable_endpoint_is_infrastructure_before_the_baseline(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The live form checks the server first (cli/explain.py): a port nothing listens on is
    exit 3 with the reachability sentence, whatever the baseline."""
    parser = argparse.ArgumentParser(prog="specperf")
    cli.add_subcommand(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["explain", "--deployment", "nowhere", "--baseline-dir",
                              str(tmp_path), "--endpoint", "http://127.0.0.1:9"])
    assert args.run(args) == 3
    assert capsys.readouterr().err.startswith(
        "specperf explain: specperf cannot reach the endpoint http://127.0.0.1:9 (from "
        "--endpoint): tried GET /health and the connection failed")
