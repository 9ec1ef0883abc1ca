#!/usr/bin/env bash
# The real-server tier: build (once; cached outside the checkout) or reuse llama-server, then
# run the tests that drive the real suite against it with tiny generated models.
#   usage: ci/real-tier.sh [pytest args...]   (SPECPERF_LLAMA_SERVER=/path uses that binary)
# Expects the project installed with its `real` extra: pip install -e ".[dev,real]"
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${SPECPERF_LLAMA_SERVER:-}" ]; then
  start=$(date +%s)
  SPECPERF_LLAMA_SERVER="$(bash ci/build-llama-server.sh | tail -n 1)"
  echo "llama-server: $SPECPERF_LLAMA_SERVER (ready in $(( $(date +%s) - start )) s)"
  export SPECPERF_LLAMA_SERVER
fi
exec python -m pytest tests/real -m real_server -p no:cacheprovider -n 0 -q -rA "$@"
