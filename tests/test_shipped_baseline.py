"""The simulator's reference baseline ships in the package and is found by the embedded
simulator's main job when no baseline directory of the user's holds it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specperf.baselines import shipped
from specperf.baselines.store import BaselineStore
from specperf.settings.config import resolve
from specperf.views import summary

SIM = "sim-kimi-k26-ddtree"
ROOT = Path(__file__).resolve().parents[1]


def test_the_reference_is_in_the_package_and_the_checkout_links_to_it():
    assert BaselineStore(shipped.REFERENCE).latest(SIM) is not None
    link = ROOT / "baselines" / SIM
    assert link.is_symlink() and link.resolve() == shipped.REFERENCE / SIM


def test_an_embedded_run_without_baselines_reads_the_reference(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # baselines/ does not exist here
    settings = resolve({}, {}, {})
    assert shipped.directory(settings, SIM) == shipped.REFERENCE
    assert shipped.is_reference(shipped.directory(settings, SIM))


@pytest.mark.parametrize("cli", [{"endpoint": "http://127.0.0.1:1"}, {"update_baselines": True},
                                 {"baseline_dir": "baselines"}, {"output_tokens": "64"},
                                 {"api": "openai-chat"}])
def test_a_server_a_baseline_writing_run_or_a_given_directory_never_reads_it(tmp_path,
                                                                             monkeypatch, cli):
    monkeypatch.chdir(tmp_path)
    assert shipped.directory(resolve(cli, {}, {}), SIM) == Path("baselines")


def test_the_users_own_baseline_wins_and_another_deployment_is_not_shipped(tmp_path,
                                                                           monkeypatch):
    monkeypatch.chdir(tmp_path)
    settings = resolve({}, {}, {})
    assert shipped.directory(settings, "sim-other") == Path("baselines")
    (tmp_path / "baselines" / SIM).mkdir(parents=True)
    (tmp_path / "baselines" / SIM / "v1.json").write_text("{}")
    assert shipped.directory(settings, SIM) == Path("baselines")


def test_the_closing_block_names_the_directory_it_read(tmp_path):
    settings = resolve({}, {}, {})
    base = {"deployment": SIM, "version": 2, "created": "2026-12-01T00:00:00Z",
            "directory": str(shipped.REFERENCE), "shipped": True}
    doc = {"baseline": base, "run": {"kind": "full"}}
    assert summary.compared_with(doc, settings) == (
        f"baseline {SIM} v2 (the simulator's reference shipped with specperf, in "
        f"{shipped.REFERENCE}, as no --baseline-dir was given and baselines/ holds none; "
        "created 2026-12-01T00:00:00Z)")
    own = {**base, "directory": str(tmp_path), "shipped": False}
    assert summary.compared_with({**doc, "baseline": own}, settings) == (
        f"baseline {SIM} v2 (in {tmp_path}; created 2026-12-01T00:00:00Z)")


def test_the_reference_is_package_data():
    text = (ROOT / "pyproject.toml").read_text()
    assert '"baselines/reference/*/v*.json"' in text
    for path in (shipped.REFERENCE / SIM).glob("v*.json"):
        assert json.loads(path.read_text())["deployment"] == SIM
