"""`specperf bisect` on a real llama-server: the versions are draft models, the deploy command
(examples/llama_deploy.py) restarts the server with each one's draft. Three good drafts, a
broken checkpoint (its file is missing: the deploy fails), then two noisy drafts: the first
noisy one is named, by acceptance, and the broken one is skipped and named."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from specperf.cli import main

from .llama import free_port
from .tinymodels import ModelSet

pytestmark = pytest.mark.real_server

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "examples" / "llama_deploy.py"


def test_bisect_names_the_first_noisy_draft_by_acceptance_and_skips_the_broken_one(
        llama_binary: Path, tiny: ModelSet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SPECPERF_LOCK_DIR", str(tmp_path / "locks"))
    drafts = [("d1", tiny.draft), ("d2", tiny.draft), ("broken", tmp_path / "missing.gguf"),
              ("d3", tiny.draft), ("n1", tiny.noisy), ("n2", tiny.noisy)]
    versions = tmp_path / "drafts.jsonl"
    versions.write_text("".join(json.dumps({"name": n, "draft": str(p)}) + "\n"
                                for n, p in drafts))
    port, state = free_port(), tmp_path / "box"
    deploy = (f"{sys.executable} {DEPLOY} --state {state} deploy --binary {llama_binary} "
              f"--target {tiny.target} --port {port} --versions {versions} {{version}} "
              "-- -t 1 -c 4096 --prio 2 --prio-batch 2")
    try:
        code = main(["bisect", "--endpoint", f"http://127.0.0.1:{port}", "--versions",
                     str(versions), "--deploy", deploy, "--contexts", "16,512", "--classes",
                     "padding,reasoning", "--output-tokens", "64", "--deploy-timeout", "120",
                     "--json", "--html", str(tmp_path / "bisect.html")])
    finally:  # the bisect restored n2 on the box: stop it
        subprocess.run([sys.executable, str(DEPLOY), "--state", str(state), "stop"],
                       check=False, timeout=60)
    said = capsys.readouterr()
    doc = json.loads(said.out)
    why = f"{said.err[-4000:]}\n{json.dumps(doc['factors'], indent=1)[:4000]}"  # its progress
    by_factor = {f["factor"]: f for f in doc["factors"]}
    assert by_factor["acceptance"]["status"] == "found", why
    assert by_factor["acceptance"]["first_bad"] == "n1"
    assert by_factor["acceptance"]["culprit_change"]["high"] < 0
    skipped = {v["name"]: v["skipped"] for v in doc["versions"] if v["state"] == "skipped"}
    assert skipped == {"broken": "the deploy command exited 1: llama_deploy: draft model "
                                 f"{tmp_path / 'missing.gguf'} of broken does not exist"}, why
    # timing on a shared CPU box may move too; whatever else moved must not blame the skip
    assert all(f["first_bad"] != "broken" for f in doc["factors"])
    assert code in (0, 6)
