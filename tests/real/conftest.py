"""The real-server tier: real ``llama-server`` processes with tiny generated models.

Selected only by ``-m real_server`` (``ci/real-tier.sh``): a plain ``pytest`` run deselects
these tests, since the first run builds llama-server (about 6 minutes on 2 cores).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .llama import LlamaServer, find_binary
from .tinymodels import ModelSet, Shape, ensure_models

MARKER = "real_server"
# A target 2x wider and 2x deeper than the tiny one: one verify step costs several times more.
LARGE = Shape(n_embd=512, n_layer=8, n_head=8, n_ff=1536)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep the tier out of runs that did not ask for it by marker."""
    if MARKER in (config.option.markexpr or ""):
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


def results_of(report_dir: Path) -> dict[str, Any]:
    """The results document of the one run written under ``report_dir``."""
    found = sorted(report_dir.glob("*/results.json"))
    assert len(found) == 1, f"expected one run under {report_dir}, found {found}"
    data: dict[str, Any] = json.loads(found[0].read_text())
    return data
